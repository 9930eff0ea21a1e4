package store

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// TestPrepare: rows come back rounded to the precision and stably sorted
// by Start, whether they arrived in order (no sort), shuffled (packed
// radix keys) or with a span too wide for packed keys or wider than the
// one given (the comparison sort): the same rows a reference stable sort
// gives, in the same order.
func TestPrepare(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name   string
		prec   time.Duration
		span   int64
		sorted bool
		narrow bool // lo/hi given narrower than the rows' span
	}{
		{"shuffled ms", time.Millisecond, int64(5 * time.Minute), false, false},
		{"shuffled ns", time.Nanosecond, int64(5 * time.Minute), false, false},
		{"in order", time.Millisecond, int64(5 * time.Minute), true, false},
		{"wide span", time.Nanosecond, 1 << 50, false, false},
		{"span not as given", time.Millisecond, int64(time.Hour), false, true},
	} {
		recs := make([]flow.Record, 3000)
		lo, hi := int64(1<<62), int64(-1<<62)
		for i := range recs {
			st := t0 + r.Int64N(tc.span)
			if i%7 == 0 && i > 0 {
				st = recs[i-1].Start // ties keep their order
			}
			recs[i] = flow.Record{Start: st, End: st + r.Int64N(int64(time.Minute)), Packets: uint64(i)}
			lo, hi = min(lo, st), max(hi, st)
		}
		if tc.sorted {
			slices.SortStableFunc(recs, func(a, b flow.Record) int { return cmp.Compare(a.Start, b.Start) })
		}
		want := slices.Clone(recs)
		p := int64(tc.prec)
		for i := range want {
			want[i].Start, want[i].End = floorTo(want[i].Start, p), -floorTo(-want[i].End, p)
		}
		slices.SortStableFunc(want, func(a, b flow.Record) int { return cmp.Compare(a.Start, b.Start) })
		if tc.narrow {
			hi = lo + (hi-lo)/2
		}
		s := &Store{cfg: Config{TimePrecision: tc.prec}}
		got := s.prepare(recs, tc.sorted, lo, hi)
		for i := range want {
			if got[i].Start != want[i].Start || got[i].End != want[i].End || got[i].Packets != want[i].Packets {
				t.Fatalf("%s: row %d: %+v, want %+v", tc.name, i, got[i], want[i])
			}
		}
	}
}
