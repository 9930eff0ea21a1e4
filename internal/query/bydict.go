package query

import (
	"encoding/binary"
	"slices"
	"unsafe"

	"github.com/weir-dev/weir/internal/prefetch"

	"github.com/weir-dev/weir/internal/store"
)

// byDict is the fast path of the commonest question, top sources or top
// destinations (talk_src, talk_dst), and of their series when the block
// starts in one time bin (the console's chart): rows are summed per entry
// of the block's address dictionary in a small array, and only the
// distinct addresses reach the group table. k holds the block's other
// key parts (its interface, its time bin). It reports whether it applied.
func (sc *scanner) byDict(c *store.Columns, sel []bool, k gkey) bool {
	if sc.parts > 1 {
		return false
	}
	var dict [][16]byte
	var idx []uint32
	binned := false // grouped by time (and the interface) too: the sums go to the table per block
	for _, a := range sc.q.Group {
		switch {
		case a == AttrSrcIP && dict == nil:
			dict, idx = c.SrcDict, c.SrcIdx
		case a == AttrDstIP && dict == nil:
			dict, idx = c.DstDict, c.DstIdx
		case a == AttrTime && sc.oneBin, a == AttrIface:
			binned = true
		default:
			return false
		}
	}
	if dict == nil || len(dict) >= c.N { // no address, live records, or no fewer entries than rows
		return false
	}
	acc := slices.Grow(sc.acc[:0], len(dict))[:len(dict)]
	clear(acc)
	vers := slices.Grow(sc.accVer[:0], len(dict))[:len(dict)]
	sc.acc, sc.accVer = acc, vers
	drops := hasDrops(c) // then drop sums per entry too (only then: acc stays small)
	var accDrops [][2]uint64
	if drops {
		accDrops = slices.Grow(sc.accDrops[:0], len(dict))[:len(dict)]
		clear(accDrops)
		sc.accDrops = accDrops
	}
	// The row loops are functions of their own: in byDict's body the
	// compiler spilled their slices and counters to the stack and reloaded
	// them every row.
	n := c.N
	sumEntries(acc, idx[:n], sel[:n], c.Packets[:n], c.Bytes[:n], c.RevPackets[:n], c.RevBytes[:n])
	clear(vers)
	matched, seen := entryFamilies(vers, idx[:n], sel[:n], c.IPVersion[:n])
	if drops {
		dp, db := c.DropPackets[:n], c.DropBytes[:n]
		for i, x := range idx[:n] {
			if sel[i] {
				accDrops[x][0] += dp[i]
				accDrops[x][1] += db[i]
			}
		}
	}
	// Each entry's version from its rows' families (famVer: 0 for an
	// unused entry and for one to split), noting in the same pass whether
	// any is to be split.
	var split uint8
	if seen&^famV4 != 0 && seen&^famV6 != 0 { // not all one usual family: maybe an entry in two
		for x, f := range vers {
			vers[x] = famVer[f&famMask]
			split |= famSplit[f&famMask]
		}
	} else {
		for x, f := range vers {
			vers[x] = famVer[f&famMask]
		}
	}
	if split != 0 {
		for x, v := range sc.splitFamilies(c, sel, k, dict, idx, acc, vers, accDrops) {
			vers[x] = v
		}
	}
	sc.matched += matched
	if binned {
		for x := range acc {
			if y := x + aheadAddrs; y < len(acc) && acc[y].Flows != 0 {
				sc.g.prefetchAddr(&dict[y], vers[y])
			}
			if acc[x].Flows != 0 {
				k.addrs = sc.pack(sc.g.addr(&dict[x], vers[x]))
				sc.g.groups.find(k).add(&acc[x])
				var dp, db uint64
				if drops {
					dp, db = accDrops[x][0], accDrops[x][1]
					sc.g.addDrops(k, dp, db)
				}
				sc.log.add(k, sc.totT, &acc[x], dp, db)
			}
		}
		return true
	}
	// The id is the group: its sums are an array entry, not a table slot.
	// First the used entries, then their ids, then the sums, each pass
	// prefetching a batch ahead: the address table and byID (tens of
	// thousands of addresses) are beyond the L2 cache and ids come in no
	// order, so each lookup and add would otherwise wait for a miss.
	ents := sc.ents[:0]
	for x := range acc {
		if acc[x].Flows != 0 {
			ents = append(ents, uint32(x))
		}
	}
	ids := slices.Grow(sc.entIDs[:0], len(ents))[:len(ents)]
	sc.ents, sc.entIDs = ents, ids
	top := max(uint32(len(sc.byID)), sc.g.internEnts(dict, vers, ents, ids))
	if int(top) > cap(sc.byID) { // doubling (append's quarter steps copied and faulted in 1.4 MiB several times)
		sc.byID = slices.Grow(sc.byID, max(int(top), 2*cap(sc.byID))-len(sc.byID))
	}
	if int(top) > len(sc.byID) {
		sc.byID = sc.byID[:top] // zero past the length: byID only grows
	}
	if sc.log == nil && !drops {
		addByID(sc.byID, acc, ents, ids)
		return true
	}
	byID := sc.byID
	for j, x := range ents {
		if l := j + aheadAddrs; l < len(ids) {
			e := &byID[ids[l]] // 40 bytes: may straddle two lines
			prefetch.Pair(uintptr(unsafe.Pointer(&e.Packets)), uintptr(unsafe.Pointer(&e.Flows)))
		}
		id := ids[j]
		byID[id].add(&acc[x])
		if sc.log != nil {
			var d [2]uint64
			if drops {
				d = accDrops[x]
			}
			sc.log.add(gkey{addrs: sc.pack(id)}, sc.totT, &acc[x], d[0], d[1])
		}
		if drops && accDrops[x] != [2]uint64{} {
			if int(id) >= len(sc.byIDDrops) {
				sc.byIDDrops = slices.Grow(sc.byIDDrops, int(id)+1-len(sc.byIDDrops))[:id+1]
			}
			sc.byIDDrops[id][0] += accDrops[x][0]
			sc.byIDDrops[id][1] += accDrops[x][1]
		}
	}
	return true
}

