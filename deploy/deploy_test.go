// Package deploy holds weir's deployment files — systemd units, sample
// configs, the sysusers entry — and the tests of `make install` and of
// the release builds for other systems.
package deploy

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// need skips (outside CI) or fails (in CI, where scripts/deps.sh installs
// every tool) when a tool is missing.
func need(t *testing.T, tool, pkg string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed (scripts/deps.sh test installs %s)", tool, pkg)
		}
		t.Skipf("%s is not installed (apt-get install %s)", tool, pkg)
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// install runs make install into a new DESTDIR with the given variables
// and returns the DESTDIR.
func install(t *testing.T, dest string, vars ...string) {
	t.Helper()
	args := append([]string{"-s", "install", "DESTDIR=" + dest, "BIN=" + filepath.Join(t.TempDir(), "weir")}, vars...)
	cmd := exec.Command("make", args...)
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestMakeInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds weir: not in -short")
	}
	need(t, "make", "make")
	dest := t.TempDir()
	install(t, dest, "PREFIX=/opt/weir")

	got := map[string]fs.FileMode{}
	filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			info, _ := d.Info()
			got[strings.TrimPrefix(p, dest)] = info.Mode().Perm()
		}
		return err
	})
	want := map[string]fs.FileMode{
		"/opt/weir/bin/weir":                                  0o755,
		"/opt/weir/share/man/man1/weir.1":                     0o644,
		"/opt/weir/share/man/man1/weir-capture.1":             0o644,
		"/opt/weir/share/man/man1/weir-collect.1":             0o644,
		"/opt/weir/share/man/man1/weir-query.1":               0o644,
		"/opt/weir/share/man/man1/weir-store-check.1":         0o644,
		"/opt/weir/share/man/man1/weir-bench-run.1":           0o644,
		"/opt/weir/share/bash-completion/completions/weir":    0o644,
		"/opt/weir/share/zsh/site-functions/_weir":            0o644,
		"/opt/weir/share/fish/vendor_completions.d/weir.fish": 0o644,
		"/opt/weir/lib/systemd/system/weir-capture.service":   0o644,
		"/opt/weir/lib/systemd/system/weir-collect.service":   0o644,
		"/opt/weir/lib/sysusers.d/weir.conf":                  0o644,
		"/opt/weir/share/weir/examples/capture.yaml":          0o644,
		"/opt/weir/share/weir/examples/collect.yaml":          0o644,
		"/etc/weir/capture.yaml":                              0o644,
		"/etc/weir/collect.yaml":                              0o644,
	}
	for p, mode := range want {
		if m, ok := got[p]; !ok {
			t.Errorf("not installed: %s", p)
		} else if m != mode {
			t.Errorf("%s: mode %o, want %o", p, m, mode)
		}
	}
	var man []string
	for p := range got {
		if strings.HasPrefix(p, "/opt/weir/share/man/man1/") {
			man = append(man, filepath.Base(p))
		} else if _, ok := want[p]; !ok {
			t.Errorf("installed but not expected: %s", p)
		}
	}
	sort.Strings(man)
	t.Logf("man pages: %s", strings.Join(man, " "))

	bin := filepath.Join(dest, "opt/weir/bin/weir")
	if out, err := exec.Command(bin, "version").CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "weir ") {
		t.Errorf("installed weir version: %v %q", err, out)
	}
	for _, unit := range []string{"weir-capture.service", "weir-collect.service"} {
		b, _ := os.ReadFile(filepath.Join(dest, "opt/weir/lib/systemd/system", unit))
		if !regexp.MustCompile(`(?m)^ExecStart=/opt/weir/bin/weir \w+ --config /etc/weir/\w+\.yaml$`).Match(b) {
			t.Errorf("%s: ExecStart does not run /opt/weir/bin/weir with its /etc/weir config:\n%s", unit, b)
		}
	}
	// bash reads the completion script without an error.
	if out, err := exec.Command("bash", "-n", filepath.Join(dest, "opt/weir/share/bash-completion/completions/weir")).CombinedOutput(); err != nil {
		t.Errorf("bash -n: %v %s", err, out)
	}

	t.Run("units", func(t *testing.T) { verifyUnits(t, dest, "/opt/weir") })
	t.Run("sample configs", func(t *testing.T) { sampleConfigKeys(t, bin) })

	// A second install keeps the operator's config and replaces the rest.
	edited := []byte("# mine\n")
	os.WriteFile(filepath.Join(dest, "etc/weir/capture.yaml"), edited, 0o644)
	install(t, dest, "PREFIX=/opt/weir")
	if b, _ := os.ReadFile(filepath.Join(dest, "etc/weir/capture.yaml")); !bytes.Equal(b, edited) {
		t.Errorf("a second make install overwrote /etc/weir/capture.yaml: %q", b)
	}
}

