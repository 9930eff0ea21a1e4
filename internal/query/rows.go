package query

import (
	"slices"
	"unsafe"

	"github.com/weir-dev/weir/internal/prefetch"
	"github.com/weir-dev/weir/internal/store"
)

// prep is what aggregating a block's rows needs besides its columns: the
// rows selected, and the interned ids of their addresses. Partitioned
// workers share one prep per block (ring): the selection and the
// interning are done once, not once per worker.
type prep struct {
	sel      []bool
	rows     []int32  // the indexes of the rows sel keeps (selectRows)
	src, dst []uint32 // per row, valid where sel (when grouped by the address)
	// Partitioned workers whose keys hold no label (sharedKeys): the keys,
	// hashes and rows of each partition, made once by the worker that
	// decoded the block (split) instead of by every worker for every row.
	parts   []partRows
	keyed   bool  // parts holds this block's rows
	matched int64 // rows selected (split)
}

// partRows are one hash partition's rows of a block: their keys, the
// keys' hashes and the rows' indexes.
type partRows struct {
	keys []gkey
	hs   []uint64
	idx  []int32
}

// rows aggregates the selected rows of one block. Drop counters are
// added when c has them (blocks with drops, live records).
func (sc *scanner) rows(c *store.Columns, checkTime bool) {
	p := &sc.prep
	sc.prepare(c, checkTime, p)
	sc.addBinTotals(c, p.sel)
	var k gkey // the key parts every row of the block shares: its interface, its time bin (oneBin)
	if sc.group[AttrIface] {
		k.rest = uint64(sc.g.label(label{iface: c.Iface}))
	}
	if sc.oneBin {
		k.t = sc.binT
	}
	// A block the series log must bin row by row (it spans bins) takes the
	// row path, which logs each row with its bin.
	if (sc.log == nil || sc.totOne) && (sc.oneKey(c, p.sel, k) || sc.byDict(c, p.sel, k)) {
		sc.scanned += int64(c.N)
		return
	}
	p.selectRows()
	sc.intern(c, p)
	sc.aggregate(c, p)
}

// selectRows sets p.rows to the indexes of the rows p.sel keeps, gathered
// without a branch: a filter keeps rows in no order, and a branch per row
// mispredicted about a third of them. The row paths then visit only those.
func (p *prep) selectRows() {
	n := len(p.sel)
	sb := unsafe.Slice((*uint8)(unsafe.Pointer(unsafe.SliceData(p.sel))), n)
	rows := slices.Grow(p.rows[:0], n)[:n]
	m := 0
	for i, b := range sb {
		rows[m] = int32(i) // m <= i: in bounds
		m += int(b & 1)
	}
	p.rows = rows[:m]
}

// prepare selects the rows of c that the condition and time range keep.
func (sc *scanner) prepare(c *store.Columns, checkTime bool, p *prep) {
	n := c.N
	p.sel = slices.Grow(p.sel[:0], n)[:n]
	sel := p.sel
	sc.ev.filter(sc.q.Cond, c, sel)
	if checkTime {
		for i, st := range c.Start[:n] {
			sel[i] = sel[i] && st >= sc.from && st < sc.to
		}
	}
}

// intern fills p's address ids of the selected rows, through sc.in. Ids
// follow the order rows are interned in, so workers that intern the same
// rows in the same order (or share sc.in) agree on them.
func (sc *scanner) intern(c *store.Columns, p *prep) {
	n := c.N
	if sc.group[AttrSrcIP] {
		p.src = sc.srcIDs.internRows(sc.in, c.SrcDict, c.SrcIdx, c.SrcAddr, c.IPVersion, n, p.rows, p.src)
	}
	if sc.group[AttrDstIP] {
		p.dst = sc.dstIDs.internRows(sc.in, c.DstDict, c.DstIdx, c.DstAddr, c.IPVersion, n, p.rows, p.dst)
	}
}

