package cli

import (
	"flag"
	"strings"
	"testing"
	"time"
)

func TestSizeFlags(t *testing.T) {
	var s Size
	for in, want := range map[string]string{"4096": "4KiB", "1MiB": "1MiB", "3K": "3KiB", "1000": "1000", "1G": "1GiB"} {
		if err := s.Set(in); err != nil || s.String() != want {
			t.Errorf("Size %q: %q, %v; want %q", in, s.String(), err, want)
		}
	}
	for _, bad := range []string{"0", "-1", "2GiB", "1.5M", "MiB", ""} {
		if err := s.Set(bad); err == nil || !strings.Contains(err.Error(), "is not a size up to 1") {
			t.Errorf("Size %q: %v", bad, err)
		}
	}
	var b Bytes
	if err := b.Set("20GiB"); err != nil || int64(b) != 20<<30 {
		t.Errorf("Bytes 20GiB: %d, %v", b, err)
	}
	if err := b.Set("0"); err != nil || b.String() != "0" {
		t.Errorf("Bytes 0: %v %v", b, err)
	}
	if err := b.Set("2048T"); err == nil {
		t.Error("Bytes 2048T (2 PiB) accepted")
	}
}

func TestDays(t *testing.T) {
	d := Days{Parse: func(s string) (time.Duration, error) {
		if s == "30d" {
			return 30 * 24 * time.Hour, nil
		}
		return time.ParseDuration(s)
	}}
	if err := d.Set("30d"); err != nil || d.String() != "30d" {
		t.Errorf("30d: %q %v", d.String(), err)
	}
	if err := d.Set("90m"); err != nil || d.String() != "1h30m0s" {
		t.Errorf("90m: %q %v", d.String(), err)
	}
	if err := d.Set("soon"); err == nil || !strings.Contains(err.Error(), `"soon" is not a duration`) {
		t.Errorf("soon: %v", err)
	}
	if err := d.Set("0"); err != nil || d.String() != "0" {
		t.Errorf("0: %q %v", d.String(), err)
	}
}

func TestUint16sAndSelection(t *testing.T) {
	got, err := Uint16s([]string{"1,2", "0x10"}, "--x", "group")
	if err != nil || len(got) != 3 || got[2] != 16 {
		t.Errorf("Uint16s: %v %v", got, err)
	}
	if _, err := Uint16s([]string{"70000"}, "--x", "group"); err == nil || err.Error() != `--x "70000": a group is 0-65535` {
		t.Errorf("Uint16s 70000: %v", err)
	}
	var sel Selection
	var dir string
	fs := NewFlagSet("t", "t", "", "")
	DataDirVar(fs, &dir, "store")
	sel.Flags(fs, nil, nil)
	if _, err := Parse(fs, []string{"-i", "eth0", "--iface", "eth1", "-c", "dport = 53", "-f", "-1h", "--to", "now", "-d", "/x"}, false); err != nil {
		t.Fatal(err)
	}
	if sel.Ifaces.String() != "eth0,eth1" || sel.Condition != "dport = 53" || sel.From != "-1h" || sel.To != "now" || dir != "/x" {
		t.Errorf("selection %+v dir %q", sel, dir)
	}
	if !IsSet(fs, "data-dir", "d") || IsSet(fs, "data-dir") || IsSet(flag.NewFlagSet("e", flag.ContinueOnError), "d") {
		t.Error("IsSet wrong")
	}
}
