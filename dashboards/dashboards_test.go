package dashboards

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dashboard is the part of a Grafana dashboard the checks read.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *datasource     `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	GridPos    *struct {
		X, Y, W, H int
	} `json:"gridPos"`
	Targets []struct {
		RefID      string      `json:"refId"`
		Datasource *datasource `json:"datasource"`
		Expr       string      `json:"expr"`
		RawSQL     string      `json:"rawSql"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// load reads and checks what every dashboard must be: strict JSON that
// decodes into the shape above, a uid and title, a schemaVersion Grafana
// 9+ understands, panels with unique ids, a type and a place on the grid,
// and one datasource variable that every panel and query uses.
func load(t *testing.T, file, dsType string) (*dashboard, []panel) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
		t.Errorf("%s: uid %q, title %q, schemaVersion %d (want ≥ 36)", file, d.UID, d.Title, d.SchemaVersion)
	}
	var dsVar string
	for _, v := range d.Templating.List {
		if v.Type == "datasource" {
			var q string
			if json.Unmarshal(v.Query, &q) != nil || q != dsType {
				t.Errorf("%s: datasource variable %s is for %s, want %s", file, v.Name, v.Query, dsType)
			}
			dsVar = "${" + v.Name + "}"
		}
	}
	if dsVar == "" {
		t.Fatalf("%s: no datasource variable", file)
	}
	checkDS := func(where string, ds *datasource) {
		if ds == nil || ds.Type != dsType || ds.UID != dsVar {
			t.Errorf("%s: %s: datasource %+v, want type %s uid %s", file, where, ds, dsType, dsVar)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			checkDS("variable "+v.Name, v.Datasource)
		}
	}
	var all []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			all = append(all, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	if len(all) == 0 {
		t.Fatalf("%s: no panels", file)
	}
	ids := map[int]string{}
	for _, p := range all {
		if prev, dup := ids[p.ID]; dup || p.ID <= 0 {
			t.Errorf("%s: panel %q has id %d (taken by %q, or not positive)", file, p.Title, p.ID, prev)
		}
		ids[p.ID] = p.Title
		if p.Type == "" || p.Title == "" || p.GridPos == nil || p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("%s: panel %d %q: type %q, gridPos %+v", file, p.ID, p.Title, p.Type, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		checkDS("panel "+p.Title, p.Datasource)
		if len(p.Targets) == 0 {
			t.Errorf("%s: panel %q has no query", file, p.Title)
		}
		refs := map[string]bool{}
		for _, q := range p.Targets {
			checkDS("panel "+p.Title+" query "+q.RefID, q.Datasource)
			if q.RefID == "" || refs[q.RefID] {
				t.Errorf("%s: panel %q: query refId %q empty or repeated", file, p.Title, q.RefID)
			}
			refs[q.RefID] = true
		}
	}
	return &d, all
}

// documented reads the metric tables of docs/metrics.md: name → type.
func documented(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_:]+)` \\| (counter|gauge|histogram) \\|").FindAllStringSubmatch(string(doc), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// TestHealthDashboard: weir-health.json is a valid dashboard, and every
// metric its queries name is one docs/metrics.md lists (a histogram's
// _bucket, _sum and _count series by the histogram's name), used as its
// type allows (rate() of counters and histogram series only).
func TestHealthDashboard(t *testing.T) {
	_, panels := load(t, "weir-health.json", "prometheus")
	docs := documented(t)
	metricRE := regexp.MustCompile(`\b((?:weir|go|process)_[a-z0-9_]+)\b`)
	rateRE := regexp.MustCompile(`rate\(\s*([a-z0-9_]+)`)
	used := 0
	for _, p := range panels {
		for _, q := range p.Targets {
			if p.Type != "row" && q.Expr == "" {
				t.Errorf("panel %q: empty query", p.Title)
			}
			for _, m := range metricRE.FindAllString(q.Expr, -1) {
				base := m
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(m, suf); ok && docs[b] == "histogram" {
						base = b
					}
				}
				if _, ok := docs[base]; !ok {
					t.Errorf("panel %q: %s is not in docs/metrics.md", p.Title, m)
				}
				used++
			}
			for _, m := range rateRE.FindAllStringSubmatch(q.Expr, -1) {
				if typ := docs[strings.TrimSuffix(m[1], "_bucket")]; typ == "gauge" {
					t.Errorf("panel %q: rate() of the gauge %s", p.Title, m[1])
				}
			}
		}
	}
	if used < 30 {
		t.Errorf("only %d metric references: the check found little to check", used)
	}
	// What issue 25 asks the dashboard to show.
	var all strings.Builder
	for _, p := range panels {
		for _, q := range p.Targets {
			all.WriteString(q.Expr + "\n")
		}
	}
	for _, m := range []string{"weir_capture_packets_total", "weir_decoder_errors_total", "weir_ebpf_dropped_packets_total",
		"weir_capture_kernel_drops_total", "weir_capture_kernel_ring_freezes_total", "weir_flow_active", "weir_flow_table_capacity",
		"weir_flow_evictions_total", "weir_export_undelivered_records_total", "weir_collector_sequence_gaps_total", "weir_collector_lost_records_total", "weir_collector_socket_drops_total",
		"weir_store_rows_written_total", "weir_store_dropped_rows_total"} {
		if !strings.Contains(all.String(), m) {
			t.Errorf("no panel shows %s", m)
		}
	}
}

// flowColumns are the columns of the ClickHouse flows table the flows
// dashboard may use: the table 'weir clickhouse setup' creates (a start
// DateTime and the columns of weir's Kafka wire format; docs/fleet.md).
var flowColumns = []string{"start", "node", "iface", "start_ns", "end_ns", "ip_version", "src_addr", "dst_addr", "src_port", "dst_port",
	"proto", "packets", "bytes", "rev_packets", "rev_bytes", "drop_packets", "drop_bytes", "drop_reason", "service",
	"service_group", "service_backends", "src_workload", "dst_workload", "src_namespace", "dst_namespace", "src_node", "dst_node"}

// TestFlowsDashboard: weir-flows.json is a valid dashboard for Grafana's
// ClickHouse data source whose queries read the flows table within the
// dashboard's time range and node selection, and name only its columns.
func TestFlowsDashboard(t *testing.T) {
	_, panels := load(t, "weir-flows.json", "grafana-clickhouse-datasource")
	identRE := regexp.MustCompile(`\b([a-z_][a-z0-9_]*)\b`)
	sqlWords := []string{"select", "as", "from", "flows", "where", "and", "or", "in", "group", "by", "order", "desc", "limit", "if",
		"sum", "count", "uniqexact", "todatetime", "touint32", "intdiv", "toint64", "tounixtimestamp", "replaceregexpone", "ipv6numtostring",
		"concat", "tostring", "multiif", "time", "bps", "second", "interval", "source", "destination", "bytes_out", "bytes_in",
		"bytes_total", "flows", "clients", "packets", "bytes_dropped", "interface", "service_label", "dst_port_label", "tcp", "udp",
		"sctp", "no", "ffff", "distinct", "node", "singlequote", "start"}
	for _, p := range panels {
		for _, q := range p.Targets {
			sql := q.RawSQL
			if !strings.Contains(sql, "FROM flows") || !strings.Contains(sql, "start >= $__fromTime AND start < $__toTime") ||
				!strings.Contains(sql, "node IN (${node:singlequote})") {
				t.Errorf("panel %q: the query does not read flows within the time range and nodes:\n%s", p.Title, sql)
			}
			bare := regexp.MustCompile(`'[^']*'|\$__[a-z_]+|\$\{[^}]*\}|\b[0-9]+\b`).ReplaceAllString(sql, " ")
			for _, w := range identRE.FindAllString(strings.ToLower(bare), -1) {
				if !slices.Contains(sqlWords, w) && !slices.Contains(flowColumns, w) {
					t.Errorf("panel %q: %q is neither a column of flows nor a known SQL word", p.Title, w)
				}
			}
		}
	}
}
