package query

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/weir-dev/weir/internal/store"
)

// blockState is what reading a block came to.
type blockState uint8

const (
	blockRows    blockState = iota // decoded: aggregate its rows
	blockSkipped                   // ruled out by its summaries, never read
	blockCorrupt                   // failed its checks: skipped and counted
	blockGone                      // pruned by retention since it was listed
	blockNoRows                    // read in the condition's columns only: no row matches
)

// read decodes block b into cols unless its summaries rule it out; whole
// says every row's Start is in the query's range.
func (sc *scanner) read(s *store.Store, b *store.BlockInfo, cols *store.Columns) (st blockState, whole bool, err error) {
	if !sc.q.Cond.mayMatch(b) || b.MinStart >= sc.to || b.MaxEnd < sc.from {
		return blockSkipped, false, nil
	}
	whole = b.MinStart >= sc.from && b.MaxEnd < sc.to
	need := sc.need
	if !whole {
		need = sc.needPartial
	}
	if noDrops(b) { // nearly every block: the drop columns are all 0
		need &^= store.ColDropPackets | store.ColDropBytes
	}
	if _, ok := sc.blockBin(b, whole); ok {
		need &^= store.ColStart
	}
	if _, ok := sc.totBin(b, whole); sc.q.BinTotals > 0 && !ok {
		need |= store.ColStart // the bin totals bin its rows one by one
	}
	// The condition's columns first (and Start, to cut by time), the rest
	// only when a row matches: a condition the summaries cannot rule out
	// often holds for no row of a block (dport = 53 and proto = 6).
	first := sc.q.Cond.columns()
	if !whole {
		first |= store.ColStart
	}
	lazy := first != 0 && need&^first != 0 && need&first == first && !eagerReads
	if !lazy {
		if err := s.ReadBlock(b, need, cols); err != nil {
			return readErr(err, whole)
		}
		return blockRows, whole, nil
	}
	if err := s.ReadFirst(b, first, need, cols); err != nil {
		return readErr(err, whole)
	}
	if !sc.anyRow(cols, !whole) {
		if noRowsHook != nil {
			noRowsHook()
		}
		return blockNoRows, whole, nil
	}
	if err := s.ReadMore(b, need&^first, cols); err != nil {
		return readErr(err, whole)
	}
	return blockRows, whole, nil
}

// Tests: eagerReads reads every block's columns at once, noRowsHook is
// called for each block read in its condition's columns only.
var (
	eagerReads bool
	noRowsHook func()
)

// readErr is what a failed read of a block comes to.
func readErr(err error, whole bool) (blockState, bool, error) {
	if errors.Is(err, store.ErrCorrupt) {
		return blockCorrupt, whole, nil
	}
	if errors.Is(err, store.ErrPruned) {
		return blockGone, whole, nil
	}
	return 0, whole, fmt.Errorf("query: %w", err)
}

// anyRow reports whether some row of c meets the condition (and starts in
// the query's range, with checkTime).
func (sc *scanner) anyRow(c *store.Columns, checkTime bool) bool {
	n := c.N
	sel := slices.Grow(sc.anySel[:0], n)[:n]
	sc.anySel = sel
	sc.ev.filter(sc.q.Cond, c, sel)
	for i, ok := range sel {
		if ok && (!checkTime || c.Start[i] >= sc.from && c.Start[i] < sc.to) {
			return true
		}
	}
	return false
}

// use aggregates a block read as st (counting it when not read); p, when
// not nil, is its rows already selected and interned.
func (sc *scanner) use(st blockState, whole bool, cols *store.Columns, p *prep) {
	switch st {
	case blockSkipped:
		sc.skipped++
	case blockCorrupt:
		sc.corrupt++
	case blockNoRows:
		sc.scanned += int64(cols.N)
	case blockRows:
		if p != nil {
			sc.addBinTotals(cols, p.sel)
			sc.aggregate(cols, p)
		} else {
			sc.rows(cols, !whole)
		}
	}
}

// ring shares decoded blocks among partitioned workers: each worker reads
// every block in order and keeps the groups of its hash partition, but
// only one of them decodes a block, selects its rows and interns their
// addresses, into a slot of the ring the others then read too. Decoding
// and interning, more than half the CPU of a two-address query, are then
// done once instead of once per worker. Blocks are decoded in parallel but
// interned in order, one run at a time, into one table (in) that every
// worker's ids refer to.
//
// A slot holds a run of ringRun consecutive blocks (run r is worker
// r%workers's to decode): every wait on another worker costs a goroutine
// park and wake-up, tens of µs of CPU on a small VM, so the workers meet
// once per run instead of once per block.
type ring struct {
	mu      sync.Mutex
	turnC   sync.Cond // signalled when turn moves on (each slot has its own for the rest)
	workers int
	slots   []ringSlot
	in      *agg // the shared address table (only its interning part is used)
	turn    int  // the run to intern next
	abort   bool // a worker failed or the query was cancelled: all stop
}

// ringRun is how many consecutive blocks a ring slot holds: enough to make
// the hand-offs rare, few enough that a run's decoded columns stay in the
// cache until every worker has aggregated them (a variable for tests).
var ringRun = 4

