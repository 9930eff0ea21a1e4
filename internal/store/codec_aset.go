package store

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// Version 9 address sets. A block whose IPv4 addresses (of one column,
// source or destination) are dense keeps them as an exact sorted set in
// its header, in that column's filter slot, instead of a bloom filter:
// the set answers MayContainSrc/Dst exactly for IPv4 (no false
// positives), and the column's dictionary (encADictS) lists its IPv4
// entries by reference to it, paying only a count class each. The gendb
// week: source addresses and their filter 0.84 → ~0.48 B/row,
// destinations 0.45 → ~0.22.
//
// The filter's words (kind asetKind in the hash-count byte) are
//
//	word 0   u32 n4 (IPv4 entries), u32 lo (the smallest, as a big-endian uint32)
//	word 1   u8 L, u8 k6, u16 0, u32 m6
//	word 2   u32 hi (the largest), u32 0
//	L < 32: Elias-Fano: ceil(n4·L/64) words of the values' low L bits
//	        (value i's at bit i·L), then the high bitmap of n4 + ((hi-lo)>>L)
//	        + 1 bits (value i sets bit ((v-lo)>>L) + i)
//	L = 255: a bitmap of hi-lo+1 bits (bit v-lo set for each value)
//	then m6 words: a bloom filter (k6 hashes) of the other addresses
//	        (none: k6 = m6 = 0)
const (
	asetKind   = 255
	asetBitmap = 255 // L of the bitmap form
	asetHead   = 3   // words before the set's bits
	// asetMaxBits is the most bits an IPv4 entry may take in the set
	// for it to be used: past it (addresses spread over the Internet)
	// the header would grow for every reader, and the bloom filter and
	// adictd are kept.
	asetMaxBits = 12
)

// encADictS (version 9, SrcAddr and DstAddr) is an address dictionary
// whose IPv4 entries are the header's set: u32 size (all entries), u8
// index width, u32 n6 (entries not in the set), size count classes (u8,
// the set's entries in ascending order, then the others; see classAIdx1
// for what the writer puts there), the others' 16 byte planes (n6 each),
// then the index planes (rows). The dictionary's order, which the indexes
// count in, is by class descending; within a class the set's entries in
// ascending order, then the others in stored order.
const encADictS = 12

// asetSize returns the set's L and its words (without the bloom) for n4
// sorted values from lo to hi: Elias-Fano or a bitmap, the smaller.
func asetSize(n4 int, lo, hi uint32) (l uint8, words int) {
	span := uint64(hi-lo) + 1
	bestL, best := uint8(asetBitmap), (span+63)/64
	k := uint8(0)
	for k < 31 && span>>(k+1) >= uint64(n4) {
		k++
	}
	if w := efWords(n4, lo, hi, k); w < best {
		bestL, best = k, w
	}
	return bestL, int(best)
}

// efWords is the words of an Elias-Fano set of n4 values from lo to hi
// with l low bits: the low bits, then n4 + ((hi-lo)>>l) + 1 high bits.
func efWords(n4 int, lo, hi uint32, l uint8) uint64 {
	return (uint64(n4)*uint64(l)+63)/64 + (uint64(n4)+uint64(hi-lo)>>l+1+63)/64
}

// asetWords is the words an aset filter's header says it has, or -1 when
// its fields do not describe a set.
func asetWords(w []uint64) (n4 int, lo, hi uint32, l uint8, setW, m6 int, k6 uint8) {
	n4, lo = int(uint32(w[0])), uint32(w[0]>>32)
	l, k6, m6 = uint8(w[1]), uint8(w[1]>>8), int(uint32(w[1]>>32))
	hi = uint32(w[2])
	if hi < lo || n4 == 0 || (l >= 32 && l != asetBitmap) || k6 > 16 || (k6 == 0) != (m6 == 0) || m6 > maxBloomWord {
		return 0, 0, 0, 0, -1, 0, 0
	}
	if l == asetBitmap {
		return n4, lo, hi, l, int((uint64(hi-lo) + 64) / 64), m6, k6
	}
	return n4, lo, hi, l, int(efWords(n4, lo, hi, l)), m6, k6
}

// checkAset reports whether a parsed aset filter is consistent: its
// words add up and its bitmap holds n4 values.
func checkAset(w []uint64) bool {
	if len(w) < asetHead {
		return false
	}
	n4, _, _, l, setW, m6, _ := asetWords(w)
	if setW < 0 || len(w) != asetHead+setW+m6 {
		return false
	}
	low := 0
	if l != asetBitmap {
		low = (n4*int(l) + 63) / 64
	}
	ones := 0
	for _, x := range w[asetHead+low : asetHead+setW] {
		ones += bits.OnesCount64(x)
	}
	return ones == n4
}