// The units ask for what each source needs and nothing else, run as weir
// in a read-only system, and pass systemd's own check.
func TestUnits(t *testing.T) {
	caps := map[string]string{
		"weir-capture.service": "CAP_NET_RAW CAP_NET_ADMIN", // README: AF_PACKET rings (cap_net_admin dropped once open)
		"weir-collect.service": "",                          // ports above 1024: nothing
	}
	for unit, c := range caps {
		b, err := os.ReadFile(filepath.Join("systemd", unit))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"AmbientCapabilities=" + c + "\n", "CapabilityBoundingSet=" + c + "\n",
			"User=weir\n", "NoNewPrivileges=yes\n", "ProtectSystem=strict\n", "StateDirectory=weir\n",
			"ProtectHome=yes\n",
		} {
			if !strings.Contains(string(b), "\n"+want) {
				t.Errorf("%s lacks the line %q", unit, strings.TrimSpace(want))
			}
		}
	}
}

// verifyUnits runs systemd-analyze verify on the units installed under
// dest+prefix. verify checks that ExecStart's binary exists and that the
// man pages in Documentation= open: both are pointed at the installed
// copies.
func verifyUnits(t *testing.T, dest, prefix string) {
	need(t, "systemd-analyze", "systemd")
	dir := t.TempDir()
	bin := filepath.Join(dest, prefix, "bin/weir")
	var units []string
	for _, unit := range []string{"weir-capture.service", "weir-collect.service"} {
		b, err := os.ReadFile(filepath.Join(dest, prefix, "lib/systemd/system", unit))
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.ReplaceAll(b, []byte(prefix+"/bin/weir"), []byte(bin))
		p := filepath.Join(dir, unit)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		units = append(units, p)
	}
	cmd := exec.Command("systemd-analyze", append([]string{"verify", "--man=yes"}, units...)...)
	cmd.Env = append(os.Environ(), "MANPATH="+filepath.Join(dest, prefix, "share/man"), "SYSTEMD_LOG_LEVEL=notice")
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// sampleConfigKeys checks that the sample configs use only flag names of their command (the config
// file's keys are the long flag names).
func sampleConfigKeys(t *testing.T, bin string) {
	key := regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`)
	for _, cmd := range []string{"capture", "collect"} {
		b, err := os.ReadFile(filepath.Join("config", cmd+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		help, _ := exec.Command(bin, cmd, "--help").CombinedOutput()
		keys := key.FindAllSubmatch(b, -1)
		if len(keys) == 0 {
			t.Fatalf("config/%s.yaml has no keys", cmd)
		}
		for _, k := range keys {
			if !regexp.MustCompile(`(?m)^\s+(-\w, )?--` + regexp.QuoteMeta(string(k[1])) + `\b`).Match(help) {
				t.Errorf("config/%s.yaml: %q is not a flag of weir %s", cmd, k[1], cmd)
			}
		}
	}
}

// weir builds for the other systems the releases cover: the store,
// queries, file replay and the collector work there; live sources say
// they need Linux.
func TestCrossBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("two cross builds of weir: not in -short")
	}
	for _, target := range [][2]string{{"darwin", "arm64"}, {"freebsd", "amd64"}} {
		cmd := exec.Command("go", "build", "-o", os.DevNull, "./cmd/weir")
		cmd.Dir = repoRoot(t)
		cmd.Env = append(os.Environ(), "GOOS="+target[0], "GOARCH="+target[1], "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("GOOS=%s GOARCH=%s go build ./cmd/weir (on %s): %v\n%s", target[0], target[1], runtime.GOOS, err, out)
		}
	}
}
