package query

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/store"
)

// natRecs are conntrack-like records (eth0, written in two blocks) and a
// block of plain records (eth1, no NAT, verdict or conntrack fields):
//
//	#  sip          dip          post-NAT src:port → dst:port          verdict rule       mark zone  pkts
//	0  10.0.0.1     10.96.0.10   192.0.2.7:61000  → 10.244.1.5:8443     -       -          16   0     1
//	1  10.0.0.2     10.96.0.10   10.0.0.2:40001   → 10.244.1.6:8443     -       -          16   1     2
//	2  10.0.0.3     10.96.0.10   10.0.0.3:40002   → 10.244.1.5:8443     -       -          0    1     4
//	3  2001:db8::1  fd00::10     2001:db8::1:40003 → fd00::a:5:8080     -       -          0    0     8
//	4  10.0.0.4     10.0.0.9     (not translated)                      deny    weir-deny  7    0     16
//	5  2001:db8::2  2001:db8::9  (not translated)                      deny    fw-in      0    2     32
//	6  10.0.0.5     10.0.0.9     (not translated)                      -       -          0    0     64
func natRecs() []flow.Record {
	rec := func(i int, sip, dip string) flow.Record {
		r := flow.Record{Packets: 1 << i, Bytes: 100 << i, Iface: "eth0", Start: t0 + int64(i)*int64(time.Second), EndReason: flow.ReasonIdle}
		r.End = r.Start
		r.Key.SetSrc(netip.MustParseAddr(sip))
		r.Key.SetDst(netip.MustParseAddr(dip))
		r.Key.Proto, r.Key.SrcPort, r.Key.DstPort = 6, uint16(40000+i), 443
		return r
	}
	nat := func(r flow.Record, snat, backend string, sport, dport uint16) flow.Record {
		r.PostNAT = r.Key
		r.PostNAT.SetSrc(netip.MustParseAddr(snat))
		r.PostNAT.SetDst(netip.MustParseAddr(backend))
		r.PostNAT.SrcPort, r.PostNAT.DstPort = sport, dport
		return r
	}
	out := []flow.Record{
		nat(rec(0, "10.0.0.1", "10.96.0.10"), "192.0.2.7", "10.244.1.5", 61000, 8443),
		nat(rec(1, "10.0.0.2", "10.96.0.10"), "10.0.0.2", "10.244.1.6", 40001, 8443),
		nat(rec(2, "10.0.0.3", "10.96.0.10"), "10.0.0.3", "10.244.1.5", 40002, 8443),
		nat(rec(3, "2001:db8::1", "fd00::10"), "2001:db8::1", "fd00::a:5", 40003, 8080),
		rec(4, "10.0.0.4", "10.0.0.9"),
		rec(5, "2001:db8::2", "2001:db8::9"),
		rec(6, "10.0.0.5", "10.0.0.9"),
	}
	out[0].Mark, out[1].Mark, out[1].Zone, out[2].Zone = 16, 16, 1, 1
	out[4].Verdict, out[4].Rule, out[4].Mark = flow.VerdictDeny, "weir-deny", 7
	out[5].Verdict, out[5].Rule, out[5].Zone = flow.VerdictDeny, "fw-in", 2
	for i := range 5 { // eth1: plain records
		r := rec(7+i, "10.1.0.1", "10.1.0.2")
		r.Iface, r.Packets = "eth1", 1
		out = append(out, r)
	}
	return out
}

