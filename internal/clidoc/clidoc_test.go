package clidoc

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// testProgram has what weir's CLI has: a plain command with a one-letter
// alias, a file flag, a boolean and a repeatable flag; a group with two
// subcommands; a hidden command.
func testProgram(t *testing.T) *Program {
	t.Helper()
	fs := flag.NewFlagSet("capture", flag.ContinueOnError)
	var out string
	fs.StringVar(&out, "output", "table", "output `format`: table, json or none")
	fs.StringVar(&out, "o", "table", "short for --output")
	fs.String("read", "", "read the capture `file` instead")
	fs.Bool("stats", false, "counters to stderr at exit")
	fs.Int("workers", 1, "capture goroutines")
	run := flag.NewFlagSet("bench run", flag.ContinueOnError)
	run.String("data-dir", "", "where results go (`dir`); it's \\ \"quoted\" [x]: y")
	return &Program{
		Name: "weir", Summary: "flow records", Version: "v1.2.3", Date: "2026-01-02",
		Description: "First paragraph.\n.dot line\n'quote line\n\nSecond:\n  indented kept",
		Commands: []Command{
			{Name: "capture", Summary: "turn packets into flow records", Usage: "weir capture [flags]",
				Description: "Meter packets.", Examples: "  weir capture -i eth0 # live\n", Flags: FlagsOf(fs)},
			{Name: "bench run", Summary: "a traffic profile", Usage: "weir bench run PROFILE", Flags: FlagsOf(run)},
			{Name: "bench compare", Summary: "before/after table", Usage: "weir bench compare A B"},
			{Name: "_child", Summary: "internal", Hidden: true},
		},
	}
}

func TestFlagsOfFoldsAliases(t *testing.T) {
	p := testProgram(t)
	got := p.Commands[0].Flags
	want := []Flag{
		{Long: "output", Short: "o", Arg: "format", Usage: "output format: table, json or none", Default: "table"},
		{Long: "read", Arg: "file", Usage: "read the capture file instead"},
		{Long: "stats", Usage: "counters to stderr at exit"},
		{Long: "workers", Arg: "int", Usage: "capture goroutines", Default: "1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("FlagsOf:\n got %+v\nwant %+v", got, want)
	}
	if !got[1].File() || got[0].File() {
		t.Errorf("File(): read %v output %v, want true false", got[1].File(), got[0].File())
	}
}

func TestManPages(t *testing.T) {
	p := testProgram(t)
	dir := t.TempDir()
	names, err := p.WriteManPages(dir)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	if want := []string{"weir-bench-compare.1", "weir-bench-run.1", "weir-capture.1", "weir.1"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("pages %v, want %v (no page for a hidden command)", names, want)
	}
	capture, _ := os.ReadFile(filepath.Join(dir, "weir-capture.1"))
	for _, want := range []string{
		`.TH WEIR\-CAPTURE 1 "2026\-01\-02" "weir v1.2.3" "weir manual"`,
		`weir\-capture \- turn packets into flow records`,
		`\fB\-o\fR, \fB\-\-output\fR \fIformat\fR`,
		"output format: table, json or none (default table)",
		`\fB\-\-stats\fR` + "\n",
		".SH EXAMPLES\n.nf\nweir capture \\-i eth0 # live\n.fi\n",
	} {
		if !strings.Contains(string(capture), want) {
			t.Errorf("weir-capture.1 lacks %q:\n%s", want, capture)
		}
	}
	top, _ := os.ReadFile(filepath.Join(dir, "weir.1"))
	for _, want := range []string{".B weir bench run\n", "\n\\&.dot line\n", "\n\\&'quote line\n", ".nf\nSecond:\n  indented kept\n.fi\n", ".BR weir\\-bench\\-compare (1)"} {
		if !strings.Contains(string(top), want) {
			t.Errorf("weir.1 lacks %q:\n%s", want, top)
		}
	}
	if strings.Contains(string(top), "_child") {
		t.Error("weir.1 lists the hidden command")
	}
	// groff itself: no warning (-ww) for any page, and the text as a
	// reader sees it.
	if _, err := exec.LookPath("groff"); err != nil {
		t.Skip("groff is not installed (apt-get install groff-base): pages not rendered")
	}
	for _, n := range names {
		cmd := exec.Command("groff", "-k", "-man", "-ww", "-Tutf8", filepath.Join(dir, n))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || stderr.Len() > 0 {
			t.Errorf("groff %s: %v %s", n, err, stderr.String())
		}
		if n == "weir-bench-run.1" && !strings.Contains(string(out), `where results go (dir); it's \ "quoted" [x]: y`) {
			t.Errorf("rendered %s lacks the usage text as written:\n%s", n, out)
		}
	}
}

// complete runs the bash completion function on line (the cursor at its
// end) in dir and returns the candidates.
func bashComplete(t *testing.T, script, dir, line string) []string {
	t.Helper()
	words := strings.Fields(line)
	if strings.HasSuffix(line, " ") {
		words = append(words, "")
	}
	var q []string
	for _, w := range words {
		q = append(q, "'"+w+"'")
	}
	sh := script + "\nCOMP_WORDS=(" + strings.Join(q, " ") + ")\nCOMP_CWORD=" + itoa(len(words)-1) +
		"\n_weir\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
	cmd := exec.Command("bash", "--norc", "--noprofile", "-c", sh)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	got := strings.Fields(string(out))
	sort.Strings(got)
	return got
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestBashCompletion(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	var b bytes.Buffer
	if err := testProgram(t).WriteCompletion(&b, "bash"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "trace.pcap"), nil, 0o600)
	for _, c := range []struct {
		line string
		want []string
	}{
		{"weir ", []string{"bench", "capture", "help"}},
		{"weir ca", []string{"capture"}},
		{"weir help ", []string{"bench", "capture"}},
		{"weir bench ", []string{"compare", "run"}},
		{"weir capture --", []string{"--output", "--read", "--stats", "--workers"}},
		{"weir capture -", []string{"--output", "--read", "--stats", "--workers", "-o"}},
		{"weir capture --read ", []string{"trace.pcap"}},
		{"weir capture --stats --read tr", []string{"trace.pcap"}},
		{"weir capture --workers ", nil},
		{"weir bench run --d", []string{"--data-dir"}},
		{"weir _child ", []string{"bench", "capture", "help"}}, // hidden: not a command to complete
	} {
		if got := bashComplete(t, b.String(), dir, c.line); strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%q: got %q, want %q", c.line, got, c.want)
		}
	}
}

