package query

import (
	"context"
	"errors"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/store"
)

// DefaultResolution is the time bin of a query grouped by time without
// a Resolution: the store's default writeout interval.
const DefaultResolution = 5 * time.Minute

// Query is one question to the store.
type Query struct {
	Group []Attr     // attributes to group by (ParseGroupBy); empty: one total row
	Cond  *Condition // nil: every record
	// From and To bound the records counted by their Start: a record is
	// in when From <= Start < To, so adjacent ranges never count a record
	// twice. Zero values are unbounded.
	From, To time.Time
	Ifaces   []string // empty: every interface
	// Resolution is the width of the time bins when grouping by time: a
	// record counts in the bin of its Start (default DefaultResolution).
	Resolution time.Duration
	Sort       Metric
	Dir        Direction
	Ascending  bool // smallest first
	// Limit keeps the top Limit rows (per time bin when grouped by
	// time); 0 keeps all.
	Limit   int
	Workers int // goroutines scanning blocks; 0: GOMAXPROCS
	// Blocks, when not nil, are the blocks to read instead of listing the
	// store's (they are still filtered by time and condition): a caller
	// that pairs the store with live records lists them itself, so that
	// both come from the same moment (see LiveSnapshot).
	Blocks []store.BlockInfo
	// Progress, when not nil, is told after each block read how many of
	// the total reads are done; it is called from the scanning goroutines
	// at once, so it must be safe for concurrent use.
	Progress func(done, total int)
	// BinTotals, when positive, also sums the matching records per time
	// bin of this width into Result.BinTotals, in the same pass (the
	// console's top N and the totals its chart stacks them against).
	BinTotals time.Duration
}

// Counters are the sums of a group. Packets and Bytes were sent by the
// initiator (sip, "out"), RevPackets and RevBytes by the responder (dip,
// "in"); Flows counts the records. DropPackets and DropBytes are the
// packets (both ways together) and bytes the kernel dropped (eBPF source
// with drops; 0 otherwise).
type Counters struct {
	Packets, Bytes, RevPackets, RevBytes, Flows uint64
	DropPackets, DropBytes                      uint64
}

func (c *Counters) add(o *Counters) {
	c.Packets += o.Packets
	c.Bytes += o.Bytes
	c.RevPackets += o.RevPackets
	c.RevBytes += o.RevBytes
	c.Flows += o.Flows
	c.DropPackets += o.DropPackets
	c.DropBytes += o.DropBytes
}

// Value is the counter a ranking by m in direction d uses (d does not
// apply to the drop metrics).
func (c *Counters) Value(m Metric, d Direction) uint64 {
	switch m {
	case ByFlows:
		return c.Flows
	case ByDropPackets:
		return c.DropPackets
	case ByDropBytes:
		return c.DropBytes
	case ByPackets:
		return pick(d, c.Packets, c.RevPackets)
	}
	return pick(d, c.Bytes, c.RevBytes)
}

func pick(d Direction, out, in uint64) uint64 {
	switch d {
	case Out:
		return out
	case In:
		return in
	}
	return out + in
}

// Key identifies a group; attributes not grouped by are zero.
type Key struct {
	Time             time.Time // bin start, UTC
	Node             string    // where the records were observed, "" when not set
	Iface            string
	SrcIP, DstIP     netip.Addr
	SrcPort, DstPort uint16
	Proto            uint8
	DropReason       string // "" for records without a drop reason
	Sampling         uint32 // 0 or 1: unsampled
	// NATed says whether the group's records were translated (grouping
	// by a NAT attribute); NATSrcIP and NATDstIP are then valid (when
	// grouped by), else the zero Addr, and the NAT ports 0.
	NATed                  bool
	NATSrcIP, NATDstIP     netip.Addr
	NATSrcPort, NATDstPort uint16
	Verdict                flow.Verdict
	Rule                   string // "" for records without a rule
	Mark                   uint32 // conntrack mark
	Zone                   uint16 // conntrack zone
	// The workloads at the two ends and the service the flow reached
	// (when grouped by), "" for records whose workload or service is not
	// known.
	SrcWorkload, SrcNamespace, SrcNode     string
	DstWorkload, DstNamespace, DstNode     string
	Service, ServiceBackends, ServiceGroup string
	ServiceMatch                           flow.ServiceMatch
}

