package query

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Partitioned workers (two-address groups) share each decoded block, and
// its rows' keys split by partition when no key holds a label: with 2 to
// 4 workers they give the answer and the counts of one worker, which
// decodes every block and makes every key itself, on queries that skip
// some blocks by their summaries and cut others by time; with runs of 1
// to more than every block per ring slot (7 and 64 do not divide the 120
// blocks: a short last run).
func TestSharedDecodeSameAnswer(t *testing.T) {
	defer func(n int) { ringRun = n }(ringRun)
	for _, ringRun = range []int{1, 4, 7, 64} {
		sharedDecodeSameAnswer(t)
	}
}

func sharedDecodeSameAnswer(t *testing.T) {
	recs := randRecords(rand.New(rand.NewPCG(5, 6)), 4000)
	s := writeStore(t, recs, 100)
	skipped := 0
	for _, c := range []struct{ group, cond string }{
		{"sip,dip", ""},
		{"sip,dip,dport,proto", "dport = 443 or proto = 17"},
		{"sip,dport", "sip = " + v4Pool[3]},
		// Keys with a label id (the interface): each worker makes its own
		// keys; without one the decoding worker splits them (keyed prep).
		{"iface,sip,dip", "dport = 443 or proto = 6"},
		{"time,sip,dip", "dport = 443"},
	} {
		g, _ := ParseGroupBy(c.group)
		cond, err := ParseCondition(c.cond)
		if err != nil {
			t.Fatal(err)
		}
		if !manyGroups(g) {
			t.Fatalf("%s: not a partitioned query", c.group)
		}
		from := time.Unix(0, recs[len(recs)/3].Start)
		var want *Result
		for workers := 1; workers <= 4; workers++ {
			q := &Query{Group: g, Cond: cond, From: from, Workers: workers}
			got, err := Run(context.Background(), s, q, nil)
			if err != nil {
				t.Fatal(err)
			}
			if workers == 1 {
				want = got
				skipped += got.Stats.BlocksSkipped
				if got.Stats.RowsMatched == 0 || got.Stats.RowsMatched == got.Stats.RowsScanned {
					t.Fatalf("%s %q: %d of %d rows matched: the query tests nothing", c.group, c.cond, got.Stats.RowsMatched, got.Stats.RowsScanned)
				}
				continue
			}
			gs, ws := got.Stats, want.Stats
			gs.Elapsed, ws.Elapsed = 0, 0
			if gs != ws || got.Totals != want.Totals || !slices.Equal(got.Rows, want.Rows) {
				t.Errorf("%s %q, %d workers, runs of %d: stats %+v totals %+v (%d rows); one worker: %+v %+v (%d rows)",
					c.group, c.cond, workers, ringRun, gs, got.Totals, len(got.Rows), ws, want.Totals, len(want.Rows))
			}
		}
	}
	if skipped == 0 {
		t.Error("no query skipped a block")
	}
}

// A query of partitioned workers cancelled while they wait on each
// other's blocks returns the context's error instead of hanging.
func TestSharedDecodeCancel(t *testing.T) {
	s := writeStore(t, randRecords(rand.New(rand.NewPCG(8, 9)), 3000), 50)
	g, _ := ParseGroupBy("sip,dip")
	for workers := 2; workers <= 3; workers++ {
		ctx, cancel := context.WithCancel(context.Background())
		q := &Query{Group: g, Workers: workers, Progress: func(done, _ int) {
			if done == 3 {
				cancel()
			}
		}}
		errc := make(chan error, 1)
		go func() {
			_, err := Run(ctx, s, q, nil)
			errc <- err
		}()
		select {
		case err := <-errc:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%d workers: %v, want context.Canceled", workers, err)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("%d workers: cancelled query still running after 60 s", workers)
		}
		cancel()
	}
}
