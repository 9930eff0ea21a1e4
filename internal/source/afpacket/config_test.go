package afpacket

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	c, err := RingConfig{Iface: "eth0"}.normalize(4096)
	if err != nil {
		t.Fatal(err)
	}
	want := RingConfig{Iface: "eth0", BlockSize: 1 << 20, NumBlocks: 16, FrameSize: 2048, Timeout: 50 * time.Millisecond}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("defaults: got %+v, want %+v", c, want)
	}
	// Explicit values are kept; Fanout is copied.
	fo := &Fanout{Group: 7, Mode: FanoutLB | FanoutFlagDefrag}
	in := RingConfig{Iface: "lo", BlockSize: 8192, NumBlocks: 2, FrameSize: 80, Timeout: time.Millisecond, Fanout: fo}
	c, err = in.normalize(4096)
	if err != nil {
		t.Fatal(err)
	}
	if c.BlockSize != 8192 || c.NumBlocks != 2 || c.FrameSize != 80 || c.Timeout != time.Millisecond {
		t.Fatalf("explicit values changed: %+v", c)
	}
	if c.Fanout == fo || *c.Fanout != *fo {
		t.Fatalf("Fanout not copied: %p %+v vs %p %+v", c.Fanout, c.Fanout, fo, fo)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  RingConfig
		want string // substring of the error
	}{
		{"no iface", RingConfig{}, "Iface is empty"},
		{"long iface", RingConfig{Iface: "0123456789abcdef"}, "longer than 15"},
		{"block not power of two", RingConfig{Iface: "x", BlockSize: 3 * 4096}, "BlockSize"},
		{"block below page", RingConfig{Iface: "x", BlockSize: 2048}, "BlockSize"},
		{"negative block", RingConfig{Iface: "x", BlockSize: -1}, "BlockSize"},
		{"one block", RingConfig{Iface: "x", NumBlocks: 1}, "NumBlocks"},
		{"too many blocks", RingConfig{Iface: "x", NumBlocks: MaxNumBlocks + 1}, "NumBlocks"},
		{"ring too big", RingConfig{Iface: "x", BlockSize: 1 << 30, NumBlocks: 8}, "exceeds"},
		{"frame unaligned", RingConfig{Iface: "x", FrameSize: 2008}, "FrameSize"},
		{"frame too small", RingConfig{Iface: "x", FrameSize: 64}, "FrameSize"},
		{"frame above block", RingConfig{Iface: "x", BlockSize: 4096, FrameSize: 8192}, "FrameSize"},
		{"timeout sub-ms", RingConfig{Iface: "x", Timeout: time.Microsecond}, "Timeout"},
		{"timeout negative", RingConfig{Iface: "x", Timeout: -time.Second}, "Timeout"},
		{"timeout huge", RingConfig{Iface: "x", Timeout: 2 * time.Hour}, "Timeout"},
		{"fanout mode", RingConfig{Iface: "x", Fanout: &Fanout{Mode: 6}}, "Fanout.Mode"},
		{"fanout flag", RingConfig{Iface: "x", Fanout: &Fanout{Mode: 0x0800}}, "Fanout.Mode"},
		{"unique id with a group", RingConfig{Iface: "x", Fanout: &Fanout{Group: 7, Mode: FanoutFlagUniqueID}}, "Group 0"},
		{"fanout negative", RingConfig{Iface: "x", Fanout: &Fanout{Mode: -1}}, "Fanout.Mode"},
	} {
		_, err := tc.cfg.normalize(4096)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got error %v, want one mentioning %q", tc.name, err, tc.want)
		}
		if _, err := Open(tc.cfg); err == nil {
			t.Errorf("%s: Open accepted an invalid config", tc.name)
		}
	}
	// Larger pages raise the minimum block size.
	if _, err := (RingConfig{Iface: "x", BlockSize: 4096}).normalize(16384); err == nil {
		t.Error("4 KiB block accepted with 16 KiB pages")
	}
}
