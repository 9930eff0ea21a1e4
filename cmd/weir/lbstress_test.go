package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/enrich/services"
)

// lbstress with groups keeps rows and datapath groups constant as nodes
// grow; without, row copies are rows × nodes. Several configurations run
// in child processes (the test binary re-executed as weir).
func TestLBStress(t *testing.T) {
	t.Setenv("WEIR_TEST_AS_WEIR", "1")
	code, out, errs := runCLI("bench", "lbstress", "--nodes", "2,5", "--lbs", "30", "--repeat", "3", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rs []services.StressResult
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r services.StressResult
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		rs = append(rs, r)
	}
	if len(rs) != 4 {
		t.Fatalf("%d results, want 4 (2 node counts × groups on/off)", len(rs))
	}
	const rows = 6*31 + 1 // six per LB, one ARP responder row
	for _, r := range rs {
		if r.Rows != rows || r.Applied != rows*r.Nodes || r.LastAddUS <= 0 || r.RecomputeMS <= 0 || r.HeapMB <= 0 {
			t.Errorf("%+v: want %d rows applied %d times", r, rows, r.Nodes)
		}
		if r.Groups && (r.DPGroups != 2 || r.RowCopies != 0) {
			t.Errorf("groups on: %d dp groups, %d copies; want 2, 0", r.DPGroups, r.RowCopies)
		}
		if !r.Groups && r.RowCopies != rows*r.Nodes {
			t.Errorf("groups off, %d nodes: %d copies, want %d", r.Nodes, r.RowCopies, rows*r.Nodes)
		}
	}
	code, out, errs = runCLI("bench", "lbstress", "--nodes", "3", "--lbs", "10", "--groups", "on", "--repeat", "2")
	if code != 0 || !strings.Contains(out, "last add µs") || !strings.Contains(out, "  67 ") {
		t.Errorf("table: exit %d\n%s%s", code, out, errs)
	}
	if code, _, _ = runCLI("bench", "lbstress", "--groups", "maybe"); code != exitUsage {
		t.Errorf("--groups maybe: exit %d", code)
	}
}
