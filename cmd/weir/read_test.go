package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/craft"
	"github.com/weir-dev/weir/internal/source/pcap"
)

// writeScenarioParts writes craft's scenario cut by time into parts
// pcapng files, as a rotating capture would (every file declares every
// interface), compressing the ones named in zip with the tool.
func writeScenarioParts(t *testing.T, dir string, parts int, zip map[int]string) []string {
	t.Helper()
	frames, _ := craft.Scenario(1)
	var paths []string
	per := (len(frames) + parts - 1) / parts
	for i := 0; i < parts; i++ {
		var buf bytes.Buffer
		w, err := pcap.NewNgWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]int{}
		for _, ifc := range craft.ScenarioIfaces {
			if ids[ifc.Name], err = w.AddInterface(ifc.Name, ifc.Link, 65535); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range frames[i*per : min((i+1)*per, len(frames))] {
			if err := w.WritePacket(ids[f.Iface], f.Time, f.WireLen, f.Data); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		data, name := buf.Bytes(), filepath.Join(dir, "rot.pcapng"+strings.Repeat("1", i))
		if tool := zip[i]; tool != "" {
			data, name = compress(t, tool, data), name+map[string]string{"gzip": ".gz", "zstd": ".zst"}[tool]
		}
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, name)
	}
	return paths
}

// compress runs gzip or zstd (the tools) over b.
func compress(t *testing.T, tool string, b []byte) []byte {
	t.Helper()
	bin, err := exec.LookPath(tool)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not installed; run scripts/deps.sh", tool)
		}
		t.Skipf("%s not installed; run scripts/deps.sh", tool)
	}
	cmd := exec.Command(bin, "-c", "-q")
	cmd.Stdin = bytes.NewReader(b)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return out
}

// sortedJSON runs weir capture and returns its JSON records as sorted
// lines (the table's flush order is not fixed).
func sortedJSON(t *testing.T, args ...string) []string {
	t.Helper()
	var out, errb bytes.Buffer
	args = append([]string{"capture", "--output=json"}, args...)
	if code := run(args, &out, &errb); code != exitOK {
		t.Fatalf("weir %v: exit %d\n%s", args, code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	slices.Sort(lines)
	return lines
}

// TestReadSeveral: a capture rotated into files, some compressed, read as
// --read FILE FILE... or --read FILE --read FILE..., gives exactly the
// records of the whole capture read at once (flows spanning the cuts are
// one flow: the timeouts run across the files).
func TestReadSeveral(t *testing.T) {
	dir := t.TempDir()
	whole, _ := writeScenario(t, 1, false)
	parts := writeScenarioParts(t, dir, 3, map[int]string{1: "gzip", 2: "zstd"})
	want := sortedJSON(t, "--read", whole)
	if len(want) < 300 {
		t.Fatalf("only %d records from the whole scenario", len(want))
	}
	for _, args := range [][]string{
		append([]string{"--read"}, parts...),
		{"--read", parts[0], "--read", parts[1], "-r", parts[2]},
		{"--read", parts[0], parts[1], "--stats", parts[2]}, // flags between the files
	} {
		if got := sortedJSON(t, args...); !slices.Equal(got, want) {
			t.Fatalf("weir capture %v: %d records differ from the whole file's %d", args, len(got), len(want))
		}
	}
}

// TestReadErrors: a damaged file is named (exit 1, the records before the
// damage still printed); a missing one fails before reading; usage
// mistakes exit 2.
func TestReadErrors(t *testing.T) {
	dir := t.TempDir()
	parts := writeScenarioParts(t, dir, 2, nil)
	b, err := os.ReadFile(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.pcapng")
	if err := os.WriteFile(cut, b[:len(b)-100], 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"capture", "-o", "json", "--read", parts[0], cut}, &out, &errb); code != exitFailure ||
		!strings.Contains(errb.String(), cut+": pcap: file ends inside") || out.Len() == 0 {
		t.Fatalf("cut second file: exit %d, %d bytes of records\n%s", code, out.Len(), errb.String())
	}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--read", parts[0], filepath.Join(dir, "nope.pcap")}, exitFailure, "nope.pcap: no such file"},
		{[]string{"--read", "-", "--read", "-"}, exitUsage, "standard input (-) can be read only once"},
		{[]string{"-o", "none", parts[0]}, exitUsage, "only --read takes several files"},
		{[]string{"--read", parts[0], "--decap", "vxlan,gue"}, exitUsage, `unknown tunnel "gue"`},
		{[]string{"--source", "conntrack", "--decap", "vxlan"}, exitUsage, "--decap needs the packets"},
	} {
		out.Reset()
		errb.Reset()
		if code := run(append([]string{"capture"}, c.args...), &out, &errb); code != c.code || !strings.Contains(errb.String(), c.msg) {
			t.Errorf("weir capture %v: exit %d, want %d with %q\n%s", c.args, code, c.code, c.msg, errb.String())
		}
	}
}