// hasAddr reports whether address a may be in an address filter (a bloom
// filter, or an aset: exact for IPv4).
func (b *bloom) hasAddr(a *[16]byte) bool {
	if b.k != asetKind {
		return b.has(addrKey(a))
	}
	w := b.words
	n4, lo, hi, l, setW, m6, k6 := asetWords(w)
	if !v4Mapped(a) {
		o := bloom{k: k6, words: w[asetHead+setW : asetHead+setW+m6]}
		return o.has(addrKey(a))
	}
	x := binary.BigEndian.Uint32(a[12:16])
	if x < lo || x > hi {
		return false
	}
	d := uint64(x - lo)
	if l == asetBitmap {
		return w[asetHead+d/64]&(1<<(d%64)) != 0
	}
	low := (n4*int(l) + 63) / 64
	lw, hb := w[asetHead:asetHead+low], w[asetHead+low:asetHead+setW]
	h := d >> l
	// The values of bucket h are the ones between the h-th zero (0-based)
	// of the high bitmap and the next zero: find where the bucket starts.
	pos, zeros, found := uint64(0), uint64(0), h == 0
	for i := 0; i < len(hb) && !found; i++ {
		x := hb[i]
		z := uint64(64 - bits.OnesCount64(x))
		if zeros+z < h {
			zeros += z
			continue
		}
		for x := ^x; x != 0; x &= x - 1 { // the zeros of the word, in order
			if zeros++; zeros == h {
				pos, found = uint64(i)*64+uint64(bits.TrailingZeros64(x))+1, true
				break
			}
		}
	}
	if !found {
		return false
	}
	for ; pos < uint64(len(hb))*64 && hb[pos/64]&(1<<(pos%64)) != 0; pos++ {
		i := pos - h // the value's rank
		if lowBits(lw, i, l) == d&(1<<l-1) {
			return true
		}
	}
	return false
}

// lowBits is value i's low l bits in the packed array w.
func lowBits(w []uint64, i uint64, l uint8) uint64 {
	if l == 0 {
		return 0
	}
	at := i * uint64(l)
	v := w[at/64] >> (at % 64)
	if at%64+uint64(l) > 64 {
		v |= w[at/64+1] << (64 - at%64)
	}
	return v & (1<<l - 1)
}

// asetValues fills vals (at least n4 long) with the set's n4 IPv4
// values in ascending order; it reports false, having stopped, when a
// value lies past hi or there are not n4 of them. (Into a slice, not
// through a callback: an indirect call per value cost more than the
// decoding.)
func asetValues(w []uint64, vals []uint32) bool {
	n4, lo, hi, l, setW, _, _ := asetWords(w)
	if setW < 0 || len(w) < asetHead+setW || len(vals) < n4 {
		return false
	}
	vals = vals[:n4]
	r := 0
	if l == asetBitmap {
		for i, x := range w[asetHead : asetHead+setW] {
			for ; x != 0; x &= x - 1 {
				v := uint64(lo) + uint64(i)*64 + uint64(bits.TrailingZeros64(x))
				if v > uint64(hi) || r >= len(vals) {
					return false
				}
				vals[r] = uint32(v)
				r++
			}
		}
		return r == n4
	}
	low := (n4*int(l) + 63) / 64
	lw, hb := w[asetHead:asetHead+low], w[asetHead+low:asetHead+setW]
	for i, x := range hb {
		for ; x != 0; x &= x - 1 {
			if r >= len(vals) {
				return false
			}
			pos := uint64(i)*64 + uint64(bits.TrailingZeros64(x))
			v := uint64(lo) + ((pos-uint64(r))<<l | lowBits(lw, uint64(r), l))
			if v > uint64(hi) {
				return false
			}
			vals[r] = uint32(v)
			r++
		}
	}
	return r == n4
}

