package api

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/store"
)

// TestMetaNodes: /api/v1/meta lists the nodes of a store's records
// (sorted, records without a node in none), and a query groups by node.
func TestMetaNodes(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(store.Config{Dir: dir, NoSync: true, CloseTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var recs []flow.Record
	for i := range 90 {
		r := flow.Record{Packets: 1, Bytes: 100, Start: at + int64(i)*int64(time.Second), End: at + int64(i)*int64(time.Second),
			Iface: []string{"eth0", "eth1"}[i%2], Node: []string{"node-b", "", "node-a"}[i/30]}
		r.Key.SrcAddr, r.Key.DstAddr, r.Key.IPVersion, r.Key.Proto = [16]byte{10: 0xff, 11: 0xff, 12: 10, 15: byte(i)}, [16]byte{10: 0xff, 11: 0xff, 12: 10, 15: 200}, 4, 17
		recs = append(recs, r)
	}
	if err := s.Write(recs); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := store.OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	_, ts := newTestServer(t, Config{Backend: NewStoreBackend(ro, nil)})
	code, _, body := get(t, ts, "/api/v1/meta")
	var m struct{ Nodes []string }
	if err := json.Unmarshal(body, &m); code != http.StatusOK || err != nil || !slices.Equal(m.Nodes, []string{"node-a", "node-b"}) {
		t.Fatalf("%d %v nodes %q: %s", code, err, m.Nodes, body)
	}
	code, _, body = get(t, ts, "/api/v1/query?group=node&condition="+url.QueryEscape(`node != ""`))
	var q struct {
		Rows []struct {
			Node  string `json:"node"`
			Flows uint64 `json:"flows"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(body, &q); code != http.StatusOK || err != nil || len(q.Rows) != 2 || q.Rows[0].Flows != 30 || q.Rows[0].Node == "" {
		t.Errorf("query by node: %d %v %s", code, err, body)
	}
}
