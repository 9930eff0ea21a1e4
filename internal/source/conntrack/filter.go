package conntrack

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseFilter sets the store's filter from weir capture's --ct-zone
// (numbers 0-65535, comma-separated or repeated), --ct-mark (value[/mask],
// hex 0x.. or decimal) and --ct-label (label bits 0-127, any of them)
// values; its errors name those flags.
func (c *StoreConfig) ParseFilter(zones []string, mark string, labels []string) error {
	for _, s := range zones {
		for _, part := range strings.Split(s, ",") {
			v, err := strconv.ParseUint(part, 0, 16)
			if err != nil {
				return fmt.Errorf("--ct-zone %q: a zone is 0-65535", part)
			}
			c.Zones = append(c.Zones, uint16(v))
		}
	}
	if mark != "" {
		val, mask, hasMask := strings.Cut(mark, "/")
		v, err := strconv.ParseUint(val, 0, 32)
		m := uint64(0xffffffff)
		if err == nil && hasMask {
			m, err = strconv.ParseUint(mask, 0, 32)
		}
		if err != nil || m == 0 || v&^m != 0 {
			return fmt.Errorf("--ct-mark %q: want value[/mask] with a non-zero mask covering the value", mark)
		}
		c.Mark, c.MarkMask = uint32(v), uint32(m)
	}
	for _, l := range labels {
		v, err := strconv.ParseUint(l, 0, 8)
		if err != nil || v > 127 {
			return fmt.Errorf("--ct-label %q: a label bit is 0-127", l)
		}
		c.Labels[v/8] |= 1 << (v % 8)
	}
	return nil
}