// enrichStr is k's value of enrichment string attribute a.
func (k *Key) enrichStr(a Attr) string {
	switch a {
	case AttrSrcWorkload:
		return k.SrcWorkload
	case AttrSrcNamespace:
		return k.SrcNamespace
	case AttrSrcNode:
		return k.SrcNode
	case AttrDstWorkload:
		return k.DstWorkload
	case AttrDstNamespace:
		return k.DstNamespace
	case AttrDstNode:
		return k.DstNode
	case AttrService:
		return k.Service
	case AttrServiceBackends:
		return k.ServiceBackends
	case AttrServiceGroup:
		return k.ServiceGroup
	}
	return ""
}

// Row is one group of the result.
type Row struct {
	Key
	Counters
}

// Stats say what a query read.
type Stats struct {
	Blocks        int           `json:"blocks"`         // blocks in the time range and interfaces asked for
	BlocksSkipped int           `json:"blocks_skipped"` // ruled out by their summaries, never read
	BlocksCorrupt int           `json:"blocks_corrupt"` // failed their checks: skipped and counted, as the store warns
	RowsScanned   int64         `json:"rows_scanned"`
	RowsMatched   int64         `json:"rows_matched"`
	LiveRecords   int           `json:"live_records"` // flows added from a running capture (--live)
	Groups        int           `json:"groups"`       // distinct groups before the top-N cut
	Elapsed       time.Duration `json:"-"`
}

// Result is a query's answer.
type Result struct {
	Query  *Query
	Rows   []Row
	Totals Counters // over every matching record, not only the rows shown
	Stats  Stats
	// BinTotals are the sums per time bin of Query.BinTotals (nil when
	// not asked): the rows the same query grouped by time alone at that
	// resolution, without a limit, would answer.
	BinTotals []Row
}

// Run answers q from s, adding live (records a running capture has not
// written to the store yet; may be nil). Blocks whose summaries rule
// the condition out are skipped unread; the rest are decoded, only in the
// columns the query needs, on Workers goroutines.
func Run(ctx context.Context, s *store.Store, q *Query, live []flow.Record) (*Result, error) {
	return run(ctx, s, q, live, nil)
}

