package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/clickhouse"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/gendb"
	"github.com/weir-dev/weir/internal/store"
	"github.com/weir-dev/weir/internal/testfleet"
	"github.com/weir-dev/weir/internal/wire"
)

// TestClickHouseBackend: the same generated records (two nodes, two
// interfaces) in the embedded store and in a real ClickHouse 18.16
// (scripts/cluster.sh): /api/v1/query answers the same rows and totals
// from both for several query shapes, /api/v1/meta lists ClickHouse's
// nodes and interfaces with the store's counts, and live flows are a 404.
func TestClickHouseBackend(t *testing.T) {
	f := testfleet.Start(t, testfleet.ClickHouse)
	db := f.Database("weir")
	conn, err := clickhouse.NewHTTP(f.ClickHouse, "", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := clickhouse.Setup(ctx, conn, clickhouse.Config{Database: db}); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(store.Config{Dir: t.TempDir(), NoSync: true, Writeout: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var rows []byte
	err = gendb.Generate(gendb.Config{Days: 1, BlocksPerDay: 12, FlowsPerBlock: 200, Clients: 100, Servers: 10, Seed: 9, Ifaces: []string{"eth0", "eth1"}},
		func(_ int64, recs []flow.Record) error {
			for i := range recs {
				recs[i].Node = []string{"node-a", "node-b"}[i%2]
				rows = wire.Append(rows, &recs[i])
			}
			if err := st.Write(recs); err != nil {
				return err
			}
			return st.Flush()
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := clickhouse.InsertRows(ctx, conn, db, bytes.NewReader(rows)); err != nil {
		t.Fatal(err)
	}
	ch, err := NewClickHouseBackend(ctx, conn, db)
	if err != nil {
		t.Fatal(err)
	}
	_, tsCH := newTestServer(t, Config{Backend: ch})
	_, tsStore := newTestServer(t, Config{Backend: NewStoreBackend(st, nil)})
	for _, params := range []string{
		"group=sip",
		"group=talk_conv&condition=" + strings.ReplaceAll("dport = 443 and not snet 10.0.0.0/30", " ", "%20") + "&limit=5",
		"group=dport,proto&resolution=1h&limit=3&sort=packets:in",
		"group=iface&iface=eth1",
		"group=sip&from=2026-01-01T06:00:00Z&to=2026-01-01T12:00:00Z&sort=flows",
	} {
		var answers [2]struct {
			Rows   json.RawMessage
			Totals json.RawMessage
		}
		for i, ts := range []string{tsCH.URL, tsStore.URL} {
			resp, err := http.Get(ts + "/api/v1/query?" + params)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %d", params, resp.StatusCode)
			}
			err = json.NewDecoder(resp.Body).Decode(&answers[i])
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(answers[0].Rows, answers[1].Rows) || !bytes.Equal(answers[0].Totals, answers[1].Totals) {
			t.Errorf("%s: ClickHouse answered\n%s %s\nthe store\n%s %s", params, answers[0].Rows, answers[0].Totals, answers[1].Rows, answers[1].Totals)
		}
		if len(answers[0].Rows) < 10 {
			t.Errorf("%s: no rows", params)
		}
	}
	_, _, body := get(t, tsCH, "/api/v1/meta")
	var m struct {
		Backend    string
		Nodes      []string
		Interfaces []IfaceSpan
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	h, err := NewStoreBackend(st, nil).Holdings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.Backend != "clickhouse" || strings.Join(m.Nodes, ",") != "node-a,node-b" || len(m.Interfaces) != 2 ||
		m.Interfaces[0].Flows != h.Interfaces[0].Flows || m.Interfaces[1].Flows != h.Interfaces[1].Flows ||
		!m.Interfaces[0].First.Equal(h.Interfaces[0].First.Truncate(time.Second)) {
		t.Errorf("meta: %s\nthe store holds %+v", body, h.Interfaces)
	}
	if code, _, body := get(t, tsCH, "/api/v1/live"); code != http.StatusNotFound || apiError(t, body).Code != CodeNoLive {
		t.Errorf("live: %d %s", code, body)
	}
	if code, _, body := get(t, tsCH, "/readyz"); code != http.StatusOK {
		t.Errorf("readyz: %d %s", code, body)
	}
}
