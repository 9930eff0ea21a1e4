package query

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// dropRecs are eth0 records without drops (10.9.0.x) and eth1 records of
// an eBPF source sampling 1 in 100, some with drops:
//
//	sip       packets  drops  drop bytes  reason          sampling
//	10.0.0.1  0        3      180         NO_SOCKET       100
//	10.0.0.1  4        2      100         NETFILTER_DROP  100
//	10.0.0.2  6        5      500         NO_SOCKET       100
//	10.0.0.2  7        0      0           ""              100
//	10.0.0.3  9        0      0           ""              1
func dropRecs() []flow.Record {
	rec := func(iface, sip string, pkts, drops, dbytes uint64, reason string, sampling uint32, i int) flow.Record {
		r := flow.Record{Packets: pkts, Bytes: pkts * 100, DropPackets: drops, DropBytes: dbytes, DropReason: reason,
			Sampling: sampling, Iface: iface, Start: t0 + int64(i)*int64(time.Second), EndReason: flow.ReasonIdle}
		r.End = r.Start
		r.Key.SrcAddr = netip.MustParseAddr(sip).As16()
		r.Key.DstAddr = netip.MustParseAddr("192.0.2.1").As16()
		r.Key.IPVersion, r.Key.Proto, r.Key.DstPort = 4, 6, 443
		return r
	}
	var out []flow.Record
	for i := range 10 {
		out = append(out, rec("eth0", "10.9.0."+string(rune('1'+i%3)), 1, 0, 0, "", 0, i))
	}
	return append(out,
		rec("eth1", "10.0.0.1", 0, 3, 180, "NO_SOCKET", 100, 0),
		rec("eth1", "10.0.0.1", 4, 2, 100, "NETFILTER_DROP", 100, 1),
		rec("eth1", "10.0.0.2", 6, 5, 500, "NO_SOCKET", 100, 2),
		rec("eth1", "10.0.0.2", 7, 0, 0, "", 100, 3),
		rec("eth1", "10.0.0.3", 9, 0, 0, "", 1, 4))
}

// dropRow is the part of a result row the drop tests check.
type dropRow struct {
	key                 string
	flows, pkts         uint64
	dropPkts, dropBytes uint64
}

func dropRows(res *Result, key func(*Key) string) []dropRow {
	var out []dropRow
	for _, r := range res.Rows {
		out = append(out, dropRow{key(&r.Key), r.Flows, r.Packets, r.DropPackets, r.DropBytes})
	}
	return out
}

