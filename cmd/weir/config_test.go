package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/cli"
)

// Every command takes --config: its flag set accepts the example 'weir
// config example' prints for it, commented (as printed) and with every key
// that has a default uncommented (then each flag keeps its default); an
// unknown key fails the command with exit 2 and names file and line.
func TestConfigEveryCommand(t *testing.T) {
	dir := t.TempDir()
	keyLine := regexp.MustCompile(`(?m)^# ([a-z0-9-]+): (.+)$`)
	for _, c := range commands() {
		if c.Hidden {
			continue
		}
		fs := c.FlagSet()
		if fs == nil {
			t.Errorf("%s: no flag set", c.Name)
			continue
		}
		if fs.Lookup("config") == nil {
			t.Errorf("%s: no --config", c.Name)
		}
		code, ex, errs := runCLI("config", "example", c.Name)
		if code != exitOK {
			t.Fatalf("config example %s: exit %d: %s", c.Name, code, errs)
		}
		keys := 0
		fs.VisitAll(func(f *flag.Flag) {
			if f.Name != "config" && len(f.Name) > 1 && !strings.Contains(ex, "\n# "+f.Name+": ") {
				t.Errorf("%s: example lacks --%s", c.Name, f.Name)
			}
			keys++
		})
		file := filepath.Join(dir, strings.ReplaceAll(c.Name, " ", "-")+".yaml")
		if err := os.WriteFile(file, []byte(ex), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := cli.LoadConfig(c.FlagSet(), file); err != nil {
			t.Errorf("%s: its example: %v", c.Name, err)
		}
		set := map[string]bool{}
		paras := strings.Split(ex, "\n\n")
		for i, p := range paras[1:] { // the key is each paragraph's last line
			lines := strings.Split(strings.TrimSuffix(p, "\n"), "\n")
			m := keyLine.FindStringSubmatch(lines[len(lines)-1])
			if m == nil {
				t.Fatalf("%s: paragraph %q does not end in a key", c.Name, p)
			}
			if m[2] == `""` || m[2] == "[]" {
				continue // no default: the flag stays unset
			}
			set[m[1]] = true
			lines[len(lines)-1] = m[1] + ": " + m[2]
			paras[i+1] = strings.Join(lines, "\n")
		}
		uncommented := strings.Join(paras, "\n\n") + "\n"
		if err := os.WriteFile(file, []byte(uncommented), 0o600); err != nil {
			t.Fatal(err)
		}
		fs = c.FlagSet()
		if err := cli.LoadConfig(fs, file); err != nil {
			t.Errorf("%s: its example uncommented: %v\n%s", c.Name, err, uncommented)
			continue
		}
		fs.Visit(func(f *flag.Flag) {
			if !set[f.Name] {
				t.Errorf("%s: --%s set, not in the file", c.Name, f.Name)
			} else if f.Value.String() != f.DefValue {
				t.Errorf("%s: --%s is %q from its example, default %q", c.Name, f.Name, f.Value.String(), f.DefValue)
			}
		})

		bad := filepath.Join(dir, "bad.yaml")
		os.WriteFile(bad, []byte("# a comment\n\nno-such-flag: 1\n"), 0o600)
		code, _, errs = runCLI(append(strings.Fields(c.Name), "--config", bad)...)
		if code != exitUsage || !strings.Contains(errs, bad+`:3: unknown key "no-such-flag"`) {
			t.Errorf("%s --config with an unknown key: exit %d, stderr %q", c.Name, code, errs)
		}
	}
}

// The command line wins over the file, the file over the default.
func TestConfigPrecedenceCommand(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "store.yaml")
	os.WriteFile(file, []byte("data-dir: "+filepath.Join(dir, "from-file")+"\n"), 0o600)
	_, _, errs := runCLI("store", "check", "--config", file)
	if !strings.Contains(errs, "no flow store at "+filepath.Join(dir, "from-file")) {
		t.Errorf("file not applied: %s", errs)
	}
	_, _, errs = runCLI("store", "check", "-d", filepath.Join(dir, "from-flag"), "--config", file)
	if !strings.Contains(errs, "no flow store at "+filepath.Join(dir, "from-flag")) {
		t.Errorf("command line did not win: %s", errs)
	}
	os.WriteFile(file, []byte("output: xml\n"), 0o600)
	code, _, errs := runCLI("query", "--config", file, "sip")
	if code != exitUsage || !strings.Contains(errs, `"xml"`) {
		t.Errorf("query output from the file: exit %d, %s", code, errs)
	}
	if code, _, errs = runCLI("query", "--config", file, "-o", "bogus-too", "sip"); !strings.Contains(errs, "bogus-too") {
		t.Errorf("query -o on the command line: exit %d, %s", code, errs)
	}
}