func TestFishCompletion(t *testing.T) {
	if _, err := exec.LookPath("fish"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("fish is not installed (scripts/deps.sh test installs it)")
		}
		t.Skip("fish is not installed (apt-get install fish)")
	}
	var b bytes.Buffer
	if err := testProgram(t).WriteCompletion(&b, "fish"); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "weir.fish")
	os.WriteFile(script, b.Bytes(), 0o600)
	for _, c := range []struct {
		line string
		want []string
	}{
		{"weir ", []string{"bench", "capture", "help"}},
		{"weir bench ", []string{"compare", "run"}},
		{"weir capture --", []string{"--output", "--read", "--stats", "--workers"}},
		{"weir bench run --", []string{"--data-dir"}},
	} {
		cmd := exec.Command("fish", "--no-config", "-c", "source "+script+"; complete -C '"+c.line+"'")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("fish: %v\n%s", err, out)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if w, _, _ := strings.Cut(l, "\t"); w != "" {
				got = append(got, w)
			}
		}
		sort.Strings(got)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: got %q, want %q", c.line, got, c.want)
		}
	}
}

func TestZshCompletion(t *testing.T) {
	if _, err := exec.LookPath("zsh"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("zsh is not installed (scripts/deps.sh test installs it)")
		}
		t.Skip("zsh is not installed (apt-get install zsh)")
	}
	var b bytes.Buffer
	if err := testProgram(t).WriteCompletion(&b, "zsh"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "_weir"), b.Bytes(), 0o600)
	// Parsed, autoloaded through fpath as compinit does, and bound to weir.
	out, err := exec.Command("zsh", "-f", "-c", "fpath=("+dir+" $fpath); autoload -Uz compinit; compinit -u -D; "+
		"print -r -- ${_comps[weir]}; autoload +X _weir && print loaded").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "_weir\nloaded" {
		t.Fatalf("zsh: %v\n%s", err, out)
	}
}

func TestUnknownShell(t *testing.T) {
	if err := testProgram(t).WriteCompletion(&bytes.Buffer{}, "tcsh"); err == nil || !strings.Contains(err.Error(), "bash, zsh, fish") {
		t.Fatalf("tcsh: %v, want an error naming the shells", err)
	}
}