// sumEntries adds each selected row's counters to its dictionary entry's
// sums (all slices of one block's length but acc).
//
//go:noinline
func sumEntries(acc []sums, idx []uint32, sel []bool, pk, by, rpk, rby []uint64) {
	n := len(idx)
	sel, pk, by, rpk, rby = sel[:n], pk[:n], by[:n], rpk[:n], rby[:n]
	for i, x := range idx {
		if !sel[i] {
			continue
		}
		a := &acc[x]
		a.Packets += pk[i]
		a.Bytes += by[i]
		a.RevPackets += rpk[i]
		a.RevBytes += rby[i]
		a.Flows++
	}
}

// entryFamilies notes in fams each selected row's IP family (famBits) on
// its dictionary entry, with no branch on the entry (a first use is
// unpredictable: half the rows of a block are one); the rare entry seen
// in two families (or with an odd version) is split afterwards
// (splitFamilies). It returns the selected rows and every family bit of
// the block.
//
//go:noinline
func entryFamilies(fams []uint8, idx []uint32, sel []bool, ver []uint8) (int64, uint8) {
	n := len(idx)
	sel, ver = sel[:n], ver[:n]
	matched := int64(0)
	var seen uint8
	for i, x := range idx {
		if !sel[i] {
			continue
		}
		matched++
		f := famBits[ver[i]]
		seen |= f
		fams[x] |= f
	}
	return matched, seen
}

// aheadBatch is how many dictionary entries byDict's passes prefetch in
// one call, a batch ahead of the one they work on.
const aheadBatch = 16

// internEnts sets ids[j] to the interned id of dictionary entry ents[j]
// (dict and vers: the entries' addresses and versions) and returns one
// past the largest id.
func (g *agg) internEnts(dict [][16]byte, vers []uint8, ents, ids []uint32) uint32 {
	ids = ids[:len(ents)]
	var pf [aheadBatch]uintptr
	top := uint32(0)
	for lo := 0; lo < len(ents); lo += aheadBatch {
		if lo == 0 {
			prefetch.Lines(g.slotAddrs(pf[:0], dict, vers, ents[:min(aheadBatch, len(ents))]))
		}
		hi := min(lo+aheadBatch, len(ents))
		prefetch.Lines(g.slotAddrs(pf[:0], dict, vers, ents[hi:min(hi+aheadBatch, len(ents))]))
		for j := lo; j < hi; j++ {
			x := ents[j]
			a, v := &dict[x], vers[x]
			var id uint32
			if t := &g.v4; v == 4 && t.e != nil && v4Mapped(a) {
				// The first probe inline (it finds most addresses at
				// most half full): a call would spill the loop.
				k := binary.BigEndian.Uint32(a[12:])
				if e := t.e[t.slot(k)]; uint32(e>>32) == k && uint32(e) != 0 {
					id = uint32(e)
				} else {
					id = t.id(g, k, a)
				}
			} else {
				id = g.addr(a, v)
			}
			ids[j] = id
			top = max(top, id+1)
		}
	}
	return top
}

