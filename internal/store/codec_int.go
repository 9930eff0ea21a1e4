package store

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"slices"
)

// Column stream encodings (the directory's encoding byte).
const (
	encConst = 1
	encFOR   = 2
	encDelta = 3
	encDict  = 4
	encADict = 5
	encARaw  = 6
	// encDeltaU (version 9) is delta whose u are the plain differences of
	// consecutive (v-base)/scale, all ≥ 0: a non-decreasing column (Start,
	// which rows are sorted by) needs no zigzag, whose doubled values
	// spilled a byte plane's worth of small gaps into a second plane
	// (Start on the gendb week: 1.01 → ~0.93 B/row).
	encDeltaU = 11
)

// errBadStream reports a column stream that does not parse.
var errBadStream = errors.New("store: malformed column stream")

// byteWidth is the number of bytes needed to hold x (0 for x == 0).
func byteWidth(x uint64) int { return (bits.Len64(x) + 7) / 8 }

// zigzag maps signed deltas to small unsigned numbers (0,-1,1,-2 → 0,1,2,3).
func zigzag(d uint64) uint64 { return (d << 1) ^ uint64(int64(d)>>63) }

func unzigzag(z uint64) uint64 { return (z >> 1) ^ -(z & 1) }

// u64Table is a reusable open-addressing hash table that builds a
// dictionary of distinct uint64 values (epoch stamps avoid clearing it).
type u64Table struct {
	tab    []u64Slot
	size   int // slots this build uses (tab may be larger, from a larger limit)
	epoch  uint32
	dict   []uint64
	count  []uint32
	idx    []uint64 // per-row dictionary index
	order  []int32
	rank   []uint64
	sorted []uint64
}

// u64Slot is one slot: key, dictionary index and epoch stamp in 16
// bytes, so a probe touches one cache line, not three arrays'.
type u64Slot struct {
	key   uint64
	slot  int32
	stamp uint32
}

func (t *u64Table) reset(n int) {
	size := 16
	for size < 2*n {
		size <<= 1
	}
	if len(t.tab) < size {
		t.tab = make([]u64Slot, size)
		t.epoch = 0
	}
	t.size = size
	t.epoch++
	if t.epoch == 0 { // wrapped: stamps are stale but could collide
		clear(t.tab)
		t.epoch = 1
	}
	t.dict = t.dict[:0]
	t.count = t.count[:0]
}

func mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// build collects the distinct values of v with their counts and each row's
// index; it gives up (false) past limit distinct values.
func (t *u64Table) build(v []uint64, limit int) bool {
	t.reset(limit)
	tab := t.tab[:t.size] // the limit's size, not the largest a block needed: fewer lines to miss
	mask := uint64(t.size - 1)
	t.idx = slices.Grow(t.idx[:0], len(v))[:len(v)]
	for i, x := range v {
		h := mix64(x) & mask
		var e *u64Slot
		for {
			e = &tab[h]
			if e.stamp != t.epoch {
				if len(t.dict) >= limit {
					return false
				}
				*e = u64Slot{key: x, slot: int32(len(t.dict)), stamp: t.epoch}
				t.dict = append(t.dict, x)
				t.count = append(t.count, 0)
				break
			}
			if e.key == x {
				break
			}
			h = (h + 1) & mask
		}
		s := e.slot
		t.count[s]++
		t.idx[i] = uint64(s)
	}
	return true
}

// freqOrder renumbers the dictionary by descending count (ties by first
// appearance) so the common values get the small, well-compressed indexes.
// It returns the order (new index → old) and rewrites idx; rank is scratch.
func freqOrder(count []uint32, order *[]int32, rank *[]uint64, idx []uint64) []int32 {
	d := len(count)
	s := byCount(count, rank)
	o := slices.Grow((*order)[:0], d)[:d]
	for i, k := range s {
		o[i] = int32(k & entryMask)
	}
	r := (*rank)[:d] // s may be this half: o has been read out of it
	for newI, oldI := range o {
		r[oldI] = uint64(newI)
	}
	for i, x := range idx {
		idx[i] = r[x]
	}
	*order = o
	return o
}