// internRows sets ids[i] to the interned id of the address of each row i
// of at (the rows selected, ascending, of n; one side's dictionary,
// indexes and addresses), reusing ids' capacity. With a dictionary it goes
// in three passes: the entries the selected rows use (each with its rows'
// family, the lowest when more than one), then those entries' ids in a
// tight loop that prefetches the address table aheadAddrs entries on, then
// each row's id from its entry: interning then costs once per entry, not
// a branchy call and a prefetch per row.
func (d *dictIDs) internRows(g *agg, dict [][16]byte, idx []uint32, rows [][16]byte, ver []uint8, n int, at []int32, ids []uint32) []uint32 {
	// Rows not in at get any id (never read).
	ids = slices.Grow(ids[:0], n)[:n]
	if dict == nil { // live records: each row interned itself
		for j, i := range at {
			if l := j + aheadAddrs; l < len(at) {
				g.prefetchAddr(&rows[at[l]], ver[at[l]])
			}
			ids[i] = g.addr(&rows[i], ver[i])
		}
		return ids
	}
	d.reset(len(dict))
	used, dids, dver := d.used[:0], d.ids, d.ver
	idx = idx[:n]
	ver = ver[:n]
	fam := dver // as family bits first
	clear(fam)
	for _, i := range at {
		fam[idx[i]] |= famBits[ver[i]]
	}
	for x, f := range fam {
		if f != 0 {
			used = append(used, uint32(x))
			dids[x] = pending
		}
		// The version of the entry's id: its lowest family's (the rows of
		// another, rare, are interned one by one below).
		fam[x] = famVer[f&-f]
	}
	d.used = used
	for j, x := range used {
		if l := j + aheadAddrs; l < len(used) {
			g.prefetchAddr(&dict[used[l]], dver[used[l]])
		}
		dids[x] = g.addr(&dict[x], dver[x])
	}
	for _, i := range at {
		x, v := idx[i], ver[i]
		ids[i] = dids[x]
		if dver[x] != v { // one address in both families (::ffff:a.b.c.d as IPv6): rare, exact
			ids[i] = g.addr(&dict[x], v)
		}
	}
	return ids
}

// pending marks a dictionary entry used but not yet interned (internRows);
// ids never reach it.
const pending = ^uint32(0)

// aheadAddrs is how many rows ahead interning prefetches the address
// table's slot: the table is small but the group table evicts it.
const aheadAddrs = 8

// sharedKeys reports whether the scanner's keys are the same for every
// partitioned worker: no label id, which each worker interns itself.
func (sc *scanner) sharedKeys() bool {
	return sc.parts > 1 && !sc.group[AttrIface] && !sc.labels
}

// split makes p's keys, hashes and rows per partition of sc.parts (see
// prep.parts), for workers whose keys are shared (sharedKeys).
func (sc *scanner) split(c *store.Columns, p *prep) {
	if len(p.parts) != int(sc.parts) {
		p.parts = make([]partRows, sc.parts)
	}
	p.matched = sc.keyRows(c, p, 0, p.parts, -1)
	p.keyed = true
}

