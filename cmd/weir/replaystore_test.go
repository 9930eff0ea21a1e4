package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayStoreOnlyWhenAsked: --read and --synthetic leave the default
// store alone (replaying a file twice must not duplicate it there) and
// write to a --data-dir given; a replay that cannot start says why,
// prints no table and creates no data directory.
func TestReplayStoreOnlyWhenAsked(t *testing.T) {
	def := filepath.Join(t.TempDir(), "default")
	t.Setenv("WEIR_DATA_DIR", def)
	path, _ := writeScenario(t, 1, false)
	if code, out, errs := runCLI("capture", "--read", path, "-o", "table"); code != exitOK || out == "" {
		t.Fatalf("exit %d:\n%s%s", code, out, errs)
	}
	if code, _, errs := runCLI("capture", "--synthetic", "flows=10,packets=100", "-o", "none"); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, errs)
	}
	if _, err := os.Stat(def); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a replay wrote the default store %s: %v", def, err)
	}
	given := filepath.Join(t.TempDir(), "given")
	if code, _, errs := runCLI("capture", "--read", path, "-o", "none", "--stats", "--data-dir", given); code != exitOK || !strings.Contains(errs, "written to "+given) {
		t.Errorf("--data-dir given: exit %d:\n%s", code, errs)
	}
	missing := filepath.Join(t.TempDir(), "missing.pcap")
	dir := filepath.Join(t.TempDir(), "never")
	code, out, errs := runCLI("capture", "--read", missing, "--data-dir", dir)
	if code != exitFailure || out != "" || !strings.Contains(errs, "missing.pcap") {
		t.Errorf("missing file: exit %d, stdout %q, stderr %q; want exit 1, nothing on stdout, the file named", code, out, errs)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed replay created its data directory: %v", err)
	}
}
