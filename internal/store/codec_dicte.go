package store

import (
	"encoding/binary"
	"slices"
)

// encDictE (version 11) is dict whose values seen once in the block are
// not dictionary entries but escapes: index size (one past the entries)
// and the value in a separate plane set, in row order. A frequency-
// ordered dictionary paid an index of ~log2(size) bits for each once-seen
// value (their order among themselves: information the rows' order
// already holds) and, past 256 entries, a second index plane for every
// row. The gendb week's Packets, ~560 distinct values a block of which
// ~370 are seen once: see docs/benchmarks.md "Store format 11".
//
//	u8 index width, u32 size, u8 value width, u64 base, u32 escapes,
//	u8 escape width, u8 order, value planes (size), index planes (rows;
//	size is an escape), escape planes (escapes: value-base, in row order)
//
// Order 0: the entries by descending frequency, their planes value-base.
// Order 1: the entries in ascending value order, their planes the gaps
// (the first's value-base, each next one's value - the last - 1); the
// writer uses it when the indexes fit a byte (one plane, whose order-0
// entropy no relabelling changes), where the sorted values' small gaps
// cost less than the values (the gendb week's Packets: ~190 entries).
const encDictE = 13

// dictEHead is the bytes before encDictE's planes.
const dictEHead = 20

// dictEMin is the fewest once-seen values for which encodeInts escapes
// them: with fewer, the index planes' saving does not pay the header.
const dictEMin = 16

// singles returns how many of the table's entries are seen once.
func (t *u64Table) singles() int {
	n := 0
	for _, c := range t.count {
		if c == 1 {
			n++
		}
	}
	return n
}

// putDictE appends the table's values (built by build) as encDictE.
func (e *intEncoder) putDictE(dst []byte, lo uint64) []byte {
	t := &e.tab
	o := freqOrder(t.count, &t.order, &t.rank, t.idx)
	m := len(o) // entries seen more than once: by descending count, so first
	for m > 0 && t.count[o[m-1]] == 1 {
		m--
	}
	s := slices.Grow(t.sorted[:0], m)[:m]
	for i, oi := range o[:m] {
		s[i] = t.dict[oi] - lo
	}
	t.sorted = s
	// Escapes first (their indexes are still o's), then the entries.
	var emax uint64
	esc := slices.Grow(e.esc[:0], len(o)-m)
	for i, x := range t.idx {
		if x >= uint64(m) {
			v := t.dict[o[x]] - lo
			esc = append(esc, v)
			emax = max(emax, v)
			t.idx[i] = uint64(m)
		}
	}
	e.esc = esc
	order := byte(0)
	if m <= 255 { // one index plane: the entries' order costs nothing
		order = 1
		e.sortEntries(s, t.idx, m)
	}
	var dmax uint64
	for _, v := range s {
		dmax = max(dmax, v)
	}
	iw, vw, ew := byteWidth(uint64(m)), byteWidth(dmax), byteWidth(emax)
	dst = append(dst, byte(iw))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(m))
	dst = append(dst, byte(vw))
	dst = binary.LittleEndian.AppendUint64(dst, lo)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(esc)))
	dst = append(dst, byte(ew), order)
	dst = putPlanes(dst, s, vw)
	dst = putPlanes(dst, t.idx, iw)
	return putPlanes(dst, esc, ew)
}

// sortEntries renumbers the m entries s (distinct values) in ascending
// order, rewriting the rows' indexes idx below m, and turns s into the
// gaps of order 1.
func (e *intEncoder) sortEntries(s, idx []uint64, m int) {
	rk := slices.Grow(e.rk[:0], m)[:m] // rk[place] = entry
	for i := range rk {
		rk[i] = uint64(i)
	}
	slices.SortFunc(rk, func(a, b uint64) int {
		if s[a] < s[b] {
			return -1
		}
		return 1 // distinct values: never equal
	})
	back := slices.Grow(e.back[:0], m)[:m] // back[entry] = place
	for place, i := range rk {
		back[i] = uint64(place)
	}
	for i, x := range idx {
		if x < uint64(m) {
			idx[i] = back[x]
		}
	}
	prev := uint64(0)
	for place, i := range rk { // back is free now: the gaps, by place
		v := s[i]
		g := v - prev
		if place > 0 {
			g--
		}
		back[place], prev = g, v
	}
	copy(s, back)
	e.rk, e.back = rk, back
}