// entryMask is the entry part of a byCount key.
const entryMask = 1<<idxBits - 1

// byCount returns the entries 0..len(count)-1 as keys (top-count)<<idxBits
// | entry in ascending order: by descending count, ties by entry (first
// appearance). A radix sort of the count bits alone (one or two passes;
// least-significant-digit radix sorts are stable) replaces a comparison
// sort of the entries, 5% of a write. buf is scratch for 2·len(count) keys
// (the result is one of its halves); a dictionary has at most MaxBlockRows
// entries, which fit under idxBits.
func byCount(count []uint32, buf *[]uint64) []uint64 {
	d := len(count)
	b := slices.Grow((*buf)[:0], 2*d)[:2*d]
	*buf = b
	var top uint32
	for _, c := range count {
		top = max(top, c)
	}
	k := b[:d]
	for i, c := range count {
		k[i] = uint64(top-c)<<idxBits | uint64(i)
	}
	return radixSort(k, b[d:], idxBits)
}

// intEncoder holds the scratch for encoding integer columns.
type intEncoder struct {
	u    []uint64
	esc  []uint64 // encDictE's escaped values
	rk   []uint64 // and its entries' order (sortEntries)
	back []uint64
	tab  u64Table
}

// minMax returns the least and greatest of v (not empty). Two pairs of
// running bounds, merged at the end, halve the chain of dependent
// compares that one pair waits on.
func minMax(v []uint64) (lo, hi uint64) {
	lo, hi = v[0], v[0]
	lo1, hi1 := lo, hi
	i := 1
	for ; i+2 <= len(v); i += 2 {
		a, b := v[i], v[i+1]
		lo, hi = min(lo, a), max(hi, a)
		lo1, hi1 = min(lo1, b), max(hi1, b)
	}
	for ; i < len(v); i++ {
		lo, hi = min(lo, v[i]), max(hi, v[i])
	}
	return min(lo, lo1), max(hi, hi1)
}

// scaleOf returns the largest of 1e9, 1e6, 1e3 dividing every v-base (else 1).
func scaleOf(v []uint64, base, span uint64) uint64 {
	scale := uint64(1)
	for _, d := range [...]uint64{1000, 1000000, 1000000000} {
		if span < d || !divisible(v, base, d) {
			break
		}
		scale = d
	}
	return scale
}

// divisible reports whether d divides every v-base; constant divisors let
// the compiler replace the division with a multiply.
func divisible(v []uint64, base, d uint64) bool {
	// In runs of 256 so that a column that is not divisible (most) stops
	// after the first run.
	for len(v) > 0 {
		k := min(len(v), 256)
		var bad uint64
		switch d {
		case 1000:
			for _, x := range v[:k] {
				bad |= (x - base) % 1000
			}
		case 1000000:
			for _, x := range v[:k] {
				bad |= (x - base) % 1000000
			}
		default:
			for _, x := range v[:k] {
				bad |= (x - base) % d
			}
		}
		if bad != 0 {
			return false
		}
		v = v[k:]
	}
	return true
}

// scaleDown sets u[i] = (v[i]-base)/scale, with constant-divisor loops.
func scaleDown(u, v []uint64, base, scale uint64) {
	u = u[:len(v)]
	switch scale {
	case 1:
		for i, x := range v {
			u[i] = x - base
		}
	case 1000:
		for i, x := range v {
			u[i] = (x - base) / 1000
		}
	case 1000000:
		for i, x := range v {
			u[i] = (x - base) / 1000000
		}
	default:
		for i, x := range v {
			u[i] = (x - base) / scale
		}
	}
}