// ringSlot holds one run of decoded blocks until every worker has used it.
type ringSlot struct {
	run   int  // index of the run held
	ready bool // decoded, not yet used by every worker
	users int  // workers yet to use it
	n     int  // blocks of the run
	b     []ringBlock
	// cond is signalled when the slot is ready or freed: a wait per slot
	// and one for the turn wake only the worker that waits on that change,
	// not one that then finds it still has to wait (a wasted wake-up).
	cond sync.Cond
}

// ringBlock is one decoded block of a slot's run.
type ringBlock struct {
	st    blockState
	whole bool
	cols  store.Columns
	p     prep
}

func newRing(workers int) *ring {
	r := &ring{workers: workers, slots: make([]ringSlot, 2*workers), // a run ahead per worker
		in: &agg{labelID: map[label]uint32{}}}
	for i := range r.slots {
		r.slots[i].b = make([]ringBlock, ringRun)
		r.slots[i].cond.L = &r.mu
	}
	r.turnC.L = &r.mu
	return r
}

// runs is how many runs of the ring the n blocks make.
func (r *ring) runs(n int) int {
	return (n + ringRun - 1) / ringRun
}

// stop makes every worker's wait return false.
func (r *ring) stop() {
	r.mu.Lock()
	r.abort = true
	r.turnC.Broadcast()
	for i := range r.slots {
		r.slots[i].cond.Broadcast()
	}
	r.mu.Unlock()
}

// next hands worker w run i of blocks (blocks i*ringRun on), decoding it
// first when it is w's turn; the caller must call done(i) after using it.
// It returns false (and an error if a read failed) when the workers must
// stop.
func (r *ring) next(w, i int, sc *scanner, s *store.Store, blocks []store.BlockInfo) (*ringSlot, bool, error) {
	sl := &r.slots[i%len(r.slots)]
	if i%r.workers == w {
		r.mu.Lock()
		for sl.users > 0 && !r.abort { // the run before in this slot is still in use
			sl.cond.Wait()
		}
		abort := r.abort
		r.mu.Unlock()
		if abort {
			return nil, false, nil
		}
		// The slot is this worker's alone until it is marked ready.
		run := blocks[i*ringRun : min(len(blocks), (i+1)*ringRun)]
		sl.n = len(run)
		for j := range run {
			rb := &sl.b[j]
			var err error
			if rb.st, rb.whole, err = sc.read(s, &run[j], &rb.cols); err != nil {
				r.stop()
				return nil, false, err
			}
			if rb.st == blockRows {
				sc.prepare(&rb.cols, !rb.whole, &rb.p)
				rb.p.selectRows() // here, in parallel: interning waits its turn
			}
		}
		r.mu.Lock()
		for r.turn != i && !r.abort { // the runs before are interned first
			r.turnC.Wait()
		}
		abort = r.abort
		r.mu.Unlock()
		if abort {
			return nil, false, nil
		}
		for j := range sl.n {
			if rb := &sl.b[j]; rb.st == blockRows {
				sc.intern(&rb.cols, &rb.p) // sc.in is r.in, this worker's alone until turn moves on
			}
		}
		r.mu.Lock()
		r.turn = i + 1 // the next run's interning need not wait for the split
		r.turnC.Broadcast()
		r.mu.Unlock()
		for j := range sl.n {
			rb := &sl.b[j]
			rb.p.keyed = false
			if rb.st == blockRows && sc.sharedKeys() {
				sc.split(&rb.cols, &rb.p)
			}
		}
		r.mu.Lock()
		sl.run, sl.ready, sl.users = i, true, r.workers
		sl.cond.Broadcast()
		r.mu.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for !(sl.ready && sl.run == i) && !r.abort {
		sl.cond.Wait()
	}
	return sl, !r.abort, nil
}

// done says a worker has used run i: the last user frees its slot.
func (r *ring) done(i int) {
	sl := &r.slots[i%len(r.slots)]
	r.mu.Lock()
	if sl.users--; sl.users == 0 {
		sl.ready = false
		sl.cond.Broadcast()
	}
	r.mu.Unlock()
}

// scanShared is partitioned worker w's scan: every run of blocks from the
// ring r, in order. read counts the blocks used of reads, for Progress.
func (sc *scanner) scanShared(ctx context.Context, r *ring, s *store.Store, blocks []store.BlockInfo, w int, failed *atomic.Bool, read *atomic.Int64, reads int) error {
	for i := range r.runs(len(blocks)) {
		if ctx.Err() != nil || failed.Load() {
			r.stop() // the others may wait for a run this worker was to decode
			return nil
		}
		sl, ok, err := r.next(w, i, sc, s, blocks)
		if err != nil {
			failed.Store(true) // stop the others
			return err
		}
		if !ok {
			return nil // another worker stopped
		}
		for j := range sl.n {
			rb := &sl.b[j]
			sc.use(rb.st, rb.whole, &rb.cols, &rb.p)
			if sc.q.Progress != nil {
				sc.q.Progress(int(read.Add(1)), reads)
			}
		}
		r.done(i)
	}
	return nil
}
