package clickhouse

import (
	"fmt"
	"strings"
	"time"
)

// ParseRetention reads a retention given as "30d" or "720h": a whole
// number of days, at most 100 years.
func ParseRetention(s string) (time.Duration, error) {
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		var days int
		if _, err := fmt.Sscanf(n, "%d", &days); err != nil || days <= 0 || days > 36500 || fmt.Sprint(days) != n {
			return 0, fmt.Errorf("%q: want whole days such as 30d", s)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil || d <= 0 || d%(24*time.Hour) != 0 {
			return 0, fmt.Errorf("%q: want whole days such as 30d", s)
		}
	}
	return d, nil
}