// encodeInts appends v's stream to dst and returns the encoding. signed says
// the values are int64 bits (min/max and the frame base are then signed).
// tryDelta enables the delta candidate (times); tryDict the dictionary one.
func (e *intEncoder) encodeInts(dst []byte, v []uint64, signed, tryDelta, tryDict bool) (out []byte, enc uint8, lo, hi uint64) {
	n := len(v)
	if n == 0 {
		return binary.LittleEndian.AppendUint64(dst, 0), encConst, 0, 0
	}
	lo, hi = v[0], v[0]
	if signed {
		for _, x := range v[1:] {
			lo = uint64(min(int64(lo), int64(x)))
			hi = uint64(max(int64(hi), int64(x)))
		}
	} else {
		lo, hi = minMax(v)
	}
	if lo == hi {
		return binary.LittleEndian.AppendUint64(dst, lo), encConst, lo, hi
	}
	span := hi - lo // wraps correctly for signed ranges
	scale := scaleOf(v, lo, span)
	w := byteWidth(span / scale)
	best, bestCost := encFOR, w*n
	u := slices.Grow(e.u[:0], n)[:n]
	e.u = u
	dw := 0
	if tryDelta {
		scaleDown(u, v, lo, scale)
		prev := uint64(0)
		var all, plain uint64
		up := true // non-decreasing
		for i, q := range u {
			d := q - prev
			up = up && q >= prev
			prev = q
			z := zigzag(d)
			u[i] = z
			all |= z
			plain |= d
		}
		if up { // every difference ≥ 0: store them as they are
			for i, z := range u {
				u[i] = z >> 1
			}
			all = plain
		}
		if dw = byteWidth(all); dw*n < bestCost {
			best, bestCost = encDelta, dw*n
			if up {
				best = encDeltaU
			}
		}
	}
	// A dictionary pays only with few distinct values (see the cost test
	// below); stopping early keeps random columns cheap.
	limit := min(max(n/8, min(256, n/2)), 1<<16)
	if tryDict && w >= 2 && limit > 0 && e.tab.build(v, limit) {
		d := len(e.tab.dict)
		var dmax uint64
		for _, x := range e.tab.dict {
			dmax = max(dmax, x-lo)
		}
		// Few distinct values: the frequency-ordered indexes compress
		// better than the values even when not smaller before zstd.
		if c := d*byteWidth(dmax) + n*byteWidth(uint64(d-1)); c < bestCost || d <= n/8 {
			if e.tab.singles() >= dictEMin {
				return e.putDictE(dst, lo), encDictE, lo, hi
			}
			return e.putDict(dst, lo, dmax), encDict, lo, hi
		}
	}
	dst = append(dst, 0)
	head := len(dst) - 1
	dst = binary.LittleEndian.AppendUint64(dst, scale)
	dst = binary.LittleEndian.AppendUint64(dst, lo)
	dst[head] = byte(w)
	switch {
	case best == encDelta || best == encDeltaU:
		dst[head] = byte(dw)
		return putPlanes(dst, u, dw), uint8(best), lo, hi
	case scale == 1:
		return putPlanesSub(dst, v, lo, w), uint8(best), lo, hi
	}
	scaleDown(u, v, lo, scale)
	return putPlanes(dst, u, w), uint8(best), lo, hi
}

func (e *intEncoder) putDict(dst []byte, lo, dmax uint64) []byte {
	t := &e.tab
	d := len(t.dict)
	o := freqOrder(t.count, &t.order, &t.rank, t.idx)
	iw := byteWidth(uint64(d - 1))
	vw := byteWidth(dmax)
	dst = append(dst, byte(iw))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(d))
	dst = append(dst, byte(vw))
	dst = binary.LittleEndian.AppendUint64(dst, lo)
	s := slices.Grow(t.sorted[:0], d)[:d]
	for i, oi := range o {
		s[i] = t.dict[oi] - lo
	}
	t.sorted = s
	dst = putPlanes(dst, s, vw)
	return putPlanes(dst, t.idx, iw)
}