// putSet builds the IPv4 set of the table's dictionary into bl (and a
// bloom filter of its other entries) and returns the dictionary stream
// (encADictS) when the set is dense enough (asetMaxBits), else false.
func (t *addrTable) putSet(dst []byte, bl *bloom) ([]byte, bool) {
	d := len(t.dict)
	t.rank = slices.Grow(t.rank[:0], 2*d)[:2*d]
	keys := t.rank[:d] // IPv4 value<<32 | entry
	n4 := 0
	for i := range t.dict {
		if a := &t.dict[i]; v4Mapped(a) {
			keys[n4] = uint64(binary.BigEndian.Uint32(a[12:16]))<<32 | uint64(i)
			n4++
		}
	}
	if n4 == 0 {
		return dst, false
	}
	ks := radixSort(keys[:n4], t.rank[d:2*d], 32)
	lo, hi := uint32(ks[0]>>32), uint32(ks[n4-1]>>32)
	l, setW := asetSize(n4, lo, hi)
	if setW*64 > asetMaxBits*n4 {
		return dst, false
	}
	// The stored sequence: the set's entries ascending, then the others
	// in first-appearance order; seq[j] is the entry at position j.
	seq := slices.Grow(t.order[:0], d)[:d]
	for j, k := range ks {
		seq[j] = int32(uint32(k))
	}
	n6 := n4
	for i := range t.dict {
		if !v4Mapped(&t.dict[i]) {
			seq[n6] = int32(i)
			n6++
		}
	}
	n6 -= n4
	// The filter.
	m6, k6 := 0, uint8(0)
	if n6 > 0 {
		m6, k6 = max(1, (n6*bitsPerEntry+63)/64), bloomK
	}
	w := slices.Grow(bl.words[:0], asetHead+setW+m6)[:asetHead+setW+m6]
	clear(w)
	bl.k, bl.words = asetKind, w
	w[0] = uint64(n4) | uint64(lo)<<32
	w[1] = uint64(l) | uint64(k6)<<8 | uint64(m6)<<32
	w[2] = uint64(hi)
	if l == asetBitmap {
		for _, k := range ks {
			x := uint64(uint32(k>>32) - lo)
			w[asetHead+x/64] |= 1 << (x % 64)
		}
	} else {
		low := (n4*int(l) + 63) / 64
		lw, hb := w[asetHead:asetHead+low], w[asetHead+low:asetHead+setW]
		for i, k := range ks {
			x := uint64(uint32(k>>32) - lo)
			if l > 0 {
				at := uint64(i) * uint64(l)
				v := x & (1<<l - 1)
				lw[at/64] |= v << (at % 64)
				if at%64+uint64(l) > 64 {
					lw[at/64+1] |= v >> (64 - at%64)
				}
			}
			p := x>>l + uint64(i)
			hb[p/64] |= 1 << (p % 64)
		}
	}
	if n6 > 0 {
		o := bloom{k: k6, words: w[asetHead+setW:]}
		for _, i := range seq[n4:] {
			o.add(addrKey(&t.dict[i]))
		}
	}
	// The dictionary's order: by class descending, stably over seq.
	cls := t.classes(seq)
	next := classStarts(cls) // the decoder's count: both sides order alike
	rk := t.rank[:d]         // the keys are read out: reuse for the ranks
	for _, i := range seq {
		c := 255 - cls[i]
		rk[i] = uint64(next[c])
		next[c]++
	}
	for i, x := range t.idx {
		t.idx[i] = rk[x]
	}
	iw := byteWidth(uint64(max(d, 1) - 1))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(d))
	dst = append(dst, byte(iw))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(n6))
	for _, i := range seq {
		dst = append(dst, cls[i])
	}
	off := len(dst)
	dst = slices.Grow(dst, 16*n6)[:off+16*n6]
	for j, i := range seq[n4:] {
		for b := range 16 {
			dst[off+b*n6+j] = t.dict[i][b]
		}
	}
	t.order = seq
	return putPlanes(dst, t.idx, iw), true
}

// classStarts returns, for each count class c of cls (a dictionary's
// entries' classes), where its first entry goes in the dictionary's
// order (by class descending): at index 255-c. Four interleaved counts
// keep a run of one class (most entries share one) from waiting on
// the previous increment of its counter.
func classStarts(cls []byte) (next [256]int) {
	var t [4][256]int32
	i := 0
	for ; i+4 <= len(cls); i += 4 {
		t[0][255-cls[i]]++
		t[1][255-cls[i+1]]++
		t[2][255-cls[i+2]]++
		t[3][255-cls[i+3]]++
	}
	for ; i < len(cls); i++ {
		t[0][255-cls[i]]++
	}
	sum := 0
	for c := range next {
		next[c] = sum
		sum += int(t[0][c] + t[1][c] + t[2][c] + t[3][c])
	}
	return next
}