// keyRows appends the key, its hash and the row of every row p selects
// to dst[part], part the key's hash partition of sc.parts; with only >= 0,
// to dst[0] and only the rows of partition only. It empties dst first
// and returns how many rows p selects. rest is the label id the block's
// rows share (when not per row).
func (sc *scanner) keyRows(c *store.Columns, p *prep, rest uint64, dst []partRows, only int) int64 {
	for j := range dst {
		d := &dst[j]
		d.keys, d.hs, d.idx = d.keys[:0], d.hs[:0], d.idx[:0]
	}
	var k gkey
	k.rest = rest
	var base label // the labels of this block's rows, but drop reason and sampling
	if sc.group[AttrIface] {
		base.iface = c.Iface
	}
	g := &sc.group
	matched := int64(len(p.rows))
	for _, r := range p.rows {
		i := int(r)
		var src, dst32 uint32
		if g[AttrSrcIP] {
			src = p.src[i]
		}
		if g[AttrDstIP] {
			dst32 = p.dst[i]
		}
		k.addrs = uint64(src)<<32 | uint64(dst32)
		k.rest &= 0xffffff
		if sc.labels {
			k.rest = uint64(sc.g.label(sc.rowLabel(base, c, i)))
		}
		if g[AttrSrcPort] {
			k.rest |= uint64(c.SrcPort[i]) << 48
		}
		if g[AttrDstPort] {
			k.rest |= uint64(c.DstPort[i]) << 32
		}
		if g[AttrProto] {
			k.rest |= uint64(c.Proto[i]) << 24
		}
		if g[AttrTime] && sc.oneBin {
			k.t = sc.binT
		} else if g[AttrTime] {
			k.t = floorDiv(c.Start[i], sc.res) * sc.res
		}
		h := k.hash()
		part := 0
		if sc.parts > 1 {
			part = int((h >> 32) * sc.parts >> 32) // high bits: the table indexes by the low ones
		}
		if only >= 0 {
			if part != only {
				continue
			}
			part = 0
		}
		d := &dst[part]
		d.keys, d.hs, d.idx = append(d.keys, k), append(d.hs, h), append(d.idx, r)
	}
	return matched
}

// aggregate adds the rows p selects to this scanner's groups (of its
// hash partition, when partitioned).
func (sc *scanner) aggregate(c *store.Columns, p *prep) {
	n := c.N
	sc.scanned += int64(n)
	// First the keys and hashes of the rows this scanner keeps, then the
	// table updates, each prefetching the slot of the row aheadRows later:
	// a table of millions of groups misses the cache on nearly every row,
	// and the prefetches let those misses overlap.
	pr := &sc.own[0]
	if p.keyed && sc.sharedKeys() {
		pr = &p.parts[sc.part]
		sc.matched += p.matched
	} else {
		var rest uint64
		if sc.group[AttrIface] || sc.labels {
			var base label
			if sc.group[AttrIface] {
				base.iface = c.Iface
			}
			rest = uint64(sc.g.label(base))
		}
		sc.matched += sc.keyRows(c, p, rest, sc.own[:], int(sc.part))
	}
	keys, hs, idx := pr.keys, pr.hs, pr.idx
	t := &sc.g.groups
	var one sums
	one.Flows = 1
	// One prefetch call per aheadRows rows, for the batch after the one
	// being added: a call per row spilled the loop's registers every row.
	var pf [aheadRows]uintptr
	prefetch.Lines(slotAddrs(pf[:0], t, hs[:min(aheadRows, len(hs))]))
	for lo := 0; lo < len(idx); lo += aheadRows {
		hi := min(lo+aheadRows, len(idx))
		prefetch.Lines(slotAddrs(pf[:0], t, hs[hi:min(hi+aheadRows, len(hs))]))
		for j := lo; j < hi; j++ {
			i := idx[j]
			one.Packets, one.Bytes, one.RevPackets, one.RevBytes = c.Packets[i], c.Bytes[i], c.RevPackets[i], c.RevBytes[i]
			t.findH(keys[j], hs[j]).add(&one)
		}
	}
	drops := hasDrops(c)
	if drops {
		dp, db := c.DropPackets[:n], c.DropBytes[:n]
		for j, i := range idx {
			sc.g.addDrops(keys[j], dp[i], db[i])
		}
	}
	if sc.log != nil {
		for j, i := range idx {
			one.Packets, one.Bytes, one.RevPackets, one.RevBytes = c.Packets[i], c.Bytes[i], c.RevPackets[i], c.RevBytes[i]
			var dp, db uint64
			if drops {
				dp, db = c.DropPackets[i], c.DropBytes[i]
			}
			sc.log.add(keys[j], sc.bin(c, int(i)), &one, dp, db)
		}
	}
}

// slotAddrs appends to pf the address of the slot each hash of hs starts
// probing at in t.
func slotAddrs(pf []uintptr, t *sharded, hs []uint64) []uintptr {
	for _, h := range hs {
		pf = append(pf, t.slotAddr(h))
	}
	return pf
}