// intDecoder holds the scratch for decoding integer columns.
type intDecoder struct {
	u    []uint64
	dict []uint64
	esc  []uint64 // encDictE's escaped values
	at   []uint32 // encDictE's escaped rows (dictRows1)
}

type integer interface {
	~uint8 | ~uint16 | ~uint32 | ~uint64 | ~int64
}

// decodeInts decodes an integer stream of n rows into dst (resized to n).
func decodeInts[T integer](d *intDecoder, enc uint8, st []byte, n int, dst []T) ([]T, error) {
	dst = slices.Grow(dst[:0], n)[:n]
	switch enc {
	case encConst:
		if len(st) != 8 {
			return dst, errBadStream
		}
		c := T(binary.LittleEndian.Uint64(st))
		for i := range dst {
			dst[i] = c
		}
		return dst, nil
	case encFOR, encDelta, encDeltaU:
		if len(st) < 17 {
			return dst, errBadStream
		}
		w := int(st[0])
		scale := binary.LittleEndian.Uint64(st[1:9])
		base := binary.LittleEndian.Uint64(st[9:17])
		if w > 8 || len(st)-17 != w*n {
			return dst, errBadStream
		}
		if enc == encFOR && w <= 3 { // the common case in one pass, no scratch
			forPlanes(st[17:], dst, w, base, scale)
			return dst, nil
		}
		u := slices.Grow(d.u[:0], n)[:n]
		d.u = u
		getPlanes(st[17:], u, w)
		if enc == encFOR {
			for i, x := range u {
				dst[i] = T(base + x*scale)
			}
			return dst, nil
		}
		var acc uint64
		if enc == encDeltaU {
			for i, z := range u {
				acc += z
				dst[i] = T(base + acc*scale)
			}
			return dst, nil
		}
		for i, z := range u {
			acc += unzigzag(z)
			dst[i] = T(base + acc*scale)
		}
		return dst, nil
	case encDictE:
		return dst, decodeDictE(d, st, n, dst)
	case encDict:
		if len(st) < 14 {
			return dst, errBadStream
		}
		iw := int(st[0])
		size := int(binary.LittleEndian.Uint32(st[1:5]))
		vw := int(st[5])
		base := binary.LittleEndian.Uint64(st[6:14])
		// A dictionary holds the distinct values of n rows: more entries
		// than rows (or than one with no value bytes) is corrupt, so the
		// allocation is bounded by n, never by the size field.
		if iw > 4 || vw > 8 || size > n || (vw == 0 && size > 1) || (size == 0 && n > 0) || len(st)-14 != size*vw+n*iw {
			return dst, errBadStream
		}
		dv := slices.Grow(d.dict[:0], size)[:size]
		d.dict = dv
		getPlanes(st[14:], dv, vw)
		for i := range dv {
			dv[i] += base
		}
		ip := st[14+size*vw:]
		switch iw { // one- and two-byte indexes in one pass, no scratch
		case 1:
			for i, x := range ip[:len(dst)] {
				if int(x) >= len(dv) {
					return dst, errBadStream
				}
				dst[i] = T(dv[x])
			}
			return dst, nil
		case 2:
			p0, p1 := ip[:n], ip[n:2*n]
			p0, p1 = p0[:len(dst)], p1[:len(dst)]
			for i := range dst {
				x := int(p0[i]) | int(p1[i])<<8
				if x >= len(dv) {
					return dst, errBadStream
				}
				dst[i] = T(dv[x])
			}
			return dst, nil
		}
		u := slices.Grow(d.u[:0], n)[:n]
		d.u = u
		getPlanes(ip, u, iw)
		for i, x := range u {
			if x >= uint64(len(dv)) {
				return dst, errBadStream
			}
			dst[i] = T(dv[x])
		}
		return dst, nil
	}
	return dst, errBadStream
}
