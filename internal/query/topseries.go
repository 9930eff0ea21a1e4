package query

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/store"
)

// A top N and its series in one read of the blocks (the console's first
// view, /api/v1/topseries): while the top's pass sums each group, it also
// logs what it adds per bin of Query.BinTotals, in the units it adds them
// (a block's sums per group when the block starts within one bin, so
// about one entry per distinct address and block for a top by address;
// else one per row). Once the top is known, the series of its groups are
// the logged entries of those groups summed per (group, bin): the same
// sums the series query ("(condition) and (the top's groups)", grouped by
// the groups and time) would read the blocks again for.
//
// It applies when each group attribute is one whose equality test in a
// condition is equality of the group's key (addresses, ports, protocol,
// node, interface), the groups are not hash-partitioned among workers
// (manyGroups), and the log stays within maxBinLog entries; otherwise
// Series reports false and the caller runs the series query.

// maxBinLog bounds the entries the logs of one query hold together
// (64 bytes each, in chunks: 128 MiB); past it the series are read again
// (a variable for tests).
var maxBinLog int64 = 1 << 21

// binChunk is how many entries a log allocates at a time: no slice
// doubling (and copying) as a log grows.
const binChunk = 4096

// TopSeries is what RunTopSeries keeps for the series of its top.
type TopSeries struct {
	ok            bool // the shape allows it and nothing failed so far
	q             *Query
	blocks        []store.BlockInfo
	corruptListed int
	entries       atomic.Int64 // logged by all scanners (counted per block)
	over          atomic.Bool  // past maxBinLog: the logs were dropped
	names         *agg         // the merged ids' addresses and labels (public)
	top           []gkey
	logs          []*binLog
}

// binEntry is one logged sum: a group's key with the bin in t.
type binEntry struct {
	k gkey
	s sums
}

// binDrop is the drop sums of logged entry i (rare: kept apart).
type binDrop struct {
	i int
	d [2]uint64
}

// binChunks recycles the logs' chunks from one query to the next: a
// day's log is tens of MiB, which a fresh allocation would zero and fault
// in (and count towards the next collection) each time.
var binChunks = sync.Pool{New: func() any { return new([binChunk]binEntry) }}

// binLog is one scanner's log.
type binLog struct {
	ts      *TopSeries
	chunks  []*[binChunk]binEntry // full but the last (n%binChunk entries)
	n       int                   // entries in chunks
	drops   []binDrop
	counted int // entries counted in ts.entries
	off     bool
}

// seriesAttr reports whether a condition's equality test of a is
// equality of the key's value (as the top's condition writes it).
func seriesAttr(a Attr) bool {
	switch a {
	case AttrSrcIP, AttrDstIP, AttrSrcPort, AttrDstPort, AttrProto, AttrNode, AttrIface:
		return true
	}
	return false
}

// RunTopSeries is Run for a top N with q.BinTotals set, keeping what
// TopSeries.Series needs to answer the top's series without reading the
// blocks again.
func RunTopSeries(ctx context.Context, s *store.Store, q *Query, live []flow.Record) (*Result, *TopSeries, error) {
	ts := &TopSeries{}
	res, err := run(ctx, s, q, live, ts)
	if err != nil {
		return nil, nil, err
	}
	if ts.ok { // the stats the series derives from the block list must be the pass's own
		skipped, scanned := ts.blockStats(q.Cond, res.Stats.LiveRecords)
		ts.ok = skipped == res.Stats.BlocksSkipped && scanned == res.Stats.RowsScanned && res.Stats.BlocksCorrupt == ts.corruptListed
	}
	if !ts.ok {
		ts.Release()
	}
	return res, ts, nil
}

// begin is told the pass's shape and blocks.
func (ts *TopSeries) begin(q *Query, blocks []store.BlockInfo, corruptListed int, parted bool) {
	ts.q, ts.blocks, ts.corruptListed = q, blocks, corruptListed
	ts.ok = !parted && q.BinTotals > 0 && len(q.Group) > 0 && !slices.ContainsFunc(q.Group, func(a Attr) bool { return !seriesAttr(a) })
}

// end is told the merged groups' names, the top's keys and the scanners.
func (ts *TopSeries) end(g *agg, top []gkey, scans []*scanner) {
	if !ts.ok || ts.over.Load() {
		ts.ok = false
		for _, sc := range scans {
			sc.log.release()
		}
		return
	}
	ts.names = &agg{addrs: g.addrs, labels: g.labels}
	ts.top = top
	for _, sc := range scans {
		ts.logs = append(ts.logs, sc.log)
	}
	for _, k := range top { // an address the condition would not write back as itself (a version 4 address not mapped)
		for _, id := range [2]uint32{uint32(k.addrs >> 32), uint32(k.addrs)} {
			if id == 0 {
				continue
			}
			a := &g.addrs[id-1]
			if a.ver == 4 && !v4Mapped(&a.a) || a.ver != 4 && a.ver != 6 {
				ts.ok = false
			}
		}
	}
}

// blockStats are the blocks a query with condition c skips and the rows
// it scans (every row of a block it reads, and the live records).
func (ts *TopSeries) blockStats(c *Condition, live int) (skipped int, scanned int64) {
	from, to := bounds(ts.q)
	for i := range ts.blocks {
		b := &ts.blocks[i]
		if !c.mayMatch(b) || b.MinStart >= to || b.MaxEnd < from {
			skipped++
			continue
		}
		scanned += int64(b.Rows)
	}
	return skipped, scanned + int64(live)
}

