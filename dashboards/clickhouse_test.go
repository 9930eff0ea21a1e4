package dashboards

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/clickhouse"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/gendb"
	"github.com/weir-dev/weir/internal/testfleet"
	"github.com/weir-dev/weir/internal/wire"
)

// expand does what Grafana's ClickHouse data source does to the macros
// the dashboard uses and to the node variable, for the range [from, to) and bins of
// step seconds.
func expand(sql string, from, to time.Time, step int, nodes []string) string {
	quoted := make([]string, len(nodes))
	for i, n := range nodes {
		quoted[i] = "'" + n + "'"
	}
	r := strings.NewReplacer(
		"$__fromTime", fmt.Sprintf("toDateTime(%d)", from.Unix()),
		"$__toTime", fmt.Sprintf("toDateTime(%d)", to.Unix()),
		"$__interval_s", fmt.Sprint(step),
		"${node:singlequote}", strings.Join(quoted, ","),
	)
	return r.Replace(sql)
}

// TestFlowsDashboardOnClickHouse runs every query of weir-flows.json, its
// macros expanded as Grafana's ClickHouse data source expands them, on a
// real ClickHouse server (Debian's 18.16, scripts/cluster.sh) holding the
// tables 'weir clickhouse setup' creates and a few thousand generated
// records from two nodes: each query must run and answer rows.
func TestFlowsDashboardOnClickHouse(t *testing.T) {
	f := testfleet.Start(t, testfleet.ClickHouse)
	db := f.Database("weir")
	c, err := clickhouse.NewHTTP(f.ClickHouse, "", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := clickhouse.Setup(ctx, c, clickhouse.Config{Database: db}); err != nil {
		t.Fatal(err)
	}
	var rows []byte
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	err = gendb.Generate(gendb.Config{Days: 1, BlocksPerDay: 24, FlowsPerBlock: 100, Clients: 200, Servers: 20, Start: start, Seed: 5},
		func(_ int64, recs []flow.Record) error {
			for i := range recs {
				recs[i].Node = []string{"node-a", "node-b"}[i%2]
				if i%3 == 0 {
					svc := &flow.Service{Name: "web", Group: "lb"}
					recs[i].Service = svc
				}
				rows = wire.Append(rows, &recs[i])
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := clickhouse.InsertRows(ctx, c, db, bytes.NewReader(rows)); err != nil {
		t.Fatal(err)
	}
	d, panels := load(t, "weir-flows.json", "grafana-clickhouse-datasource")
	for _, v := range d.Templating.List { // the node variable's query, as a panel of its own
		var sql string
		if v.Type == "query" && json.Unmarshal(v.Query, &sql) == nil {
			p := panel{Title: "variable " + v.Name}
			p.Targets = append(p.Targets, struct {
				RefID      string      `json:"refId"`
				Datasource *datasource `json:"datasource"`
				Expr       string      `json:"expr"`
				RawSQL     string      `json:"rawSql"`
			}{RawSQL: sql})
			panels = append(panels, p)
		}
	}
	for _, p := range panels {
		for _, q := range p.Targets {
			text := expand(q.RawSQL, start, start.Add(24*time.Hour), 3600, []string{"node-a", "node-b"})
			text = strings.Replace(text, "FROM flows", "FROM "+db+".flows", -1) + " FORMAT JSONEachRow"
			rc, err := c.Do(ctx, text, nil, nil)
			if err != nil {
				t.Errorf("panel %q: %v\n%s", p.Title, err, text)
				continue
			}
			b, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for line := range bytes.Lines(b) {
				var v map[string]any
				if err := json.Unmarshal(line, &v); err != nil {
					t.Errorf("panel %q: %v: %s", p.Title, err, line)
				}
				n++
			}
			if n == 0 && p.Title != "Kernel drops by reason" { // gendb records have no drops
				t.Errorf("panel %q answered no rows", p.Title)
			}
			t.Logf("panel %q: %d rows", p.Title, n)
		}
	}
}