// TestDropsQuery: drop counters sum per group and in the totals, rank
// results, and drop_reason and sampling group and filter, with the
// summaries skipping blocks that cannot match; through the general path,
// the per-address dictionary path and partitioned workers alike.
func TestDropsQuery(t *testing.T) {
	s := writeStore(t, dropRecs(), 100)
	run := func(group, cond, sort string, workers int) *Result {
		t.Helper()
		g, err := ParseGroupBy(group)
		if err != nil {
			t.Fatal(err)
		}
		c, err := ParseCondition(cond)
		if err != nil {
			t.Fatal(err)
		}
		q := &Query{Group: g, Cond: c, Workers: workers}
		if q.Sort, q.Dir, err = ParseSort(sort); err != nil {
			t.Fatal(err)
		}
		res, err := Run(context.Background(), s, q, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	reason := func(k *Key) string { return k.DropReason }
	sip := func(k *Key) string { return k.SrcIP.String() }
	for _, c := range []struct {
		name, group, cond, sort string
		key                     func(*Key) string
		want                    []dropRow
		skipped                 int
	}{
		{"by reason", "drop_reason", "", "drop_packets", reason, []dropRow{
			{"NO_SOCKET", 2, 6, 8, 680}, {"NETFILTER_DROP", 1, 4, 2, 100}, {"", 12, 26, 0, 0}}, 0},
		{"by reason, ranked by flows", "drop_reason", "", "flows", reason, []dropRow{
			{"", 12, 26, 0, 0}, {"NO_SOCKET", 2, 6, 8, 680}, {"NETFILTER_DROP", 1, 4, 2, 100}}, 0},
		{"reason condition, any case", "sip", "drop_reason = no_socket", "drop_bytes", sip, []dropRow{
			{"10.0.0.2", 1, 6, 5, 500}, {"10.0.0.1", 1, 0, 3, 180}}, 1},
		{"no reason", "sip", `drop_reason = "" and iface eth1`, "packets", sip, []dropRow{
			{"10.0.0.3", 1, 9, 0, 0}, {"10.0.0.2", 1, 7, 0, 0}}, 1},
		{"some reason", "iface", `drop_reason != ''`, "drops", func(k *Key) string { return k.Iface }, []dropRow{
			{"eth1", 3, 10, 10, 780}}, 1},
		{"by address (dictionary path)", "sip", "iface = eth1", "drop_bytes", sip, []dropRow{
			{"10.0.0.2", 2, 13, 5, 500}, {"10.0.0.1", 2, 4, 5, 280}, {"10.0.0.3", 1, 9, 0, 0}}, 1},
		{"by sampling", "sampling", "sampling >= 1", "flows", func(k *Key) string { return fmt.Sprint(k.Sampling) }, []dropRow{
			{"100", 4, 17, 10, 780}, {"1", 1, 9, 0, 0}}, 1},
		{"sampling condition", "drop_reason,sampling", "sampling = 100", "drop_packets", reason, []dropRow{
			{"NO_SOCKET", 2, 6, 8, 680}, {"NETFILTER_DROP", 1, 4, 2, 100}, {"", 1, 7, 0, 0}}, 1},
	} {
		for _, workers := range []int{1, 2} {
			res := run(c.group, c.cond, c.sort, workers)
			if got := dropRows(res, c.key); !slices.Equal(got, c.want) {
				t.Errorf("%s (%d workers): rows\n%v, want\n%v", c.name, workers, got, c.want)
			}
			var tot Counters
			for _, r := range res.Rows {
				tot.add(&r.Counters)
			}
			if tot != res.Totals {
				t.Errorf("%s: totals %+v, rows sum to %+v", c.name, res.Totals, tot)
			}
			if res.Stats.BlocksSkipped != c.skipped {
				t.Errorf("%s: %d blocks skipped, want %d", c.name, res.Stats.BlocksSkipped, c.skipped)
			}
		}
	}
	// A block whose reasons are all longer than the value is skipped by
	// their lengths, one whose reasons are all empty for any value but "".
	s2 := writeStore(t, withReason(dropRecs()[10:], "NO_SOCKET"), 100)
	for cond, skipped := range map[string]int{"drop_reason = TCP": 1, "drop_reason = NO_SOCKET": 0, "drop_reason = NO_SOCKETS": 1,
		"drop_reason != NO_SOCKET": 0, `drop_reason != ""`: 0, `drop_reason = ""`: 1} {
		c, _ := ParseCondition(cond)
		res, err := Run(context.Background(), s2, &Query{Cond: c}, nil)
		if err != nil || res.Stats.BlocksSkipped != skipped {
			t.Errorf("%s: %d blocks skipped, want %d (%v)", cond, res.Stats.BlocksSkipped, skipped, err)
		}
	}
	// Grouped by address pairs on two workers, the partitioned path.
	res := run("sip,dip", "", "drop_packets", 2)
	if r := res.Rows[0]; res.Totals.DropPackets != 10 || res.Totals.DropBytes != 780 || r.SrcIP.String() != "10.0.0.1" || r.DropPackets != 5 || r.DropBytes != 280 {
		t.Errorf("sip,dip: totals %+v, first row %+v", res.Totals, res.Rows[0])
	}
}

// TestDropsOutput: with drops, the table and CSV gain the drop columns and
// JSON the drop fields, with exact numbers; an empty drop reason shows as
// "-" in the table and "" elsewhere.
func TestDropsOutput(t *testing.T) {
	s := writeStore(t, dropRecs(), 100)
	q := &Query{Group: []Attr{AttrDropReason}, Sort: ByDropPackets}
	res, err := Run(context.Background(), s, q, nil)
	if err != nil {
		t.Fatal(err)
	}
	var tb, cs, js bytes.Buffer
	for f, b := range map[Format]*bytes.Buffer{Table: &tb, CSV: &cs, JSON: &js} {
		if err := res.Write(b, f); err != nil {
			t.Fatal(err)
		}
	}
	lines, err := csv.NewReader(&cs).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"drop_reason", "flows", "packets_out", "packets_in", "bytes_out", "bytes_in", "drop_packets", "drop_bytes"},
		{"NO_SOCKET", "2", "6", "0", "600", "0", "8", "680"},
		{"NETFILTER_DROP", "1", "4", "0", "400", "0", "2", "100"},
		{"", "12", "26", "0", "2600", "0", "0", "0"},
	}
	if !slices.EqualFunc(lines, want, slices.Equal) {
		t.Errorf("csv %q, want %q", lines, want)
	}
	var doc struct {
		Rows []struct {
			Reason      *string `json:"drop_reason"`
			DropPackets uint64  `json:"drop_packets"`
			DropBytes   uint64  `json:"drop_bytes"`
		}
		Totals struct {
			DropPackets uint64 `json:"drop_packets"`
			DropBytes   uint64 `json:"drop_bytes"`
		}
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Rows) != 3 || *doc.Rows[0].Reason != "NO_SOCKET" || doc.Rows[0].DropPackets != 8 || doc.Rows[0].DropBytes != 680 ||
		*doc.Rows[2].Reason != "" || doc.Totals.DropPackets != 10 || doc.Totals.DropBytes != 780 {
		t.Errorf("json %s", js.String())
	}
	tl := strings.Split(tb.String(), "\n")
	if !strings.Contains(tl[0], "drop_reason") || !strings.HasSuffix(strings.TrimSpace(tl[0]), "dropped pkts  dropped bytes") {
		t.Errorf("table header %q", tl[0])
	}
	if f := strings.Fields(tl[3]); f[0] != "-" || f[len(f)-2] != "0" {
		t.Errorf("table row without a reason %q", tl[3])
	}
	if f := strings.Fields(tl[4]); f[0] != "total" || f[len(f)-3] != "10" || f[len(f)-1] != "B" || f[len(f)-2] != "780" {
		t.Errorf("table total %q", tl[4])
	}
	for _, l := range tl[1:5] {
		if len(l) != len(tl[0]) {
			t.Errorf("table line %q is %d wide, header %d", l, len(l), len(tl[0]))
		}
	}
	// Ranked by bytes, a result with drops shows them.
	q = &Query{Group: []Attr{AttrIface}}
	if res, err = Run(context.Background(), s, q, nil); err != nil {
		t.Fatal(err)
	}
	cs.Reset()
	res.Write(&cs, CSV)
	if got := cs.String(); got != "iface,flows,packets_out,packets_in,bytes_out,bytes_in,drop_packets,drop_bytes\neth1,5,26,0,2600,0,10,780\neth0,10,10,0,1000,0,0,0\n" {
		t.Errorf("ranked by bytes:\n%s", got)
	}
	// Ranked by drops, a result without any still shows the columns.
	q = &Query{Group: []Attr{AttrIface}, Sort: ByDropBytes, Ifaces: []string{"eth0"}}
	if res, err = Run(context.Background(), s, q, nil); err != nil {
		t.Fatal(err)
	}
	cs.Reset()
	res.Write(&cs, CSV)
	if got := strings.Split(cs.String(), "\n")[0]; got != "iface,flows,packets_out,packets_in,bytes_out,bytes_in,drop_packets,drop_bytes" {
		t.Errorf("ranked by drop bytes: header %q", got)
	}
}

