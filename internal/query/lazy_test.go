package query

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// Blocks are read in their condition's columns first and in the others
// only when a row matches: on conditions the summaries cannot rule out
// (443 and ICMP are in most blocks, but no ICMP row has a port), that
// match in some blocks and not others, cut by time or not, with 1 to 3
// workers (partitioned for two-address groups), the answer and every
// count are those of reading every column of every block, and blocks
// really are read in part.
func TestLazyReadSameAnswer(t *testing.T) {
	recs := randRecords(rand.New(rand.NewPCG(12, 13)), 4000)
	s := writeStore(t, recs, 100)
	var noRows atomic.Int64
	noRowsHook = func() { noRows.Add(1) }
	defer func() { noRowsHook = nil }()
	from := time.Unix(0, recs[len(recs)/3].Start)
	for _, c := range []struct{ group, cond string }{
		{"sip,dip", "dport = 443 and proto = 1"},
		{"sip", "sport = 22 and dport = 80 and proto = 17"},
		{"sip,dip,dport,proto", "sport = 22 and dport = 80 or dport = 53 and sport = 40001"},
		{"dip", "not proto = 6 and dport = 443 and vlan = 10"},
		{"", "sip = " + v4Pool[0] + " and dip = " + v6Pool[1]},
	} {
		g, err := ParseGroupBy(c.group)
		if err != nil && c.group != "" {
			t.Fatal(err)
		}
		cond, err := ParseCondition(c.cond)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []time.Time{{}, from} {
			for workers := 1; workers <= 3; workers++ {
				q := &Query{Group: g, Cond: cond, From: f, Workers: workers}
				eagerReads = true
				want, err := Run(context.Background(), s, q, nil)
				eagerReads = false
				if err != nil {
					t.Fatal(err)
				}
				before := noRows.Load()
				got, err := Run(context.Background(), s, q, nil)
				if err != nil {
					t.Fatal(err)
				}
				if noRows.Load() == before {
					t.Errorf("%s %q from %v: no block was read in part", c.group, c.cond, f)
				}
				gs, ws := got.Stats, want.Stats
				gs.Elapsed, ws.Elapsed = 0, 0
				if gs != ws || got.Totals != want.Totals || !slices.Equal(got.Rows, want.Rows) {
					t.Errorf("%s %q from %v, %d workers: stats %+v totals %+v (%d rows); eager: %+v %+v (%d rows)",
						c.group, c.cond, f, workers, gs, got.Totals, len(got.Rows), ws, want.Totals, len(want.Rows))
				}
			}
		}
	}
}
