package clickhouse

import (
	"testing"
	"time"
)

func TestParseRetention(t *testing.T) {
	day := 24 * time.Hour
	for s, want := range map[string]time.Duration{"30d": 30 * day, "1d": day, "720h": 30 * day, "36500d": 36500 * day} {
		if got, err := ParseRetention(s); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "0d", "-1d", "1.5d", "25h", "x", "36501d", "030d", "30", "d"} {
		if got, err := ParseRetention(s); err == nil {
			t.Errorf("%q: %v, want an error", s, got)
		}
	}
}