// TestDropsParse: the drop attributes and sorts parse, print canonically
// and refuse what they cannot mean.
func TestDropsParse(t *testing.T) {
	for in, want := range map[string]string{
		"drop_reason = no_socket":                "drop_reason = NO_SOCKET",
		"drop_reason NETFILTER_DROP":             "drop_reason = NETFILTER_DROP",
		`drop_reason != ""`:                      `drop_reason != ""`,
		"not drop_reason = X and sampling > 1":   "drop_reason != X and sampling > 1",
		"sampling 4294967295 or sampling <= 1":   "sampling = 4294967295 or sampling <= 1",
		"drop_reason = 'and' or drop_reason 'é'": `drop_reason = "AND" or drop_reason = é`,
	} {
		c, err := ParseCondition(in)
		if err != nil || c.String() != want {
			t.Errorf("%q = %v %v, want %q", in, c, err, want)
		}
	}
	for in, msg := range map[string]string{
		"drop_reason < X":       "only with = or !=",
		"sampling = 4294967296": "sampling rate",
		"sampling = -1":         "sampling rate",
		"drop_reasn = X":        `did you mean "drop_reason"`,
	} {
		if _, err := ParseCondition(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want %q", in, err, msg)
		}
	}
	g, err := ParseGroupBy("sampling,drop_reason,sip")
	if err != nil || !slices.Equal(g, []Attr{AttrSrcIP, AttrDropReason, AttrSampling}) {
		t.Errorf("group-by: %v %v", g, err)
	}
	for in, want := range map[string]Metric{"drop_packets": ByDropPackets, "drops": ByDropPackets, "drop_bytes:sum": ByDropBytes} {
		if m, d, err := ParseSort(in); err != nil || m != want || d != Sum {
			t.Errorf("sort %q: %v %v %v", in, m, d, err)
		}
	}
	if _, _, err := ParseSort("drop_bytes:in"); err == nil || !strings.Contains(err.Error(), "both directions") {
		t.Errorf("drop_bytes:in: %v", err)
	}
}

