package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestUsageAndExitCodes(t *testing.T) {
	for _, c := range []struct {
		args     []string
		code     int
		out, err string // substrings expected on stdout / stderr
	}{
		{nil, exitUsage, "", "Usage:"},
		{[]string{"help"}, exitOK, "Commands:", ""},
		{[]string{"bogus"}, exitUsage, "", `unknown command "bogus"`},
		{[]string{"capture", "--help"}, exitOK, "Examples:", ""},
		{[]string{"help", "capture"}, exitOK, "--max-flows", ""},
		{[]string{"capture"}, exitUsage, "", "give exactly one input"},
		{[]string{"capture", "--read=x", "--synthetic=flows=1"}, exitUsage, "", "give exactly one input"},
		{[]string{"capture", "--read=x", "--output=xml"}, exitUsage, "", `unknown --output "xml"`},
		{[]string{"capture", "--read=x", "--max-flows=0"}, exitUsage, "", "--max-flows must be at least 1"},
		{[]string{"capture", "--nope"}, exitUsage, "", "flag provided but not defined: -nope"},
		{[]string{"capture", "--synthetic=flows=1", "stray"}, exitUsage, "", `unexpected argument "stray"`},
		{[]string{"capture", "--read=/nonexistent/a.pcap", "stray.pcap"}, exitFailure, "", "a.pcap: no such file"}, // several files: all checked before reading
		{[]string{"capture", "--read=/nonexistent/file.pcap"}, exitFailure, "", "no such file"},
		{[]string{"capture", "--synthetic=flows=x"}, exitUsage, "", `flows: "x" is not an integer`},
		{[]string{"capture", "--synthetic=bogus=1"}, exitUsage, "", `unknown key "bogus"`},
		{[]string{"version"}, exitOK, "weir dev", ""},
		{[]string{"--version"}, exitOK, "weir dev", ""},
	} {
		code, out, errs := runCLI(c.args...)
		if code != c.code || !strings.Contains(out, c.out) || !strings.Contains(errs, c.err) {
			t.Errorf("weir %q: exit %d (want %d)\nstdout: %s\nstderr: %s\nwant stdout ∋ %q, stderr ∋ %q",
				c.args, code, c.code, out, errs, c.out, c.err)
		}
	}
}

// A capture cut short (weir or tcpdump killed mid-write) still reports every
// flow read before the cut, with reason eof, then fails with exit 1 and says
// where the file is damaged.
func TestTruncatedCaptureStillReportsFlows(t *testing.T) {
	path, _ := writeScenario(t, 1, false)
	full := captureJSON(t, path)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.pcapng")
	if err := os.WriteFile(cut, data[:len(data)*2/3+5], 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI("capture", "--read", cut, "-o", "json")
	if code != exitFailure || !strings.Contains(errs, "cut short") || !strings.Contains(errs, "offset") {
		t.Fatalf("exit %d, stderr %q; want exit 1 naming the truncation and its offset", code, errs)
	}
	lines := strings.Count(out, "\n")
	if lines == 0 || lines >= len(full) {
		t.Fatalf("truncated file gave %d records; the full one %d", lines, len(full))
	}
	if !strings.Contains(out, `"end_reason":"eof"`) {
		t.Error("flows open at the cut should be flushed with reason eof")
	}
}

func TestSyntheticStats(t *testing.T) {
	code, out, errs := runCLI("capture", "--synthetic=flows=500,packets=20000,seed=3", "-o", "none", "--stats", "--max-flows=1000")
	if code != exitOK || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, out, errs)
	}
	for _, want := range []string{"frames      20,000 read", "decoded     20,000", "500 flows created", "records     500: eof 500", "100 B/slot"} {
		if !strings.Contains(errs, want) {
			t.Errorf("--stats lacks %q:\n%s", want, errs)
		}
	}
}
