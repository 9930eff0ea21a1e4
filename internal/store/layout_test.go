package store

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// hostileRows makes n rows over ifaces interfaces, each with a Start
// anywhere in one day (as a hostile or broken exporter sets them), in
// arrival order.
func hostileRows(n, ifaces int, seed uint64) []flow.Record {
	r := rand.New(rand.NewPCG(seed, 1))
	recs := mkRecs(n, 0, "", 0)
	for i := range recs {
		recs[i].Iface = fmt.Sprintf("if%d", r.IntN(ifaces))
		recs[i].Start = t0 + r.Int64N(day-int64(time.Second))
		recs[i].End = recs[i].Start + int64(r.IntN(1e9))
	}
	return recs
}

// rowsPerBlock writes recs in batches of 1000 and returns the rows per
// block committed, checking that every row was written (and, with
// readBack, reads back).
func rowsPerBlock(t *testing.T, recs []flow.Record, cfg Config, readBack bool) float64 {
	t.Helper()
	cfg.Dir, cfg.NoSync, cfg.TimePrecision = tempDir(t), true, time.Nanosecond
	s := openT(t, cfg)
	for i := 0; i < len(recs); i += 1000 {
		s.Write(recs[i:min(i+1000, len(recs))])
		if len(s.parts) > s.cfg.MaxPartitions || s.nOpen > maxOpenFiles {
			t.Fatalf("%d partitions held, %d open", len(s.parts), s.nOpen)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.RowsWritten != int64(len(recs)) || st.DroppedRows != 0 {
		t.Fatalf("%+v", st)
	}
	if readBack {
		r, _ := OpenReadOnly(cfg.Dir)
		rows, failed := readAll(t, r)
		if failed != 0 || len(rows) != len(recs) {
			t.Fatalf("%d rows read back, %d blocks failed", len(rows), failed)
		}
	}
	return float64(st.RowsWritten) / float64(st.BlocksWritten)
}

// TestRandomStartsDoNotFragment: rows whose Start times are random within
// a day make blocks as large as the same rows in Start order (random
// Starts used to cut a block every ~3 rows): 100k rows over 50
// interfaces; 80k rows over 2 interfaces, where the span rule cuts; and
// with the pending bound in force (the largest partitions go first).
func TestRandomStartsDoNotFragment(t *testing.T) {
	for _, tc := range []struct {
		n, ifaces int
		cfg       Config
		min       float64 // rows per block at least, random order
	}{
		{100_000, 50, Config{}, 1500},
		{40_000, 1, Config{}, 10_000}, // blocks of minSpanRows and a last, shorter one
		{50_000, 50, Config{MaxPendingRows: 10_000}, 150},
	} {
		if raceEnabled { // the race detector makes encoding ~10x slower: a quarter of the rows
			tc.n, tc.min, tc.cfg.MaxPendingRows = tc.n/4, tc.min/4, tc.cfg.MaxPendingRows/4
		}
		random := hostileRows(tc.n, tc.ifaces, 7)
		inOrder := slices.Clone(random)
		slices.SortStableFunc(inOrder, func(a, b flow.Record) int { return cmpInt(a.Start, b.Start) })
		rnd := rowsPerBlock(t, random, tc.cfg, false)
		ord := rowsPerBlock(t, inOrder, tc.cfg, false)
		t.Logf("%d rows, %d interfaces, pending bound %d, partitions %d: %.0f rows a block at random, %.0f in order", tc.n, tc.ifaces, tc.cfg.MaxPendingRows, tc.cfg.MaxPartitions, rnd, ord)
		if rnd < ord/2 || rnd > ord*2 || rnd < tc.min {
			t.Fatalf("%.1f rows a block at random, %.1f in order (want within 2x, at least %.0f)", rnd, ord, tc.min)
		}
	}
}

// TestPartitionBound: more partitions than Config.MaxPartitions at once
// (an exporter's random interface names) keep the writer within it and
// within maxOpenFiles open partitions; the least recently written are
// written out (small blocks: the price of the bound) and every row is
// written.
func TestPartitionBound(t *testing.T) {
	recs := hostileRows(2000, 50, 9)
	rpb := rowsPerBlock(t, recs, Config{MaxPartitions: 30}, true)
	t.Logf("%.1f rows a block", rpb)
	dir := tempDir(t)
	s := openT(t, Config{Dir: dir, NoSync: true})
	for i := range 3 * maxOpenFiles { // as many partitions as a flush opens
		s.Write(mkRecs(2, uint64(2*i), fmt.Sprintf("if%d", i), t0))
	}
	if err := s.Flush(); err != nil || s.nOpen > maxOpenFiles {
		t.Fatalf("%v, %d partitions open", err, s.nOpen)
	}
	s.Close()
}