// dictECuts appends the plane cuts of an encDictE stream of n rows and
// returns where it ends (-1: too short for its header).
func dictECuts(cut func(off, w, size int) int, st []byte, n int) int {
	if len(st) < dictEHead {
		return -1
	}
	size, nesc := int(binary.LittleEndian.Uint32(st[1:5])), int(binary.LittleEndian.Uint32(st[14:18]))
	off := cut(dictEHead, int(st[5]), size)
	off = cut(off, int(st[0]), n)
	return cut(off, int(st[18]), nesc)
}

// decodeDictE decodes an encDictE stream of n rows into dst (len n).
func decodeDictE[T integer](d *intDecoder, st []byte, n int, dst []T) error {
	if len(st) < dictEHead {
		return errBadStream
	}
	iw, vw, ew, order := int(st[0]), int(st[5]), int(st[18]), st[19]
	size := int(binary.LittleEndian.Uint32(st[1:5]))
	base := binary.LittleEndian.Uint64(st[6:14])
	nesc := int(binary.LittleEndian.Uint32(st[14:18]))
	// Entries and escapes are the rows' values: more than rows is
	// corrupt, so allocations are bounded by n, never by the fields.
	if iw > 4 || vw > 8 || ew > 8 || order > 1 || size > n || nesc > n ||
		int64(len(st)-dictEHead) != int64(size)*int64(vw)+int64(n)*int64(iw)+int64(nesc)*int64(ew) {
		return errBadStream
	}
	// dv and ev have one spare slot each, so the loop below reads both
	// without a branch and picks one (a conditional move).
	// At least 256 slots, those past the spare zero: dictRows1's table.
	dv := slices.Grow(d.dict[:0], max(size+1, 256))[:max(size+1, 256)]
	getPlanes(st[dictEHead:], dv[:size], vw)
	if order == 1 { // gaps: a running sum (wrapping, like the writer's)
		acc := base - 1
		for i, g := range dv[:size] {
			acc += g + 1
			dv[i] = acc
		}
	} else {
		for i := range dv[:size] {
			dv[i] += base
		}
	}
	clear(dv[size:])
	ev := slices.Grow(d.esc[:0], nesc+1)[:nesc+1]
	getPlanes(st[dictEHead+size*vw+n*iw:], ev[:nesc], ew)
	for i := range ev[:nesc] {
		ev[i] += base
	}
	ev[nesc] = 0
	d.dict, d.esc = dv, ev
	ip := st[dictEHead+size*vw : dictEHead+size*vw+n*iw]
	k, bad := 0, false
	if iw == 1 {
		var top int
		d.at = slices.Grow(d.at[:0], n+1)[:n+1]
		k, top = dictRows1(dst, ip[:len(dst)], (*[256]uint64)(dv), size, ev[:nesc], d.at)
		bad = top > size
	} else {
		u := slices.Grow(d.u[:0], n)[:n]
		d.u = u
		getPlanes(ip, u, iw)
		for i, x := range u {
			j := int(min(x, uint64(size)+1))
			bad = bad || j > size || k > nesc
			v, isE := dv[min(j, size)], j == size
			if isE {
				v = ev[min(k, nesc)]
				k++
			}
			dst[i] = T(v)
		}
	}
	if bad || k != nesc {
		return errBadStream
	}
	return nil
}

// dictRows1 is decodeDictE's row loop for one-byte indexes: dst[i] is
// entry ip[i] of tab, or the next escape of ev where ip[i] is the escape
// index esc. It returns the escapes taken (len(ev)+1 when more rows
// escape than ev holds) and the largest index. No branch on the row and
// no bounds check (tab holds every byte's entry): each row's escape
// flag appends its row to at (len(ip)+1 slots) without a branch, and the
// escapes are placed afterwards from that list. In decodeDictE's body
// the check of each row branched, and escapes (7% of Packets' rows, in no
// order) mispredicted.
//
//go:noinline
func dictRows1[T integer](dst []T, ip []byte, tab *[256]uint64, esc int, ev []uint64, at []uint32) (k, top int) {
	ip = ip[:len(dst)]
	at = at[:len(ip)+1]
	hi := 0
	for i, x := range ip {
		hi = max(hi, int(x)) // a conditional move (on bytes: a branch)
		dst[i] = T(tab[x])
		at[k] = uint32(i)
		k += b2i(int(x) == esc)
	}
	if k > len(ev) {
		return len(ev) + 1, hi
	}
	for j, i := range at[:k] {
		dst[i] = T(ev[j])
	}
	return k, hi
}

// b2i is 1 for true, 0 for false (a flag set, no branch).
func b2i(b bool) int {
	var i int
	if b {
		i = 1
	}
	return i
}