// TestDropsLive: drop fields of live JSON records are read and counted.
func TestDropsLive(t *testing.T) {
	in := `{"src_ip":"10.0.0.1","dst_ip":"10.0.0.2","packets":0,"iface":"eth1","start":"2026-03-01T00:00:00Z","end":"2026-03-01T00:00:01Z","drop_packets":4,"drop_bytes":240,"drop_reason":"NO_SOCKET","sampling":10}` + "\n"
	recs, err := ReadRecords(strings.NewReader(in), 10)
	if err != nil || len(recs) != 1 {
		t.Fatal(recs, err)
	}
	if r := recs[0]; r.DropPackets != 4 || r.DropBytes != 240 || r.DropReason != "NO_SOCKET" || r.Sampling != 10 {
		t.Fatalf("%+v", r)
	}
	q := &Query{Group: []Attr{AttrDropReason, AttrSampling}}
	res, err := Run(context.Background(), nil, q, recs)
	if err != nil || len(res.Rows) != 1 {
		t.Fatal(res, err)
	}
	if r := res.Rows[0]; r.DropReason != "NO_SOCKET" || r.Sampling != 10 || r.DropPackets != 4 || r.DropBytes != 240 || r.Flows != 1 {
		t.Errorf("%+v", r)
	}
}

// TestDropReasonFold: drop_reason compares ignoring the case of ASCII
// letters only.
func TestDropReasonFold(t *testing.T) {
	for _, c := range []struct {
		a, b string
		eq   bool
	}{{"NO_SOCKET", "no_socket", true}, {"Custom_Reason", "CUSTOM_REASON", true}, {"", "", true},
		{"A@B", "A`B", false}, {"A[B", "A{B", false}, {"NO_SOCKET", "NO_SOCKETS", false}, {"é", "É", false}, {"X", "Y", false}} {
		if got := equalFoldASCII(c.a, c.b); got != c.eq {
			t.Errorf("equalFoldASCII(%q, %q) = %v", c.a, c.b, got)
		}
	}
	recs := dropRecs()
	recs[len(recs)-1].DropReason = "Custom_Reason" // stored as a source wrote it
	s := writeStore(t, recs, 100)
	c, _ := ParseCondition("drop_reason = custom_REASON")
	res, err := Run(context.Background(), s, &Query{Cond: c}, nil)
	if err != nil || res.Totals.Flows != 1 || res.Totals.Packets != 9 {
		t.Errorf("stored mixed case: %+v %v", res.Totals, err)
	}
}

