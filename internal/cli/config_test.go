package cli

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

type opts struct {
	dir, output string
	limit       int
	dur         time.Duration
	stats       bool
	read        List
}

func testSet(o *opts) *flag.FlagSet {
	fs := NewFlagSet("capture", "weir capture [flags]", "Meter packets.", "  weir capture -r x\n")
	fs.StringVar(&o.dir, "data-dir", "./weir-data", "the flow store's `dir`")
	fs.StringVar(&o.dir, "d", "./weir-data", "short for --data-dir")
	fs.StringVar(&o.output, "output", "table", "output `format`")
	fs.StringVar(&o.output, "o", "table", "short for --output")
	fs.IntVar(&o.limit, "limit", 100000, "rows")
	fs.DurationVar(&o.dur, "duration", time.Minute, "how long")
	fs.BoolVar(&o.stats, "stats", false, "print counters")
	fs.Var(&o.read, "read", "capture `file`s; repeatable")
	return fs
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "weir.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Flags given on the command line win over the file, the file over the
// defaults, also when the command line used the short alias.
func TestConfigPrecedence(t *testing.T) {
	p := writeFile(t, "data-dir: /var/lib/weir\noutput: json\nlimit: 7\nduration: 5s\nstats: true\nread: [a.pcap, b.pcap]\n")
	var o opts
	pos, err := Parse(testSet(&o), []string{"-o", "csv", "--config", p, "GROUP", "--limit=3"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if o.output != "csv" || o.limit != 3 {
		t.Errorf("command line lost: output %q limit %d, want csv and 3", o.output, o.limit)
	}
	if o.dir != "/var/lib/weir" || o.dur != 5*time.Second || !o.stats || strings.Join(o.read, " ") != "a.pcap b.pcap" {
		t.Errorf("file not applied: %+v", o)
	}
	if len(pos) != 1 || pos[0] != "GROUP" {
		t.Errorf("positional %q", pos)
	}
	var d opts
	if _, err := Parse(testSet(&d), nil, true); err != nil || d.dir != "./weir-data" || d.limit != 100000 {
		t.Errorf("defaults without a file: %+v %v", d, err)
	}
}

// Every mistake names the file and the line it is on.
func TestConfigErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"output: json\nouptut: csv\n", `:2: unknown key "ouptut": weir capture has no flag --ouptut (did you mean output?)`},
		{"\n\nbogus: 1\n", `:3: unknown key "bogus"`},
		{"o: json\n", ":1: o is a short flag: use its long name, output"},
		{"limit: 1\nlimit: 2\n", ":2: limit is given twice (also on line 1)"},
		{"limit: ten\n", `:1: limit: parse error`},
		{"output: [json, csv]\n", ":1: output: takes one value, not a list"},
		{"read:\n  - a\n  - {x: 1}\n", ":2: read: line 3: each element must be one value"},
		{"stats:\n", ":1: stats: no value"},
		{"data-dir: {a: b}\n", ":1: data-dir: want a value or a list, not a mapping"},
		{"- read\n", ":1: want a mapping of flag names"},
		{"config: other.yaml\n", ":1: config files do not include other config files"},
		{"output: json\n---\nlimit: 1\n", ":2: one document only"},
		{"output: [json\n", ":1: not YAML"},
		{"stats: &x true\nlimit: *x\n", ":2: limit: YAML aliases"},
	} {
		p := writeFile(t, c.text)
		var o opts
		_, err := Parse(testSet(&o), []string{"--config", p}, false)
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), p+c.want) && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.text, err, c.want)
		}
		if ce != nil && !strings.HasPrefix(err.Error(), p) {
			t.Errorf("%q: error %q does not start with the file name", c.text, err)
		}
	}
	var o opts
	if _, err := Parse(testSet(&o), []string{"--config", "/nonexistent/weir.yaml"}, false); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
	big := writeFile(t, "# "+strings.Repeat("x", MaxConfigSize)+"\n")
	if _, err := Parse(testSet(&o), []string{"--config", big}, false); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized file: %v", err)
	}
	empty := writeFile(t, "# nothing\n")
	if _, err := Parse(testSet(&o), []string{"--config", empty}, false); err != nil {
		t.Errorf("a file of comments: %v", err)
	}
}

// The example lists every long flag once, commented out; uncommented it
// loads and gives every flag its default.
func TestExampleRoundTrip(t *testing.T) {
	var o opts
	var b bytes.Buffer
	if err := WriteExample(&b, testSet(&o)); err != nil {
		t.Fatal(err)
	}
	ex := b.String()
	for _, want := range []string{"# data-dir: ./weir-data\n", "# output: table\n", "# limit: 100000\n", "# duration: 1m0s\n", "# stats: false\n", "# read: []\n"} {
		if !strings.Contains(ex, want) {
			t.Errorf("example lacks %q:\n%s", want, ex)
		}
	}
	if strings.Contains(ex, "# d:") || strings.Contains(ex, "# o:") || strings.Contains(ex, "# config:") {
		t.Errorf("example lists short flags or config:\n%s", ex)
	}
	uncommented := regexp.MustCompile(`(?m)^# ([a-z-]+: )`).ReplaceAllString(ex, "$1")
	p := writeFile(t, uncommented)
	var u opts
	fs := testSet(&u)
	if _, err := Parse(fs, []string{"--config", p}, false); err != nil {
		t.Fatalf("uncommented example: %v\n%s", err, uncommented)
	}
	if u.dir != "./weir-data" || u.output != "table" || u.limit != 100000 || u.dur != time.Minute || u.stats || len(u.read) != 0 {
		t.Errorf("uncommented example changed defaults: %+v", u)
	}
}