// slotAddrs appends to pf the address of the address table's slot where
// the probe for each entry of ents starts (IPv4 and IPv6; other
// addresses go to a map: nothing to fetch).
func (g *agg) slotAddrs(pf []uintptr, dict [][16]byte, vers []uint8, ents []uint32) []uintptr {
	for _, x := range ents {
		a := &dict[x]
		switch ver := vers[x]; {
		case ver == 4 && g.v4.e != nil && v4Mapped(a):
			pf = append(pf, uintptr(unsafe.Pointer(&g.v4.e[g.v4.slot(binary.BigEndian.Uint32(a[12:]))])))
		case ver != 4 && g.v6.e != nil:
			pf = append(pf, uintptr(unsafe.Pointer(&g.v6.e[g.v6.slotOf(a)])))
		}
	}
	return pf
}

// addByID adds each used dictionary entry's sums (acc[ents[j]]) to its
// id's (byID[ids[j]]), prefetching a batch ahead.
func addByID(byID, acc []sums, ents, ids []uint32) {
	ids = ids[:len(ents)]
	var pf [2 * aheadBatch]uintptr
	lines := func(ids []uint32) []uintptr {
		p := pf[:0]
		for _, id := range ids {
			e := &byID[id] // 40 bytes: may straddle two lines
			p = append(p, uintptr(unsafe.Pointer(&e.Packets)), uintptr(unsafe.Pointer(&e.Flows)))
		}
		return p
	}
	prefetch.Lines(lines(ids[:min(aheadBatch, len(ids))]))
	for lo := 0; lo < len(ents); lo += aheadBatch {
		hi := min(lo+aheadBatch, len(ents))
		prefetch.Lines(lines(ids[hi:min(hi+aheadBatch, len(ids))]))
		for j := lo; j < hi; j++ {
			byID[ids[j]].add(&acc[ents[j]])
		}
	}
}

// Family bits of byDict's row loop: an entry's bits are the families of
// its rows; famVer maps a lone usual family back to its version.
const (
	famV4    = 1
	famV6    = 2
	famOther = 4 // any version but 4 and 6 (a damaged or odd record)
	famMask  = 7
)

var (
	famBits = func() (t [256]uint8) {
		for v := range t {
			t[v] = famOther
		}
		t[4], t[6] = famV4, famV6
		return t
	}()
	famVer   = [famMask + 1]uint8{famV4: 4, famV6: 6}
	famSplit = [famMask + 1]uint8{famV4 | famV6: 1, famOther: 1, famOther | famV4: 1, famOther | famV6: 1, famMask: 1}
)

// splitFamilies keeps byDict's sums exact for an entry whose rows are not
// all of one usual family (an address seen as ::ffff:a.b.c.d in IPv6 and
// as a.b.c.d in IPv4): as before the branchless loop, the entry's sums
// are its rows of the first row's version, and every other row goes to
// its own group. vers holds each entry's version, 0 for such an entry
// (and for an unused one, which no selected row refers to). It returns
// such entries' versions.
func (sc *scanner) splitFamilies(c *store.Columns, sel []bool, k gkey, dict [][16]byte, idx []uint32, acc []sums, vers []uint8, accDrops [][2]uint64) map[uint32]uint8 {
	for x, v := range vers {
		if v == 0 { // unused entries' sums are 0 already
			acc[x] = sums{}
			if accDrops != nil {
				accDrops[x] = [2]uint64{}
			}
		}
	}
	first := map[uint32]uint8{} // a mixed entry's version, from its first row
	for i, x := range idx {
		if !sel[i] || vers[x] != 0 {
			continue
		}
		v := c.IPVersion[i]
		one := Counters{Packets: c.Packets[i], Bytes: c.Bytes[i], RevPackets: c.RevPackets[i], RevBytes: c.RevBytes[i], Flows: 1}
		if accDrops != nil {
			one.DropPackets, one.DropBytes = c.DropPackets[i], c.DropBytes[i]
		}
		if fv, ok := first[x]; !ok || fv == v {
			first[x] = v
			acc[x].add(&sums{Packets: one.Packets, Bytes: one.Bytes, RevPackets: one.RevPackets, RevBytes: one.RevBytes, Flows: 1})
			if accDrops != nil {
				accDrops[x][0] += one.DropPackets
				accDrops[x][1] += one.DropBytes
			}
			continue
		}
		k.addrs = sc.pack(sc.g.addr(&dict[x], v))
		sc.g.add(k, &one)
		sc.log.add(k, sc.totT, &sums{one.Packets, one.Bytes, one.RevPackets, one.RevBytes, 1}, one.DropPackets, one.DropBytes)
	}
	return first
}