// TestDropsBothFamilies: one address seen as IPv4 and as IPv6 (mapped) in
// a block keeps two groups by source, each with its own drops, on the
// dictionary path.
func TestDropsBothFamilies(t *testing.T) {
	recs := dropRecs()
	for _, r := range slices.Clone(recs[len(recs)-5:]) {
		r.Key.IPVersion = 6 // ::ffff:10.0.0.x as IPv6
		r.Start += int64(time.Minute)
		r.End = r.Start
		recs = append(recs, r)
	}
	s := writeStore(t, recs, 100)
	res, err := Run(context.Background(), s, &Query{Group: []Attr{AttrSrcIP}, Ifaces: []string{"eth1"}, Sort: ByDropBytes}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := dropRows(res, func(k *Key) string { return k.SrcIP.String() })
	want := []dropRow{{"10.0.0.2", 2, 13, 5, 500}, {"::ffff:10.0.0.2", 2, 13, 5, 500}, {"10.0.0.1", 2, 4, 5, 280},
		{"::ffff:10.0.0.1", 2, 4, 5, 280}, {"10.0.0.3", 1, 9, 0, 0}, {"::ffff:10.0.0.3", 1, 9, 0, 0}}
	if !slices.Equal(got, want) {
		t.Errorf("rows\n%v, want\n%v", got, want)
	}
}

// TestTooManyLabels: a query needing more label ids than a key holds
// fails, with one worker and with the groups of several merged.
func TestTooManyLabels(t *testing.T) {
	s := writeStore(t, dropRecs(), 100)
	defer func(n int) { maxLabels = n }(maxLabels)
	maxLabels = 3 // the data has 4 (iface, drop_reason) pairs
	for _, workers := range []int{1, 2} {
		_, err := Run(context.Background(), s, &Query{Group: []Attr{AttrIface, AttrDropReason}, Workers: workers}, nil)
		if err == nil || !strings.Contains(err.Error(), "more than 3 distinct") {
			t.Errorf("%d workers: %v", workers, err)
		}
	}
	// Partitioned workers (two address attributes) each see every label.
	if _, err := Run(context.Background(), s, &Query{Group: []Attr{AttrSrcIP, AttrDstIP, AttrIface, AttrDropReason}, Workers: 2}, nil); err == nil {
		t.Error("partitioned: no error")
	}
	if _, err := Run(context.Background(), s, &Query{Group: []Attr{AttrDropReason}, Workers: 2}, nil); err != nil {
		t.Errorf("3 labels: %v", err)
	}
}

// withReason sets every record's drop reason.
func withReason(recs []flow.Record, reason string) []flow.Record {
	for i := range recs {
		recs[i].DropReason = reason
	}
	return recs
}

// TestMergeTooManyLabels: merging two workers' groups whose labels
// together exceed maxLabels marks the result (Run then fails), though
// neither worker's alone does.
func TestMergeTooManyLabels(t *testing.T) {
	defer func(n int) { maxLabels = n }(maxLabels)
	maxLabels = 3
	a, b := newAgg(), newAgg()
	for _, n := range []string{"a", "b"} {
		a.add(gkey{rest: uint64(a.label(label{iface: n}))}, &Counters{Flows: 1})
	}
	for _, n := range []string{"c", "d"} {
		b.add(gkey{rest: uint64(b.label(label{iface: n}))}, &Counters{Flows: 1})
	}
	if a.tooMany || b.tooMany {
		t.Fatal("two labels each are within 3")
	}
	a.merge(b)
	if !a.tooMany {
		t.Error("merged 4 labels, not marked")
	}
}
