package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/cli"
)

// 'weir help' lists every command of the table, subcommands by their full
// name; a group alone lists its commands.
func TestHelpLists(t *testing.T) {
	code, out, _ := runCLI("help")
	for _, c := range commands() {
		if c.Hidden == strings.Contains(out, "\n  "+c.Name+" ") {
			t.Errorf("weir help: %q listed: %v, hidden: %v", c.Name, !c.Hidden, c.Hidden)
		}
	}
	if code != exitOK || !strings.Contains(out, "  bench run ") || !strings.Contains(out, "  bench compare ") {
		t.Errorf("weir help: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI("help", "bench")
	if code != exitOK || !strings.Contains(out, "weir bench gendb") || !strings.Contains(out, "weir bench compare") {
		t.Errorf("weir help bench: exit %d\n%s", code, out)
	}
	code, _, errs := runCLI("bench", "nope")
	if code != exitUsage || !strings.Contains(errs, `weir bench: unknown command "nope"`) {
		t.Errorf("weir bench nope: exit %d, %s", code, errs)
	}
	code, out, _ = runCLI("help", "store", "check")
	if code != exitOK || !strings.Contains(out, "--repair") {
		t.Errorf("weir help store check: exit %d\n%s", code, out)
	}
}

// Every command's help: one "Examples:", short flags beside their long
// names (never "-o string" alone), a default at most once per flag,
// counts in defaults written 100,000.
func TestHelpTexts(t *testing.T) {
	shortAlone := regexp.MustCompile(`(?m)^  -[a-zA-Z] \S+$`)
	rawCount := regexp.MustCompile(`\(default \d{4,}\)`)
	for _, c := range commands() {
		if c.Hidden {
			continue
		}
		code, out, errs := runCLI(append(strings.Fields(c.Name), "--help")...)
		if code != exitOK || !strings.HasPrefix(out, "Usage:\n  weir "+c.Name) {
			t.Errorf("%s --help: exit %d, stderr %q\n%s", c.Name, code, errs, out)
			continue
		}
		if n := strings.Count(out, "Examples:"); n > 1 {
			t.Errorf("%s --help: Examples: %d times", c.Name, n)
		}
		if m := shortAlone.FindString(out); m != "" {
			t.Errorf("%s --help: short flag on its own: %q", c.Name, m)
		}
		if strings.Contains(out, "short for --") {
			t.Errorf("%s --help: an alias listed as a flag", c.Name)
		}
		for _, entry := range strings.Split(out, "\n  -") {
			if n := strings.Count(entry, "(default"); n > 1 {
				t.Errorf("%s --help: default twice in %q", c.Name, entry)
			}
			name, _, _ := strings.Cut(entry, "\n")
			if m := rawCount.FindString(entry); m != "" && !strings.Contains(name, "port") {
				t.Errorf("%s --help: count without separators: %q", c.Name, entry)
			}
		}
	}
	_, out, _ := runCLI("collect", "--help")
	if !strings.Contains(out, "\nExamples:\n  # Collect IPFIX") {
		t.Errorf("collect --help lacks its examples:\n%s", out)
	}
	_, out, _ = runCLI("query", "--help")
	if !strings.Contains(out, "  -o, --output format\n") || !strings.Contains(out, "  -d, --data-dir dir\n") {
		t.Errorf("query --help: short flags not beside their long names:\n%s", out)
	}
}

// Every help text in help/ is a command's.
func TestHelpFilesHaveCommands(t *testing.T) {
	ents, err := helpFiles.ReadDir("help")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		name := strings.ReplaceAll(strings.TrimSuffix(e.Name(), ".txt"), "-", " ")
		if _, _, ok := cli.Find(commands(), strings.Fields(name)); !ok {
			t.Errorf("help/%s: no command %q", e.Name(), name)
		}
		if fs := helpFlagSet(name); cli.DocOf(fs).Usage == "" || cli.DocOf(fs).Description == "" {
			t.Errorf("help/%s: no usage or description", e.Name())
		}
	}
}