// natQuery runs group and cond over s (workers goroutines) and returns
// the result; the cell text of every row is key(row).
func natQuery(t *testing.T, s *store.Store, group, cond string, workers int, live []flow.Record) *Result {
	t.Helper()
	g, err := ParseGroupBy(group)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseCondition(cond)
	if err != nil {
		t.Fatal(err)
	}
	if c != nil { // the canonical form parses to itself
		c2, err := ParseCondition(c.String())
		if err != nil || c2.String() != c.String() {
			t.Fatalf("%q: canonical %q parses to %v (%v)", cond, c, c2, err)
		}
	}
	res, err := Run(context.Background(), s, &Query{Group: g, Cond: c, Workers: workers, Sort: ByPackets}, live)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// cells are the rows' group cells as the CSV shows them, joined by "|",
// with the row's packets.
func cells(res *Result) []string {
	var out []string
	for _, r := range res.Rows {
		var c []string
		for _, a := range res.Query.Group {
			c = append(c, cell(&r.Key, a))
		}
		out = append(out, strings.Join(c, "|")+" "+strconv.FormatUint(r.Packets, 10))
	}
	return out
}

// TestNATQuery: records with NAT (IPv4, IPv6), deny verdicts and rules,
// marks and zones written to the store group and filter by nat_src_ip,
// nat_dst_ip, nat_src_port, nat_dst_port, verdict, rule, ct_mark and
// ct_zone exactly as their fields say; records not translated have no NAT
// value ("" in cells, matched by = "" and by negations only); blocks
// without any are skipped by their summaries; the same from live records.
func TestNATQuery(t *testing.T) {
	recs := natRecs()
	s := writeStore(t, recs, 4) // blocks: eth0 rows 0-3 (all translated), eth0 4-6, eth1 7, eth1 8-11
	for _, c := range []struct {
		group, cond string
		want        []string
		skipped     int // blocks ruled out by their summaries
	}{
		{"nat_dst_ip", "", []string{" 117", "fd00::a:5 8", "10.244.1.5 5", "10.244.1.6 2"}, 0},
		{"nat_dst_ip,nat_dst_port", `nat_dst_ip != ""`, []string{"fd00::a:5|8080 8", "10.244.1.5|8443 5", "10.244.1.6|8443 2"}, 3},
		{"nat_src_ip,nat_src_port", "nat_src_port = 61000", []string{"192.0.2.7|61000 1"}, 3},
		{"nat_dst_ip", "nat_dst_ip = 10.244.1.5", []string{"10.244.1.5 5"}, 3},
		{"nat_dst_ip", "nat_dst_ip = 10.244.0.0/16", []string{"10.244.1.5 5", "10.244.1.6 2"}, 3},
		{"nat_dst_ip", "nat_dst_ip = fd00::/8", []string{"fd00::a:5 8"}, 3},
		{"sip", "nat_dst_ip != 10.244.1.5", []string{"2001:db8::1 8", "10.0.0.2 2"}, 3}, // translated elsewhere
		{"sip", "iface eth0 and not nat_dst_ip = 10.244.1.5", []string{"10.0.0.5 64", "2001:db8::2 32", "10.0.0.4 16", "2001:db8::1 8", "10.0.0.2 2"}, 2},
		{"sip", `nat_src_ip = ""`, []string{"10.0.0.5 64", "2001:db8::2 32", "10.0.0.4 16", "10.1.0.1 5"}, 0}, // not translated
		{"sip", "nat_dst_port < 8443", []string{"2001:db8::1 8"}, 3},
		{"sip", "iface eth0 and not nat_dst_port < 8443", []string{"10.0.0.5 64", "2001:db8::2 32", "10.0.0.4 16", "10.0.0.3 4", "10.0.0.2 2", "10.0.0.1 1"}, 2},
		{"verdict,rule", "", []string{"| 84", "deny|fw-in 32", "deny|weir-deny 16"}, 0},
		{"sip", "verdict = deny", []string{"2001:db8::2 32", "10.0.0.4 16"}, 3},
		{"sip", "verdict = none and iface eth0", []string{"10.0.0.5 64", "2001:db8::1 8", "10.0.0.3 4", "10.0.0.2 2", "10.0.0.1 1"}, 2},
		{"sip", "rule = weir-deny", []string{"10.0.0.4 16"}, 3},
		{"sip", `rule != "" and rule != fw-in`, []string{"10.0.0.4 16"}, 3},
		{"ct_mark,ct_zone", "iface eth0", []string{"0|0 72", "0|2 32", "7|0 16", "0|1 4", "16|1 2", "16|0 1"}, 2},
		{"sip", "ct_mark = 16", []string{"10.0.0.2 2", "10.0.0.1 1"}, 3},
		{"sip", "ct_zone >= 2", []string{"2001:db8::2 32"}, 3},
		{"sip", "mark > 7 or zone = 1", []string{"10.0.0.3 4", "10.0.0.2 2", "10.0.0.1 1"}, 2},
	} {
		for _, workers := range []int{1, 3} {
			res := natQuery(t, s, c.group, c.cond, workers, nil)
			if got := cells(res); strings.Join(got, ", ") != strings.Join(c.want, ", ") {
				t.Errorf("%s where %q (%d workers):\n got %q\nwant %q", c.group, c.cond, workers, got, c.want)
			}
			if res.Stats.BlocksSkipped != c.skipped {
				t.Errorf("%s where %q: %d blocks skipped, want %d", c.group, c.cond, res.Stats.BlocksSkipped, c.skipped)
			}
		}
		// The same records live (no store): the same answer.
		res := natQuery(t, nil, c.group, c.cond, 1, recs)
		if got := cells(res); strings.Join(got, ", ") != strings.Join(c.want, ", ") {
			t.Errorf("live: %s where %q:\n got %q\nwant %q", c.group, c.cond, got, c.want)
		}
	}
}

// TestNATOutput: the table shows "-" for no value, CSV an empty cell,
// JSON null for a NAT value and "" for no verdict or rule.
func TestNATOutput(t *testing.T) {
	s := writeStore(t, natRecs(), 100)
	res := natQuery(t, s, "nat_dst_ip,nat_dst_port,verdict,rule,ct_mark,ct_zone", "iface eth0", 1, nil)
	var tb, cs, js bytes.Buffer
	for f, w := range map[Format]*bytes.Buffer{Table: &tb, CSV: &cs, JSON: &js} {
		if err := res.Write(w, f); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(tb.String(), "\n")
	if h := strings.Fields(lines[0]); strings.Join(h[:6], " ") != "nat_dst_ip nat_dst_port verdict rule ct_mark ct_zone" {
		t.Errorf("table header %q", lines[0])
	}
	if f := strings.Fields(lines[1]); strings.Join(f[:6], " ") != "- - - - 0 0" {
		t.Errorf("table row of records not translated, without verdict: %q", lines[1])
	}
	if f := strings.Fields(lines[2]); strings.Join(f[:6], " ") != "- - deny fw-in 0 2" {
		t.Errorf("table row of a deny flow: %q", lines[2])
	}
	rows, err := csv.NewReader(&cs).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rows[0][:6], ",") != "nat_dst_ip,nat_dst_port,verdict,rule,ct_mark,ct_zone" ||
		strings.Join(rows[1][:6], ",") != ",,,,0,0" || strings.Join(rows[5][:6], ",") != "10.244.1.5,8443,,,0,1" {
		t.Errorf("csv %q", rows)
	}
	var doc struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	r0, r2 := doc.Rows[0], doc.Rows[3]
	if v, ok := r0["nat_dst_ip"]; !ok || v != nil || r0["nat_dst_port"] != nil || r0["verdict"] != "" || r0["rule"] != "" || r0["ct_mark"] != 0.0 {
		t.Errorf("json row not translated: %v", r0)
	}
	if r2["nat_dst_ip"] != "fd00::a:5" || r2["nat_dst_port"] != 8080.0 || r2["ct_zone"] != 0.0 {
		t.Errorf("json row translated: %v", r2)
	}
}

// TestNATLiveRecords: the JSON records of a capture (docs/record.md, as
// the stdout sink writes them) carry NAT, verdict, rule, mark and zone
// into a query with --live.
func TestNATLiveRecords(t *testing.T) {
	in := `{"src_ip":"10.0.0.1","dst_ip":"10.96.0.10","src_port":40000,"dst_port":443,"proto":6,"packets":3,"start":"2026-03-01T22:00:00Z","end":"2026-03-01T22:00:01Z","iface":"eth0","nat_src_ip":"192.0.2.7","nat_dst_ip":"10.244.1.5","nat_src_port":61000,"nat_dst_port":8443,"ct_mark":16,"ct_zone":2}
{"src_ip":"2001:db8::2","dst_ip":"2001:db8::9","src_port":1,"dst_port":22,"proto":6,"packets":1,"start":"2026-03-01T22:00:00Z","end":"2026-03-01T22:00:01Z","iface":"eth0","verdict":"deny","rule":"fw-in"}
`
	recs, err := ReadRecords(strings.NewReader(in), 10)
	if err != nil {
		t.Fatal(err)
	}
	r := recs[0]
	if !r.NATed() || r.PostNAT.Src() != netip.MustParseAddr("192.0.2.7") || r.PostNAT.Dst() != netip.MustParseAddr("10.244.1.5") ||
		r.PostNAT.SrcPort != 61000 || r.PostNAT.DstPort != 8443 || r.PostNAT.Proto != 6 || r.Mark != 16 || r.Zone != 2 {
		t.Errorf("translated record: %+v", r)
	}
	if r := recs[1]; r.NATed() || r.Verdict != flow.VerdictDeny || r.Rule != "fw-in" {
		t.Errorf("deny record: %+v", r)
	}
	for _, bad := range []string{
		`{"src_ip":"10.0.0.1","dst_ip":"10.0.0.2","nat_src_ip":"10.0.0.1"}`,
		`{"src_ip":"10.0.0.1","dst_ip":"10.0.0.2","nat_src_ip":"10.0.0.1","nat_dst_ip":"fd00::1"}`,
		`{"src_ip":"10.0.0.1","dst_ip":"10.0.0.2","verdict":"maybe"}`,
	} {
		if _, err := ReadRecords(strings.NewReader(bad), 10); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