// flushByID moves byDict's sums into the group table.
func (sc *scanner) flushByID() {
	n := 0
	for id := range sc.byID {
		if sc.byID[id].Flows != 0 {
			n++
		}
	}
	sc.g.groups.reserve(n)
	for id := range sc.byID {
		if sc.byID[id].Flows != 0 {
			k := gkey{addrs: sc.pack(uint32(id))}
			sc.g.groups.find(k).add(&sc.byID[id])
			if id < len(sc.byIDDrops) {
				sc.g.addDrops(k, sc.byIDDrops[id][0], sc.byIDDrops[id][1])
			}
		}
	}
	sc.byID, sc.byIDDrops = nil, nil
}

// pack places an interned address id in a key's address word, as the
// source or the destination of a single-address group-by.
func (sc *scanner) pack(id uint32) uint64 {
	if sc.group[AttrSrcIP] {
		return uint64(id) << 32
	}
	return uint64(id)
}

// oneKey sums the selected rows of a block whose rows all fall in group k
// (grouping by nothing, the interface, or a time bin all its rows start
// in) and adds the sum once. It reports whether it applied.
func (sc *scanner) oneKey(c *store.Columns, sel []bool, k gkey) bool {
	for _, a := range sc.q.Group {
		if a != AttrIface && (a != AttrTime || !sc.oneBin) {
			return false
		}
	}
	var s sums
	var dp, db uint64
	drops := hasDrops(c)
	for i, ok := range sel {
		if !ok {
			continue
		}
		s.Packets += c.Packets[i]
		s.Bytes += c.Bytes[i]
		s.RevPackets += c.RevPackets[i]
		s.RevBytes += c.RevBytes[i]
		s.Flows++
		if drops {
			dp += c.DropPackets[i]
			db += c.DropBytes[i]
		}
	}
	sc.matched += int64(s.Flows)
	if s.Flows != 0 {
		sc.g.groups.find(k).add(&s)
		sc.g.addDrops(k, dp, db)
		sc.log.add(k, sc.totT, &s, dp, db)
	}
	return true
}

// blockBin reports whether every row of block b (whole: all in the
// query's range) starts in one time bin of a query grouped by time, and
// that bin's start: a block of one writeout starts within one bin of any
// coarser resolution, and its summary says which, so the Start column,
// the costliest to decode, is not read. Partitioned workers (which share
// decoded blocks) always read it.
func (sc *scanner) blockBin(b *store.BlockInfo, whole bool) (int64, bool) {
	if !sc.group[AttrTime] || !whole || sc.parts > 1 || sc.q.Cond.columns()&store.ColStart != 0 {
		return 0, false
	}
	lo, hi, ok := b.Range(store.ColStart)
	t := floorDiv(int64(lo), sc.res)
	return t * sc.res, ok && int64(lo) == b.MinStart && t == floorDiv(int64(hi), sc.res)
}

// dictIDs memoises, for one block, the interned id of each entry of an
// address column's dictionary: a block of 5000 rows typically has a few
// hundred distinct addresses, so the address table is consulted once per
// distinct address instead of once per row.
type dictIDs struct {
	ids  []uint32 // 0: not interned yet
	ver  []uint8
	used []uint32 // internRows: the entries the block's selected rows use
}

func (d *dictIDs) reset(n int) {
	d.ids = slices.Grow(d.ids[:0], n)[:n]
	d.ver = slices.Grow(d.ver[:0], n)[:n]
	clear(d.ids)
}

// prefetchAddr fetches the IPv4 or IPv6 table's slot for a into the
// cache (other addresses go to a map: nothing to fetch).
func (g *agg) prefetchAddr(a *[16]byte, ver uint8) {
	switch {
	case ver == 4 && g.v4.e != nil && v4Mapped(a):
		prefetch.Line(uintptr(unsafe.Pointer(&g.v4.e[g.v4.slot(binary.BigEndian.Uint32(a[12:]))])))
	case ver != 4 && g.v6.e != nil: // as addr: every version but 4 in the 16-byte table
		prefetch.Line(uintptr(unsafe.Pointer(&g.v6.e[g.v6.slotOf(a)])))
	}
}