// run is Run; with ts, it also keeps each group's sums per bin of
// q.BinTotals for RunTopSeries (when the query's shape allows it).
func run(ctx context.Context, s *store.Store, q *Query, live []flow.Record, ts *TopSeries) (*Result, error) {
	start := time.Now()
	from, to := bounds(q)
	res := &Result{Query: q}
	blocks := q.Blocks
	if blocks != nil && len(q.Ifaces) > 0 {
		blocks = slices.DeleteFunc(slices.Clone(blocks), func(b store.BlockInfo) bool { return !slices.Contains(q.Ifaces, b.Iface) })
	}
	if s != nil && blocks == nil {
		var err error
		var damaged []store.Damage
		if blocks, damaged, err = s.BlocksDamaged(from, to-1, q.Ifaces); err != nil {
			return nil, err
		}
		res.Stats.BlocksCorrupt = len(damaged) // skipped when listing: their records are not in the answer
	}
	res.Stats.Blocks = len(blocks) + res.Stats.BlocksCorrupt
	workers := q.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(1, min(workers, len(blocks)))
	// With many groups, each worker reads every block but keeps only the
	// groups of its hash partition: one table of the millions of groups,
	// not one per worker to merge. Each block is decoded once, by one
	// worker in turn, and shared (ring).
	parted := workers > 1 && manyGroups(q.Group)
	if ts != nil {
		ts.begin(q, blocks, res.Stats.BlocksCorrupt, parted)
	}
	scans := make([]*scanner, workers)
	var next atomic.Int64
	var failed atomic.Bool
	var read atomic.Int64 // blocks read, for q.Progress
	reads := len(blocks)
	if parted {
		reads *= workers // each partitioned worker aggregates every block (decoded once, shared)
	}
	var wg sync.WaitGroup
	errs := make([]error, workers)
	var shared *ring // partitioned workers decode each block once, in turn
	if parted {
		shared = newRing(workers)
	}
	for w := range scans {
		sc := newScanner(q, from, to)
		if ts != nil && ts.ok {
			sc.log = &binLog{ts: ts}
		}
		if parted {
			sc.part, sc.parts = uint64(w), uint64(workers)
			sc.in = shared.in
		}
		scans[w] = sc
		wg.Add(1)
		go func() {
			defer wg.Done()
			if parted {
				errs[w] = sc.scanShared(ctx, shared, s, blocks, w, &failed, &read, reads)
				return
			}
			for {
				i := int(next.Add(1) - 1)
				if i >= len(blocks) || ctx.Err() != nil || failed.Load() {
					return
				}
				if err := sc.block(s, &blocks[i]); err != nil {
					errs[w] = err
					failed.Store(true) // stop the others
					return
				}
				if q.Progress != nil {
					q.Progress(int(read.Add(1)), reads)
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(append(errs, ctx.Err())...); err != nil {
		return nil, err
	}
	if len(live) > 0 {
		for _, cols := range recordColumns(live, q.Ifaces) {
			res.Stats.LiveRecords += cols.N
			for i, sc := range scans {
				if i == 0 || parted {
					sc.rows(&cols, true)
					sc.log.check()
				}
			}
		}
	}
	for i, sc := range scans {
		sc.flushByID()
		if sc.g.tooMany {
			return nil, errTooManyLabels()
		}
		if i == 0 || !parted { // partitioned workers all saw every row
			res.Stats.BlocksSkipped += sc.skipped
			res.Stats.BlocksCorrupt += sc.corrupt
			res.Stats.RowsScanned += sc.scanned
			res.Stats.RowsMatched += sc.matched
		}
	}
	if parted {
		var all []Row
		for _, sc := range scans {
			sc.g.addrs = shared.in.addrs // the ids of every worker's keys
			rows, tot := sc.g.rank(q)
			all = append(all, rows...)
			res.Totals.add(&tot)
			res.Stats.Groups += sc.g.groups.n
			sc.g.groups.release()
			sc.g = nil
		}
		res.Rows = cut(q, all)
	} else {
		g := scans[0].g
		for _, sc := range scans[1:] {
			addrT, lblT := g.merge(sc.g)
			sc.log.translate(addrT, lblT) // the series' keys in g's ids
			sc.g = nil                    // let the collector have it
		}
		if g.tooMany {
			return nil, errTooManyLabels()
		}
		res.Stats.Groups = g.groups.n
		var top []gkey
		res.Rows, res.Totals, top = g.rankKeys(q)
		g.groups.release()
		if ts != nil {
			ts.end(g, top, scans)
		}
	}
	if q.BinTotals > 0 {
		res.BinTotals = binTotals(scans)
	}
	res.Stats.Elapsed = time.Since(start)
	return res, nil
}

// bounds are q's [from, to) in Unix ns.
func bounds(q *Query) (from, to int64) {
	from, to = 0, int64(^uint64(0)>>1)
	if !q.From.IsZero() {
		from = q.From.UnixNano()
	}
	if !q.To.IsZero() {
		to = q.To.UnixNano()
	}
	return from, to
}

// scanner is one goroutine's share of a query.
type scanner struct {
	q                 *Query
	from, to, res     int64
	group             [numAttrs]bool
	labels            bool // grouping by node, drop_reason, sampling or a later attribute: a label per row
	enrich            bool // grouping by an enrichment attribute
	cols              store.Columns
	ev                evaluator
	g                 *agg
	oneBin            bool  // the block's rows all start in one time bin (binT): its Start column was not read
	binT              int64 // that bin's start, Unix ns
	skipped, corrupt  int
	scanned, matched  int64
	need, needPartial store.Column
	part, parts       uint64      // this scanner keeps the groups of hash partition part
	srcIDs, dstIDs    dictIDs     // per block: dictionary index → interned id
	in                *agg        // interns addresses: g, or the ring's, shared by partitioned workers
	prep              prep        // the block's selection and interned addresses (rows)
	acc               []sums      // per block: sums per dictionary entry (byDict)
	accDrops          [][2]uint64 // and drop sums, for blocks with drops
	byID              []sums      // byDict's sums per interned address id
	ents, entIDs      []uint32    // byDict, per block: the dictionary entries used and their ids
	byIDDrops         [][2]uint64 // and drop sums (nil until some)
	accVer            []uint8
	own               [1]partRows         // per block: keys, hashes and rows to add
	anySel            []bool              // read: the rows the condition keeps, before the other columns are read
	tot               map[int64]*Counters // BinTotals' sums per bin start
	totT              int64               // the block's bin of BinTotals, when totOne
	totOne            bool                // the block's rows all start in bin totT (totBin)
	log               *binLog             // RunTopSeries: the sums per group and bin (nil: not kept)
}

func newScanner(q *Query, from, to int64) *scanner {
	sc := &scanner{q: q, from: from, to: to, g: newAgg(), res: int64(q.Resolution)}
	sc.in = sc.g
	if sc.res <= 0 {
		sc.res = int64(DefaultResolution)
	}
	need := store.ColPackets | store.ColBytes | store.ColRevPackets | store.ColRevBytes |
		store.ColDropPackets | store.ColDropBytes | q.Cond.columns()
	for _, a := range q.Group {
		sc.group[a] = true
		switch a {
		case AttrTime:
			need |= store.ColStart
		case AttrNode:
			need |= store.ColNode
		case AttrSrcIP: // the dictionary form: rows and byDict intern each distinct address once
			need |= store.ColSrcAddrIdx
		case AttrDstIP:
			need |= store.ColDstAddrIdx
		case AttrSrcPort:
			need |= store.ColSrcPort
		case AttrDstPort:
			need |= store.ColDstPort
		case AttrProto:
			need |= store.ColProto
		case AttrDropReason:
			need |= store.ColDropReason
		case AttrSampling:
			need |= store.ColSampling
		case AttrNATSrcIP:
			need |= store.ColNATSrcAddr
		case AttrNATDstIP:
			need |= store.ColNATDstAddr
		case AttrNATSrcPort:
			need |= store.ColNATSrcPort | store.ColNATVersion
		case AttrNATDstPort:
			need |= store.ColNATDstPort | store.ColNATVersion
		case AttrVerdict:
			need |= store.ColVerdict
		case AttrRule:
			need |= store.ColRule
		case AttrMark:
			need |= store.ColMark
		case AttrZone:
			need |= store.ColZone
		case AttrServiceMatch:
			need |= store.ColServiceMatch
			sc.enrich = true
		}
		if a.isEnrichStr() {
			need |= enrichCol(int(a - AttrSrcWorkload))
			sc.enrich = true
		}
	}
	sc.labels = sc.group[AttrNode] // the node is a row's label: blocks may mix nodes
	for a := AttrDropReason; a < numAttrs; a++ {
		sc.labels = sc.labels || sc.group[a]
	}
	sc.need, sc.needPartial = need, need|store.ColStart
	return sc
}

// block reads and aggregates one block, unless its summaries rule it out.
func (sc *scanner) block(s *store.Store, b *store.BlockInfo) error {
	st, whole, err := sc.read(s, b, &sc.cols)
	if err != nil {
		return err
	}
	sc.binT, sc.oneBin = sc.blockBin(b, whole) // read left its Start column out then
	sc.totT, sc.totOne = sc.totBin(b, whole)
	sc.use(st, whole, &sc.cols, nil)
	sc.oneBin, sc.totOne = false, false
	sc.log.check()
	return nil
}

// noDrops reports whether every row of b has zero drop counters.
func noDrops(b *store.BlockInfo) bool {
	_, p, _ := b.Range(store.ColDropPackets)
	_, by, _ := b.Range(store.ColDropBytes)
	return p|by == 0
}

// hasDrops reports whether c holds the drop columns (it does not when the
// block's summaries say they are all 0).
func hasDrops(c *store.Columns) bool {
	return len(c.DropPackets) == c.N && len(c.DropBytes) == c.N
}

// aheadRows is how many rows ahead the aggregation prefetches.
const aheadRows = 16

// manyGroups reports whether grouping by attrs may yield millions of
// groups (two or more of addresses and ports).
func manyGroups(attrs []Attr) bool {
	n := 0
	for _, a := range attrs {
		if a >= AttrSrcIP && a <= AttrDstPort {
			n++
		}
	}
	return n >= 2
}

// cut sorts rows from disjoint partitions, each already cut to its top
// Limit per time bin, and keeps the overall top Limit per bin.
func cut(q *Query, rows []Row) []Row {
	slices.SortFunc(rows, func(a, b Row) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		if va, vb := a.Value(q.Sort, q.Dir), b.Value(q.Sort, q.Dir); va != vb {
			if (va > vb) != q.Ascending {
				return -1
			}
			return 1
		}
		return a.Key.compare(&b.Key)
	})
	if q.Limit <= 0 {
		return rows
	}
	out := rows[:0]
	n := 0
	for i := range rows {
		if i > 0 && !rows[i].Time.Equal(rows[i-1].Time) {
			n = 0
		}
		if n < q.Limit {
			out = append(out, rows[i])
		}
		n++
	}
	return out
}

// floorDiv is division rounding toward minus infinity.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