// Count classes the writer gives address-set entries (encADictS): the
// entries among the 256 most used (rows capped at 255, ties in stored
// order) classAIdx1, the next 65,280 classAIdx2, the rest 0, so the
// dictionary puts the first group where the index's high bytes are 0 and
// the rest in stored order. The index planes are coded byte by byte, so
// that split is what the order buys them. The entries' rows (up to 255,
// what formats 9 to 11 wrote) took ~0.17 B/row of classes on the gendb
// week, these ~0.05, for nearly the same index bytes (docs/benchmarks.md,
// "Store format 12"). Readers take any class bytes: the order is by
// class, whatever the classes say.
const (
	classAIdx1 = 2
	classAIdx2 = 1
)

// classes sets t.cls[i] to dictionary entry i's class (see classAIdx1)
// and returns it; seq is the entries in stored order.
func (t *addrTable) classes(seq []int32) []uint8 {
	d := len(seq)
	cls := slices.Grow(t.cls[:0], d)[:d]
	t.cls = cls
	// The rows (capped) that make the 256th and 65,536th most used entry:
	// entries above it are in, entries at it are in while places are left.
	var hist [256]int
	for _, c := range t.count {
		hist[min(c, 255)]++
	}
	cut := func(k int) (at uint32, left int) {
		for c := 255; c >= 0; c-- {
			if hist[c] >= k {
				return uint32(c), k
			}
			k -= hist[c]
		}
		return 0, d // fewer than k entries: all of them are in
	}
	at1, left1 := cut(256)
	at2, left2 := cut(65536)
	for _, i := range seq {
		c := min(t.count[i], 255)
		switch {
		case c > at1 || (c == at1 && left1 > 0):
			if c == at1 {
				left1--
			}
			cls[i] = classAIdx1
		case c > at2 || (c == at2 && left2 > 0):
			cls[i] = classAIdx2
		default:
			cls[i] = 0
		}
		if c == at2 && cls[i] != 0 {
			left2-- // the first group's entries count in the first 65,536 too
		}
	}
	return cls
}

// decodeAddrsSet decodes an encADictS stream of n rows against its
// column's filter set (an aset), as decodeAddrs does for adict.
func decodeAddrsSet(buf, dict *[][16]byte, ix []uint32, set *bloom, st []byte, n int) error {
	if set == nil || set.k != asetKind || len(st) < 9 {
		return errBadStream
	}
	size := int(binary.LittleEndian.Uint32(st[0:4]))
	iw := int(st[4])
	n6 := int(binary.LittleEndian.Uint32(st[5:9]))
	n4, _, _, _, _, _, _ := asetWords(set.words)
	// A dictionary holds at most n entries: what is allocated is bounded
	// by the rows, never by a size field.
	if iw > 4 || size > n || n6 > size || size-n6 != n4 || (size == 0 && n > 0) ||
		int64(len(st)-9) != int64(size)+16*int64(n6)+int64(n)*int64(iw) {
		return errBadStream
	}
	cls := st[9 : 9+size]
	next := classStarts(cls)
	dv := slices.Grow((*buf)[:0], size)[:size]
	*buf, *dict = dv, dv
	// The set's values go through ix (n4 <= size <= n: it holds them)
	// before the row indexes overwrite it.
	vals := ix[:n4]
	if !asetValues(set.words, vals) {
		return errBadStream
	}
	// ::ffff:a.b.c.d as two words: a [16]byte literal was built byte by
	// byte on the stack and then copied, and the copy's load waited on
	// the bytes' stores (a third of the function's time).
	for j, x := range vals {
		c := 255 - cls[j]
		a := &dv[next[c]]
		binary.LittleEndian.PutUint64(a[:8], 0)
		binary.LittleEndian.PutUint64(a[8:], 0xffff<<16|uint64(bits.ReverseBytes32(x))<<32)
		next[c]++
	}
	// The others from their 16 byte planes, gathered into two words
	// (stores of single bytes then made the next entry's wait).
	p6 := st[9+size : 9+size+16*n6]
	for j := range n6 {
		c := 255 - cls[n4+j]
		var w0, w1 uint64
		for b := range 8 {
			w0 |= uint64(p6[b*n6+j]) << (8 * b)
			w1 |= uint64(p6[(b+8)*n6+j]) << (8 * b)
		}
		a := &dv[next[c]]
		binary.LittleEndian.PutUint64(a[:8], w0)
		binary.LittleEndian.PutUint64(a[8:], w1)
		next[c]++
	}
	getPlanes(st[9+size+16*n6:], ix, iw)
	if n > 0 && int(maxOf(ix)) >= size {
		return errBadStream
	}
	return nil
}
