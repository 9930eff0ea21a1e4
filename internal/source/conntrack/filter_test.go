package conntrack

import (
	"strings"
	"testing"
)

func TestParseFilter(t *testing.T) {
	var c StoreConfig
	if err := c.ParseFilter([]string{"1,0x10", "65535"}, "0x10/0xf0", []string{"0", "127", "9"}); err != nil {
		t.Fatal(err)
	}
	if len(c.Zones) != 3 || c.Zones[0] != 1 || c.Zones[1] != 16 || c.Zones[2] != 65535 {
		t.Errorf("zones %v", c.Zones)
	}
	if c.Mark != 0x10 || c.MarkMask != 0xf0 {
		t.Errorf("mark %#x/%#x", c.Mark, c.MarkMask)
	}
	if c.Labels[0] != 1 || c.Labels[1] != 2 || c.Labels[15] != 0x80 {
		t.Errorf("labels %v", c.Labels)
	}
	var d StoreConfig
	if err := d.ParseFilter(nil, "7", nil); err != nil || d.Mark != 7 || d.MarkMask != 0xffffffff {
		t.Errorf("mark without mask: %#x/%#x, %v", d.Mark, d.MarkMask, err)
	}
	for _, tc := range []struct {
		zones, labels []string
		mark, want    string
	}{
		{zones: []string{"65536"}, want: `--ct-zone "65536": a zone is 0-65535`},
		{zones: []string{"1,"}, want: `--ct-zone "": a zone`},
		{mark: "0x11/0x10", want: "--ct-mark \"0x11/0x10\": want value[/mask]"},
		{mark: "1/0", want: "non-zero mask"},
		{mark: "x", want: "--ct-mark"},
		{labels: []string{"128"}, want: `--ct-label "128": a label bit is 0-127`},
	} {
		var c StoreConfig
		if err := c.ParseFilter(tc.zones, tc.mark, tc.labels); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseFilter(%v, %q, %v) = %v, want %q", tc.zones, tc.mark, tc.labels, err, tc.want)
		}
	}
}
