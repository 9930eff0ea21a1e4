package query

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// topCond is the series condition /api/v1/topseries writes for top's
// rows: "(cond) and ((a = x and b = y) or …)".
func topCond(t *testing.T, q *Query, rows []Row) *Condition {
	t.Helper()
	var ors []string
	for _, r := range rows {
		var ands []string
		for _, a := range q.Group {
			var v string
			switch a {
			case AttrSrcIP:
				v = r.SrcIP.String()
			case AttrDstIP:
				v = r.DstIP.String()
			case AttrSrcPort:
				v = strconv.Itoa(int(r.SrcPort))
			case AttrDstPort:
				v = strconv.Itoa(int(r.DstPort))
			case AttrProto:
				v = strconv.Itoa(int(r.Proto))
			case AttrNode:
				v = Quote(r.Node)
			case AttrIface:
				v = Quote(r.Iface)
			default:
				t.Fatalf("no value for %v", a)
			}
			ands = append(ands, a.String()+" = "+v)
		}
		ors = append(ors, "("+strings.Join(ands, " and ")+")")
	}
	text := strings.Join(ors, " or ")
	if c := q.Cond.String(); c != "" {
		text = "(" + c + ") and (" + text + ")"
	}
	c, err := ParseCondition(text)
	if err != nil {
		t.Fatalf("%q: %v", text, err)
	}
	return c
}

// TestTopSeriesAgainstRun: RunTopSeries answers the top exactly as Run
// does, and TopSeries.Series answers the top's series query exactly as
// Run reads it from the blocks again (rows in order, totals, and every
// stat but the elapsed time), for the group shapes it applies to: by one
// address (the per-dictionary-entry path), ports and protocol (the row
// path), node and interface (labels, one-key blocks), over time-ordered
// blocks within one bin and across bins, partial ranges, one interface,
// IPv4-mapped IPv6 sources beside the same IPv4 bytes, ties (by flows),
// drops, live records, one and two workers, and random conditions. It
// fails when Series declines a shape it should answer.
func TestTopSeriesAgainstRun(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 1))
	recs := randRecords(r, 3000)
	mapped := netip.MustParseAddr("::ffff:10.0.0.1").As16()
	for i := range recs {
		if i%7 == 0 {
			recs[i].Key.SrcAddr, recs[i].Key.IPVersion = mapped, 6
		}
	}
	byStart(recs)
	s := writeStore(t, recs[:2600], 50)
	live := recs[2600:]
	groups := [][]Attr{{AttrSrcIP}, {AttrDstIP}, {AttrSrcIP}, {AttrDstPort, AttrProto}, {AttrProto}, {AttrNode}, {AttrIface},
		{AttrDstIP, AttrIface}, {AttrSrcPort}, {AttrSrcIP, AttrNode}}
	answered := 0
	for i := range 150 {
		rc, cond := randParsedCond(t, r, i)
		q := Query{Group: groups[r.IntN(len(groups))], Cond: cond, Limit: 1 + r.IntN(10), Workers: 1 + r.IntN(2),
			Sort: Metric(r.IntN(5)), Dir: Direction(r.IntN(3)), Ascending: r.IntN(4) == 0}
		randWindow(r, &q)
		var lv []flow.Record
		if r.IntN(4) == 0 {
			lv = live
		}
		step := []time.Duration{time.Minute, 10 * time.Minute, time.Hour, 6 * time.Hour}[r.IntN(4)]
		plain := q
		want, err := Run(context.Background(), s, &plain, lv)
		if err != nil {
			t.Fatal(err)
		}
		q.BinTotals = step
		top, ts, err := RunTopSeries(context.Background(), s, &q, lv)
		if err != nil {
			t.Fatal(err)
		}
		if top.Totals != want.Totals || !reflect.DeepEqual(top.Rows, want.Rows) || !sameStats(top.Stats, want.Stats) {
			t.Fatalf("query %d %q group %v: the top\n%s %+v\nwant\n%s %+v", i, rc.text, q.Group, describe(top.Rows), top.Stats,
				describe(want.Rows), want.Stats)
		}
		if len(top.Rows) == 0 {
			continue
		}
		sq := &Query{Group: append(append([]Attr(nil), q.Group...), AttrTime), Cond: topCond(t, &q, top.Rows), From: q.From, To: q.To,
			Ifaces: q.Ifaces, Resolution: step, Sort: q.Sort, Dir: q.Dir, Ascending: q.Ascending, Workers: q.Workers}
		got, ok := ts.Series(sq, top)
		if !ok {
			t.Fatalf("query %d %q group %v: Series declined", i, rc.text, q.Group)
		}
		answered++
		read, err := Run(context.Background(), s, sq, lv)
		if err != nil {
			t.Fatal(err)
		}
		if got.Totals != read.Totals || !reflect.DeepEqual(got.Rows, read.Rows) || !sameStats(got.Stats, read.Stats) {
			t.Fatalf("query %d %q group %v step %v live %d: the series\n%s %+v\nread again\n%s %+v", i, sq.Cond, q.Group, step, len(lv),
				describe(got.Rows), got.Stats, describe(read.Rows), read.Stats)
		}
	}
	if answered < 50 {
		t.Fatalf("only %d series answered from the log", answered)
	}
}

// sameStats compares stats but the elapsed time.
func sameStats(a, b Stats) bool {
	a.Elapsed, b.Elapsed = 0, 0
	return a == b
}

// TestTopSeriesDeclines: Series reports false, so that the caller reads
// the series, for two addresses (partitioned workers), a group attribute
// whose condition is not key equality (drop_reason compares ignoring
// case), a log past maxBinLog, and a series query of another shape.
func TestTopSeriesDeclines(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 2))
	recs := randRecords(r, 1500)
	byStart(recs)
	s := writeStore(t, recs, 50)
	run := func(group []Attr) (*Query, *Result, *TopSeries) {
		q := &Query{Group: group, Limit: 5, Workers: 2, BinTotals: time.Hour}
		top, ts, err := RunTopSeries(context.Background(), s, q, nil)
		if err != nil {
			t.Fatal(err)
		}
		return q, top, ts
	}
	series := func(q *Query, top *Result) *Query {
		return &Query{Group: append(append([]Attr(nil), q.Group...), AttrTime), Cond: topCond(t, q, top.Rows), Resolution: time.Hour, Workers: 2}
	}
	q, top, ts := run([]Attr{AttrSrcIP})
	if _, ok := ts.Series(series(q, top), top); !ok {
		t.Fatal("sip: declined")
	}
	other := series(q, top)
	other.Resolution = time.Minute
	if _, ok := ts.Series(other, top); ok {
		t.Error("a series at another resolution answered")
	}
	other = series(q, top)
	other.Limit = 3
	if _, ok := ts.Series(other, top); ok {
		t.Error("a series with a limit answered")
	}
	if _, _, ts := run([]Attr{AttrSrcIP, AttrDstIP}); ts.ok {
		t.Error("sip,dip (partitioned workers): kept")
	}
	if _, _, ts := run([]Attr{AttrDropReason}); ts.ok {
		t.Error("drop_reason: kept")
	}
	defer func(n int64) { maxBinLog = n }(maxBinLog)
	maxBinLog = 100
	q, top, ts = run([]Attr{AttrSrcIP})
	if _, ok := ts.Series(series(q, top), top); ok {
		t.Error("past maxBinLog: answered")
	}
	if !ts.over.Load() {
		t.Error("past maxBinLog: not marked")
	}
}