// Series answers sq, the top's series query: the top's group and time at
// resolution q.BinTotals, no limit, the same range, interfaces and
// ranking, under the condition "(q's condition) and (the top's groups)"
// as /api/v1/topseries writes it, from the logged sums. It reports false
// when it cannot (the caller then runs sq).
func (ts *TopSeries) Series(sq *Query, top *Result) (*Result, bool) {
	if ts == nil || !ts.ok || sq.Limit != 0 || sq.Resolution != ts.q.BinTotals || !sq.From.Equal(ts.q.From) ||
		!sq.To.Equal(ts.q.To) || !slices.Equal(sq.Ifaces, ts.q.Ifaces) || sq.Blocks != nil ||
		sq.Sort != ts.q.Sort || sq.Dir != ts.q.Dir || sq.Ascending != ts.q.Ascending {
		return nil, false
	}
	want := append(slices.Clone(ts.q.Group), AttrTime)
	if len(sq.Group) != len(want) || slices.ContainsFunc(want, func(a Attr) bool { return !slices.Contains(sq.Group, a) }) {
		return nil, false
	}
	start := time.Now()
	in := make(map[gkey]bool, len(ts.top))
	var maybe [1 << 16 / 64]uint64 // the top's keys' bits: most entries are ruled out without a map lookup
	for _, k := range ts.top {
		in[k] = true
		h := topBit(k.addrs, k.rest)
		maybe[h/64] |= 1 << (h % 64)
	}
	a := &agg{addrs: ts.names.addrs, labels: ts.names.labels}
	a.groups.init()
	for _, l := range ts.logs {
		for c, ch := range l.chunks {
			ch := ch[:l.fill(c)]
			for i := range ch {
				e := &ch[i]
				if h := topBit(e.k.addrs, e.k.rest); maybe[h/64]&(1<<(h%64)) != 0 && in[gkey{addrs: e.k.addrs, rest: e.k.rest}] {
					a.groups.find(e.k).add(&e.s)
				}
			}
		}
		for _, d := range l.drops {
			k := l.chunks[d.i/binChunk][d.i%binChunk].k
			if in[gkey{addrs: k.addrs, rest: k.rest}] {
				a.addDrops(k, d.d[0], d.d[1])
			}
		}
	}
	res := &Result{Query: sq}
	res.Rows, res.Totals = a.rank(sq)
	res.Stats = Stats{Blocks: top.Stats.Blocks, BlocksCorrupt: ts.corruptListed, LiveRecords: top.Stats.LiveRecords,
		RowsMatched: int64(res.Totals.Flows), Groups: a.groups.n}
	res.Stats.BlocksSkipped, res.Stats.RowsScanned = ts.blockStats(sq.Cond, top.Stats.LiveRecords)
	a.groups.release()
	res.Stats.Elapsed = time.Since(start)
	return res, true
}

// topBit is a group's bit (of 65,536) in Series' filter of the top's keys.
func topBit(addrs, rest uint64) uint64 {
	return (addrs*0x9e3779b97f4a7c15 ^ rest*0xc2b2ae3d27d4eb4f) >> 48
}

// add logs sums s (and drops dp, db) of group k in the bin starting at t.
func (l *binLog) add(k gkey, t int64, s *sums, dp, db uint64) {
	if l == nil || l.off {
		return
	}
	j := l.n % binChunk
	if j == 0 {
		l.chunks = append(l.chunks, binChunks.Get().(*[binChunk]binEntry))
	}
	if dp|db != 0 {
		l.drops = append(l.drops, binDrop{l.n, [2]uint64{dp, db}})
	}
	k.t = t
	l.chunks[len(l.chunks)-1][j] = binEntry{k, *s}
	l.n++
}

// fill is how many entries chunk c holds.
func (l *binLog) fill(c int) int {
	if c < len(l.chunks)-1 {
		return binChunk
	}
	return l.n - c*binChunk
}

// release gives the log's chunks back for the next query's logs.
func (l *binLog) release() {
	if l == nil {
		return
	}
	for _, ch := range l.chunks {
		binChunks.Put(ch)
	}
	l.chunks, l.drops, l.n = nil, nil, 0
}

// Release gives the memory the log holds back for later queries; Series
// declines after it.
func (ts *TopSeries) Release() {
	if ts == nil {
		return
	}
	for _, l := range ts.logs {
		l.release()
	}
	ts.logs, ts.ok = nil, false
}

// check counts the entries logged since the last check against
// maxBinLog; past it every log stops (and drops what it holds).
func (l *binLog) check() {
	if l == nil || l.off {
		return
	}
	if l.ts.over.Load() || l.ts.entries.Add(int64(l.n-l.counted)) > maxBinLog {
		l.ts.over.Store(true)
		l.release()
		l.off = true
		return
	}
	l.counted = l.n
}

// translate moves the log's keys to the ids of the table its scanner's
// groups were merged into (agg.merge's translations).
func (l *binLog) translate(addrT, lblT []uint32) {
	if l == nil || l.off {
		return
	}
	for c, ch := range l.chunks {
		for i := range l.fill(c) {
			k := &ch[i].k
			k.addrs = uint64(addrT[k.addrs>>32])<<32 | uint64(addrT[uint32(k.addrs)])
			k.rest = k.rest&^0xffffff | uint64(lblT[min(k.rest&0xffffff, uint64(len(lblT)-1))])
		}
	}
}

// bin is the start of the BinTotals bin row i of c starts in (the
// block's when it starts within one).
func (sc *scanner) bin(c *store.Columns, i int) int64 {
	if sc.totOne {
		return sc.totT
	}
	res := int64(sc.q.BinTotals)
	return floorDiv(c.Start[i], res) * res
}
