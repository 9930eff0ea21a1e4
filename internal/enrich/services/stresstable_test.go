package services

import (
	"strings"
	"testing"
)

// TestWriteStressTableSeparators: counts and whole milliseconds in the
// lbstress table carry thousands separators, as every count weir prints.
func TestWriteStressTableSeparators(t *testing.T) {
	var b strings.Builder
	WriteStressTable(&b, []StressResult{{Nodes: 500, LBs: 3000, Groups: false, BuildMS: 61234.4, LastAddUS: 12.34,
		LastAddMedUS: 11.0, RecomputeMS: 1.5, Rows: 18007, DPGroups: 2, RowCopies: 9003500, Applied: 9003500, RSSMB: 1.25, HeapMB: 2}})
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines:\n%s", len(lines), b.String())
	}
	got := strings.Fields(lines[1])
	want := []string{"500", "3,000", "off", "12.3", "11.0", "1.5", "61,234", "18,007", "2", "9,003,500", "9,003,500", "1.2", "2.0"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("row %q\nwant %q", got, want)
	}
}
