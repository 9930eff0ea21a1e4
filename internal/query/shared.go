package query

import (
	"errors"
	"fmt"
	"slices"
	"sync"

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
// only one of them decodes a block (worker i%workers block i), selects
// its rows and interns their addresses, into a slot of the ring the
// others then read too. Decoding and interning, more than half the CPU
// of a two-address query, are then done once instead of once per worker.
// Blocks are decoded in parallel but interned in order, one at a time,
// into one table (in) that every worker's ids refer to.
type ring struct {
	mu      sync.Mutex
	cond    sync.Cond
	workers int
	slots   []ringSlot
	in      *agg // the shared address table (only its interning part is used)
	turn    int  // the block to intern next
	abort   bool // a worker failed or the query was cancelled: all stop
}

// ringSlot holds one decoded block until every worker has used it.
type ringSlot struct {
	block int  // index of the block held
	ready bool // decoded, not yet used by every worker
	users int  // workers yet to use it
	st    blockState
	whole bool
	cols  store.Columns
	p     prep
}

func newRing(workers int) *ring {
	r := &ring{workers: workers, slots: make([]ringSlot, 2*workers), // a block ahead per worker
		in: &agg{labelID: map[label]uint32{}}}
	r.cond.L = &r.mu
	return r
}

// stop makes every worker's wait return false.
func (r *ring) stop() {
	r.mu.Lock()
	r.abort = true
	r.cond.Broadcast()
	r.mu.Unlock()
}

// next hands worker w block i of blocks, decoding it first when it is w's
// turn; the caller must call done(i) after using it. It returns false
// (and an error if the read failed) when the workers must stop.
func (r *ring) next(w, i int, sc *scanner, s *store.Store, b *store.BlockInfo) (*ringSlot, bool, error) {
	sl := &r.slots[i%len(r.slots)]
	if i%r.workers == w {
		r.mu.Lock()
		for sl.users > 0 && !r.abort { // the block before in this slot is still in use
			r.cond.Wait()
		}
		abort := r.abort
		r.mu.Unlock()
		if abort {
			return nil, false, nil
		}
		// The slot is this worker's alone until it is marked ready.
		st, whole, err := sc.read(s, b, &sl.cols)
		if err != nil {
			r.stop()
			return nil, false, err
		}
		if st == blockRows {
			sc.prepare(&sl.cols, !whole, &sl.p)
			sl.p.selectRows() // here, in parallel: interning waits its turn
		}
		r.mu.Lock()
		for r.turn != i && !r.abort { // the blocks before are interned first
			r.cond.Wait()
		}
		abort = r.abort
		r.mu.Unlock()
		if abort {
			return nil, false, nil
		}
		if st == blockRows {
			sc.intern(&sl.cols, &sl.p) // sc.in is r.in, this worker's alone until turn moves on
		}
		r.mu.Lock()
		r.turn = i + 1 // the next block's interning need not wait for the split
		r.cond.Broadcast()
		r.mu.Unlock()
		sl.p.keyed = false
		if st == blockRows && sc.sharedKeys() {
			sc.split(&sl.cols, &sl.p)
		}
		r.mu.Lock()
		sl.block, sl.ready, sl.users, sl.st, sl.whole = i, true, r.workers, st, whole
		r.cond.Broadcast()
		r.mu.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for !(sl.ready && sl.block == i) && !r.abort {
		r.cond.Wait()
	}
	return sl, !r.abort, nil
}

// done says worker has used block i: the last user frees its slot.
func (r *ring) done(i int) {
	sl := &r.slots[i%len(r.slots)]
	r.mu.Lock()
	if sl.users--; sl.users == 0 {
		sl.ready = false
		r.cond.Broadcast()
	}
	r.mu.Unlock()
}
