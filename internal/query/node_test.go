package query

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/format"
)

// nodeRecs are natRecs observed on three nodes: records 0-3 on "node-a",
// 4-6 on "collector-192.0.2.7", the rest (eth1) without a node.
func nodeRecs() []flow.Record {
	recs := natRecs()
	for i := range recs {
		switch {
		case i < 4:
			recs[i].Node = "node-a"
		case i < 7:
			recs[i].Node = "collector-192.0.2.7"
		}
	}
	return recs
}

// TestNodeQuery: records of several nodes, from the store (blocks of
// one node and blocks mixing them) and live, group and filter by node;
// records without one have "" and show "-" in a table; a condition on a
// node whose length no row has skips the block unread.
func TestNodeQuery(t *testing.T) {
	recs := nodeRecs()
	for _, batch := range []int{4, 100} { // one node per block, and mixed blocks
		s := writeStore(t, recs, batch)
		for _, c := range []struct {
			group, cond string
			want        []string
		}{
			{"node", "", []string{"collector-192.0.2.7 112", "node-a 15", " 5"}},
			{"node,iface", "", []string{"collector-192.0.2.7|eth0 112", "node-a|eth0 15", "|eth1 5"}},
			{"sip", `node = node-a and not sip = 10.0.0.1`, []string{"2001:db8::1 8", "10.0.0.3 4", "10.0.0.2 2"}},
			{"node", `node != "node-a"`, []string{"collector-192.0.2.7 112", " 5"}},
			{"node", `node = ""`, []string{" 5"}},
			{"sip", `node = "collector-192.0.2.7" or node = nobody`, []string{"10.0.0.5 64", "2001:db8::2 32", "10.0.0.4 16"}},
		} {
			want := strings.Join(c.want, ", ")
			for _, workers := range []int{1, 3} {
				res := natQuery(t, s, c.group, c.cond, workers, nil)
				if got := cells(res); strings.Join(got, ", ") != want {
					t.Errorf("batch %d: %s where %q (%d workers):\n got %q\nwant %q", batch, c.group, c.cond, workers, got, c.want)
				}
			}
			res := natQuery(t, nil, c.group, c.cond, 1, recs)
			if got := cells(res); strings.Join(got, ", ") != want {
				t.Errorf("live: %s where %q:\n got %q\nwant %q", c.group, c.cond, got, c.want)
			}
		}
		res := natQuery(t, s, "sip", `node = "no-such-node-name-of-this-length"`, 1, nil)
		if res.Totals.Flows != 0 || res.Stats.BlocksSkipped != res.Stats.Blocks || res.Stats.Blocks == 0 {
			t.Errorf("batch %d: a node no block holds: %d flows, %d of %d blocks skipped", batch, res.Totals.Flows, res.Stats.BlocksSkipped, res.Stats.Blocks)
		}
	}
	for _, bad := range []string{"node < a", "node >= x"} {
		if _, err := ParseCondition(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if c, err := ParseCondition(`node = "k8s node 1" and not node = x`); err != nil || c.String() != `node = "k8s node 1" and node != x` {
		t.Errorf("%v %v", c, err)
	}
}

// TestNodeOutput: the node in table, CSV and JSON output, and weir's JSON
// records carry it into a live query.
func TestNodeOutput(t *testing.T) {
	s := writeStore(t, nodeRecs(), 100)
	res := natQuery(t, s, "node", "", 1, nil)
	var tab, csvOut, js bytes.Buffer
	if err := res.Write(&tab, Table); err != nil {
		t.Fatal(err)
	}
	if err := res.Write(&csvOut, CSV); err != nil {
		t.Fatal(err)
	}
	if err := res.Write(&js, JSON); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(tab.String(), "\n")
	if !strings.Contains(lines[0], "node") || !strings.Contains(tab.String(), "collector-192.0.2.7") || !strings.HasPrefix(strings.TrimSpace(lines[3]), "- ") {
		t.Errorf("table:\n%s", tab.String())
	}
	if !strings.HasPrefix(csvOut.String(), "node,flows,") || !strings.Contains(csvOut.String(), "\n,5,") {
		t.Errorf("csv:\n%s", csvOut.String())
	}
	var doc struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil || len(doc.Rows) != 3 || doc.Rows[0]["node"] != "collector-192.0.2.7" || doc.Rows[2]["node"] != "" {
		t.Errorf("json: %v %s", err, js.String())
	}
	var in []byte
	for _, r := range nodeRecs() {
		in = append(format.AppendJSON(in, &r), '\n')
	}
	recs, err := ReadRecords(bytes.NewReader(in), 100)
	if err != nil {
		t.Fatal(err)
	}
	if recs[0].Node != "node-a" || recs[5].Node != "collector-192.0.2.7" || recs[8].Node != "" {
		t.Errorf("live records' nodes %q %q %q", recs[0].Node, recs[5].Node, recs[8].Node)
	}
	live := natQuery(t, nil, "node", "", 1, recs)
	if strings.Join(cells(live), ", ") != strings.Join(cells(res), ", ") {
		t.Errorf("live %q, stored %q", cells(live), cells(res))
	}
}
