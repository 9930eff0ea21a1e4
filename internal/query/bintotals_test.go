package query

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// TestBinTotalsAgainstGroupByTime: a query's bin totals (Query.BinTotals)
// equal the rows of the same query grouped by time alone at that
// resolution without a limit, and asking for them leaves the query's own
// rows and totals as they were: over time-ordered blocks (one-bin blocks
// summed at once, blocks across bins row by row), partial ranges,
// partitioned workers (two addresses), one interface, random conditions,
// and live records beside the store.
func TestBinTotalsAgainstGroupByTime(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 17))
	recs := randRecords(r, 3000)
	byStart(recs)
	s := writeStore(t, recs[:2600], 50)
	live := recs[2600:]
	groups := [][]Attr{{AttrSrcIP}, {AttrDstIP, AttrIface}, {AttrSrcIP, AttrDstIP}, {AttrDstPort, AttrProto}, {AttrProto}, nil,
		{AttrTime, AttrSrcIP}}
	for i := range 100 {
		rc, cond := randParsedCond(t, r, i)
		q := Query{Group: groups[r.IntN(len(groups))], Cond: cond, Limit: r.IntN(3) * 5, Workers: 1 + r.IntN(2),
			Sort: Metric(r.IntN(5)), Dir: Direction(r.IntN(3)), Resolution: []time.Duration{0, time.Hour}[r.IntN(2)]}
		randWindow(r, &q)
		var lv []flow.Record
		if r.IntN(3) == 0 {
			lv = live
		}
		plain := q
		want, err := Run(context.Background(), s, &plain, lv)
		if err != nil {
			t.Fatal(err)
		}
		q.BinTotals = []time.Duration{time.Minute, 10 * time.Minute, time.Hour, 6 * time.Hour}[r.IntN(4)]
		got, err := Run(context.Background(), s, &q, lv)
		if err != nil {
			t.Fatal(err)
		}
		if got.Totals != want.Totals || !slices.Equal(got.Rows, want.Rows) || got.Stats.RowsMatched != want.Stats.RowsMatched {
			t.Fatalf("query %d %q group %v: asking for bin totals changed the answer:\ngot:%s\nwant:%s", i, rc.text, q.Group,
				describe(got.Rows), describe(want.Rows))
		}
		byTime := Query{Group: []Attr{AttrTime}, Cond: cond, From: q.From, To: q.To, Ifaces: q.Ifaces, Resolution: q.BinTotals, Workers: q.Workers}
		bins, err := Run(context.Background(), s, &byTime, lv)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.BinTotals, bins.Rows) {
			t.Fatalf("query %d %q group %v bins %v live %d: bin totals\n%s\nwant (grouped by time)\n%s", i, rc.text, q.Group, q.BinTotals,
				len(lv), describe(got.BinTotals), describe(bins.Rows))
		}
		if len(bins.Rows) == 0 && want.Totals.Flows != 0 {
			t.Fatalf("query %d: no bins for %d flows", i, want.Totals.Flows)
		}
	}
}
