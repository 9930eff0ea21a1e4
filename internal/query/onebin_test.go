package query

import (
	"cmp"
	"context"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/store"
)

// byStart orders recs by start time, as a capture writes them: each
// block's starts within a short span.
func byStart(recs []flow.Record) {
	slices.SortFunc(recs, func(a, b flow.Record) int { return cmp.Compare(a.Start, b.Start) })
}

// TestOneBinBlocksAgainstReference: over blocks written in time order (as
// a capture writes them: each block's starts within a short span), random
// queries grouped by time (alone, with an address, with the interface),
// by an address, or by nothing, at resolutions coarser and finer than a
// block's span, with random conditions and ranges, give exactly the
// reference's rows and totals: the paths that take a block's time bin
// from its summary (no Start column), sum a one-group block at once, or
// sum per address dictionary entry per bin, and that test an address
// condition once per dictionary entry. Some sources are IPv4-mapped IPv6
// addresses equal, as 16 bytes, to IPv4 ones in the same blocks.
func TestOneBinBlocksAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	recs := randRecords(r, 3000)
	mapped := netip.MustParseAddr("::ffff:10.0.0.1").As16()
	for i := range recs {
		if i%7 == 0 {
			recs[i].Key.SrcAddr, recs[i].Key.IPVersion = mapped, 6 // 10.0.0.1's 16 bytes, as IPv6
		}
	}
	byStart(recs)
	s := writeStore(t, recs, 50)
	// The data must hold blocks within one bin of some resolution used below, and blocks across bins.
	blocks, err := s.Blocks(0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	one, across := 0, 0
	res := int64(time.Hour)
	for i := range blocks {
		lo, hi, _ := blocks[i].Range(store.ColStart)
		if floorDiv(int64(lo), res) == floorDiv(int64(hi), res) {
			one++
		} else {
			across++
		}
	}
	if one == 0 || across == 0 {
		t.Fatalf("%d blocks within one hour, %d across: want both", one, across)
	}
	groups := [][]Attr{{AttrTime}, {AttrTime, AttrSrcIP}, {AttrDstIP, AttrTime}, {AttrTime, AttrSrcIP, AttrIface}, {AttrIface, AttrTime},
		{AttrSrcIP}, {AttrDstIP, AttrIface}, {AttrIface}, nil, {AttrTime, AttrSrcIP, AttrDstIP}, {AttrTime, AttrNode}}
	for i := range 120 {
		rc, cond := randParsedCond(t, r, i)
		q := &Query{Group: groups[r.IntN(len(groups))], Cond: cond, Limit: r.IntN(3) * 3, Workers: 1 + r.IntN(2),
			Sort: Metric(r.IntN(5)), Dir: Direction(r.IntN(3)),
			Resolution: []time.Duration{0, time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour}[r.IntN(5)]}
		randWindow(r, q)
		got, err := Run(context.Background(), s, q, nil)
		if err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
		wantRows, wantTot := reference(q, rc.eval, recs)
		if got.Totals != wantTot {
			t.Fatalf("query %d %q group %v res %v: totals %+v, want %+v", i, rc.text, q.Group, q.Resolution, got.Totals, wantTot)
		}
		if !slices.Equal(got.Rows, wantRows) {
			t.Fatalf("query %d %q group %v res %v sort %v/%v limit %d: %d rows, want %d\ngot:%s\nwant:%s",
				i, rc.text, q.Group, q.Resolution, q.Sort, q.Dir, q.Limit, len(got.Rows), len(wantRows), describe(got.Rows), describe(wantRows))
		}
	}
}
