package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGendbCSV: bench gendb --csv writes a 0600 file with a header and
// one line per stored row (the count the store reports), and refuses a
// file that already exists rather than overwrite it.
func TestGendbCSV(t *testing.T) {
	tmp := t.TempDir()
	csv := filepath.Join(tmp, "rows.csv")
	args := []string{"bench", "gendb", "--data-dir", filepath.Join(tmp, "store"), "--days", "1", "--blocks-per-day", "3",
		"--flows-per-block", "200", "--no-sync", "--csv", csv}
	code, out, errs := runCLI(args...)
	if code != exitOK || !strings.Contains(out, "600 rows in 3 blocks") {
		t.Fatalf("gendb --csv: exit %d, %q, %s", code, out, errs)
	}
	b, err := os.ReadFile(csv)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n != 601 || !bytes.HasPrefix(b, []byte("src_ip,dst_ip,")) {
		t.Fatalf("%d lines (want a header and 600 rows), starting %q", n, b[:min(len(b), 40)])
	}
	if fi, err := os.Stat(csv); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v: want 0600", fi.Mode(), err)
	}
	args[3] = filepath.Join(tmp, "store2")
	if code, _, errs := runCLI(args...); code != exitUsage || !strings.Contains(errs, "does not exist yet") {
		t.Fatalf("an existing --csv file: exit %d, %s", code, errs)
	}
	if after, _ := os.ReadFile(csv); !bytes.Equal(after, b) {
		t.Fatal("the existing CSV file was changed")
	}
}
