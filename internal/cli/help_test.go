package cli

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

func TestHelp(t *testing.T) {
	var o opts
	fs := testSet(&o)
	var b bytes.Buffer
	WriteHelp(&b, fs)
	h := b.String()
	for _, want := range []string{
		"Usage:\n  weir capture [flags]\n", "Meter packets.",
		"  -d, --data-dir dir\n      the flow store's dir (default ./weir-data)\n",
		"  -o, --output format\n",
		"  --limit int\n      rows (default 100,000)\n",
		"  --duration duration\n      how long (default 1m)\n",
		"  --stats\n      print counters\n",
		"\nExamples:\n  weir capture -r x\n",
	} {
		if !strings.Contains(h, want) {
			t.Errorf("help lacks %q:\n%s", want, h)
		}
	}
	if strings.Contains(h, "  -o string") || strings.Contains(h, "short for") {
		t.Errorf("short flag listed on its own:\n%s", h)
	}
	// An examples text that brings its own heading gets one heading.
	fs2 := NewFlagSet("collect", "weir collect", "Collect.", "Examples:\n  weir collect\n")
	b.Reset()
	WriteHelp(&b, fs2)
	if n := strings.Count(b.String(), "Examples:"); n != 1 {
		t.Errorf("Examples: %d times:\n%s", n, b.String())
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 100000: "100,000", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := Count(n); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
}

// A command's flag set is had without running the command, and Find
// matches the longest name.
func TestFlagSetAndFind(t *testing.T) {
	ran := false
	cmds := []Command{
		{Name: "bench gendb", Run: func(args []string, _, _ io.Writer) int {
			var o opts
			fs := testSet(&o)
			if _, err := Parse(fs, args, false); err != nil {
				return 2
			}
			ran = true
			return 0
		}},
		{Name: "bench", Run: func([]string, io.Writer, io.Writer) int { return 0 }},
	}
	fs := cmds[0].FlagSet()
	if fs == nil || fs.Lookup("data-dir") == nil || DocOf(fs).Usage != "weir capture [flags]" || ran {
		t.Fatalf("FlagSet: %v, ran %v", fs, ran)
	}
	c, rest, ok := Find(cmds, []string{"bench", "gendb", "-d", "x"})
	if !ok || c.Name != "bench gendb" || len(rest) != 2 {
		t.Errorf("Find: %q %q %v", c.Name, rest, ok)
	}
	if g := Group(cmds, "bench"); len(g) != 1 {
		t.Errorf("Group: %d", len(g))
	}
}
