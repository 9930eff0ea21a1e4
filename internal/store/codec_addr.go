package store

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// v4Mapped reports whether a is an IPv4-mapped address (::ffff:a.b.c.d),
// which the dictionary serialises as its last 4 bytes.
func v4Mapped(a *[16]byte) bool {
	return binary.LittleEndian.Uint64(a[0:8]) == 0 && binary.LittleEndian.Uint32(a[8:12]) == 0xffff0000
}

// addrTable builds a dictionary of distinct 16-byte addresses.
type addrTable struct {
	tab   []addrSlot
	epoch uint32
	dict  [][16]byte
	count []uint32
	idx   []uint64
	order []int32
	rank  []uint64
	cls   []uint8 // address-set entries' count classes (classes)
	hist  [256]uint32
	delta []byte   // deltaV4's scratch
	last  int      // slots the last build ended with: the next starts there
	tab4  []v4Slot // IPv4-mapped addresses' table
	last4 int      // tab4's slots the last build ended with
}

// v4Slot is an IPv4-mapped address's slot: its last 4 bytes and its
// dictionary index + 1 (0: empty).
type v4Slot struct {
	key  uint32
	slot int32
}

// addrSlot is one hash table slot: key, dictionary index and epoch stamp
// in 24 bytes, so a probe touches one cache line, not four arrays'.
type addrSlot struct {
	hi, lo uint64
	slot   int32
	stamp  uint32
}

func addrHash(a *[16]byte) uint64 {
	return mix64(binary.LittleEndian.Uint64(a[0:8])*0x9e3779b97f4a7c15 ^ binary.LittleEndian.Uint64(a[8:16]))
}

// addrTableMin is the fewest slots build starts with: the table doubles as
// distinct addresses arrive (load at most 1/2), so it stays near the
// block's distinct count (a few thousand slots, in L2) instead of two
// slots a row, whose probes missed the cache (8% of a write).
const addrTableMin = 1024

// build collects the distinct addresses of v in first-appearance order
// with their counts and each row's index. IPv4-mapped addresses (nearly
// all) are found through a table of 8-byte slots keyed by their last 4
// bytes, a third of a full slot's size, so more of it stays in cache
// (the full table's probes were its cost); the others through the full
// table. Both add to one dictionary.
func (t *addrTable) build(v [][16]byte) {
	full := 16
	for full < 2*len(v) {
		full <<= 1
	}
	size := min(max(addrTableMin, t.last), full) // consecutive blocks are alike: few doublings
	size4 := min(max(addrTableMin, t.last4), full)
	t.dict = t.dict[:0]
	t.count = t.count[:0]
	t.rehash(size)
	t.rehash4(size4)
	tab := t.tab[:size] // a table kept from a larger block: use its first size slots
	mask := uint64(size - 1)
	tab4, mask4, sh4 := t.tab4[:size4], uint64(size4-1), uint(64-bits.TrailingZeros(uint(size4)))
	n4 := 0 // entries in tab4; the rest are tab's
	t.idx = slices.Grow(t.idx[:0], len(v))[:len(v)]
	for i := range v {
		a := &v[i]
		h0 := binary.LittleEndian.Uint64(a[0:8])
		h1 := binary.LittleEndian.Uint64(a[8:16])
		var s int32
		if h0 == 0 && uint32(h1) == 0xffff0000 { // v4Mapped
			k := uint32(h1 >> 32)
			hh := uint64(k) * 0x9e3779b97f4a7c15 // multiplicative hash: its top bits index
			h := hh >> sh4
			for {
				e := &tab4[h]
				if e.slot == 0 {
					if 2*n4 >= size4 && size4 < full {
						size4 *= 2
						t.rehash4(size4)
						tab4, mask4, sh4 = t.tab4[:size4], uint64(size4-1), sh4-1
						h = hh >> sh4
						continue
					}
					n4++
					s = int32(len(t.dict))
					*e = v4Slot{key: k, slot: s + 1}
					t.dict = append(t.dict, *a)
					t.count = append(t.count, 0)
					break
				}
				if e.key == k {
					s = e.slot - 1
					break
				}
				h = (h + 1) & mask4
			}
		} else {
			hh := mix64(h0*0x9e3779b97f4a7c15 ^ h1)
			h := hh & mask
			var e *addrSlot
			for {
				e = &tab[h]
				if e.stamp != t.epoch {
					if 2*(len(t.dict)-n4) >= size && size < full {
						size *= 2
						t.rehash(size)
						tab, mask = t.tab[:size], uint64(size-1)
						h = hh & mask
						continue
					}
					*e = addrSlot{hi: h0, lo: h1, slot: int32(len(t.dict)), stamp: t.epoch}
					t.dict = append(t.dict, *a)
					t.count = append(t.count, 0)
					break
				}
				if e.hi == h0 && e.lo == h1 {
					break
				}
				h = (h + 1) & mask
			}
			s = e.slot
		}
		t.count[s]++
		t.idx[i] = uint64(s)
	}
	t.last, t.last4 = size, size4
}

// rehash empties the table's first size slots (a new epoch stamp, no
// clearing) and inserts the dictionary's entries so far that are not
// IPv4-mapped (those are tab4's).
func (t *addrTable) rehash(size int) {
	if len(t.tab) < size {
		t.tab = make([]addrSlot, size)
		t.epoch = 0
	}
	t.epoch++
	if t.epoch == 0 { // wrapped: stamps are stale but could collide
		clear(t.tab)
		t.epoch = 1
	}
	tab, mask := t.tab[:size], uint64(size-1)
	for j := range t.dict {
		a := &t.dict[j]
		if v4Mapped(a) {
			continue
		}
		h0 := binary.LittleEndian.Uint64(a[0:8])
		h1 := binary.LittleEndian.Uint64(a[8:16])
		h := mix64(h0*0x9e3779b97f4a7c15^h1) & mask
		for tab[h].stamp == t.epoch {
			h = (h + 1) & mask
		}
		tab[h] = addrSlot{hi: h0, lo: h1, slot: int32(j), stamp: t.epoch}
	}
}

// rehash4 empties tab4's first size slots (a power of two) and inserts
// the dictionary's IPv4-mapped entries so far.
func (t *addrTable) rehash4(size int) {
	if len(t.tab4) < size {
		t.tab4 = make([]v4Slot, size)
	}
	tab := t.tab4[:size]
	clear(tab)
	mask, sh := uint64(size-1), uint(64-bits.TrailingZeros(uint(size)))
	for j := range t.dict {
		a := &t.dict[j]
		if !v4Mapped(a) {
			continue
		}
		k := binary.LittleEndian.Uint32(a[12:16])
		h := uint64(k) * 0x9e3779b97f4a7c15 >> sh
		for tab[h].slot != 0 {
			h = (h + 1) & mask
		}
		tab[h] = v4Slot{key: k, slot: int32(j) + 1}
	}
}

// putAddrs appends a v4 bitmap, then the IPv4-mapped entries' last 4 bytes
// as 4 byte planes, then the other entries as 16 byte planes, for the
// addresses picked by order (or all of list when order is nil). Planes keep
// shared prefixes together, which zstd then shrinks.
func putAddrs(dst []byte, list [][16]byte, order []int32) []byte {
	n := len(list)
	at := func(i int) *[16]byte {
		if order != nil {
			return &list[order[i]]
		}
		return &list[i]
	}
	off := len(dst)
	dst = slices.Grow(dst, (n+7)/8)[:off+(n+7)/8]
	clear(dst[off:])
	n4 := 0
	for i := 0; i < n; i++ {
		if v4Mapped(at(i)) {
			dst[off+i/8] |= 1 << (i % 8)
			n4++
		}
	}
	n6 := n - n4
	p4 := len(dst)
	p6 := p4 + 4*n4
	dst = slices.Grow(dst, 4*n4+16*n6)[:p6+16*n6]
	i4, i6 := 0, 0
	for i := 0; i < n; i++ {
		a := at(i)
		if dst[off+i/8]&(1<<(i%8)) != 0 {
			for j := 0; j < 4; j++ {
				dst[p4+j*n4+i4] = a[12+j]
			}
			i4++
		} else {
			for j := 0; j < 16; j++ {
				dst[p6+j*n6+i6] = a[j]
			}
			i6++
		}
	}
	return dst
}

// getAddrs parses len(list) entries written by putAddrs into list,
// returning the bytes consumed.
func getAddrs(st []byte, list [][16]byte) (int, bool) {
	n := len(list)
	bm := (n + 7) / 8
	if len(st) < bm {
		return 0, false
	}
	n4 := 0
	for _, b := range st[:bm] {
		n4 += bits.OnesCount8(b)
	}
	if n%8 != 0 && st[bm-1]>>(n%8) != 0 {
		return 0, false
	}
	n6 := n - n4
	used := bm + 4*n4 + 16*n6
	if len(st) < used {
		return 0, false
	}
	p4, p6 := bm, bm+4*n4
	i4, i6 := 0, 0
	for i := range list {
		a := &list[i]
		if st[i/8]&(1<<(i%8)) != 0 {
			*a = [16]byte{10: 0xff, 11: 0xff}
			for j := 0; j < 4; j++ {
				a[12+j] = st[p4+j*n4+i4]
			}
			i4++
		} else {
			for j := 0; j < 16; j++ {
				a[j] = st[p6+j*n6+i6]
			}
			i6++
		}
	}
	return used, true
}

// encodeAddrs appends an address column's stream: a frequency-ordered
// dictionary when that is smaller, else the entries themselves. With a
// filter (bl, the key's address columns) it fills it with the block's
// distinct addresses: an exact set that the dictionary then refers to
// (encADictS, codec_aset.go) when the IPv4 ones are dense, else a bloom
// filter.
func (t *addrTable) encodeAddrs(dst []byte, v [][16]byte, bl *bloom) (out []byte, enc uint8) {
	if bl != nil {
		defer func() {
			if enc != encADictS {
				bl.init(len(t.dict))
				for i := range t.dict {
					bl.add(addrKey(&t.dict[i]))
				}
			}
		}()
	}
	n := len(v)
	t.build(v)
	d := len(t.dict)
	var rawSize, dictSize int
	for i := range t.dict {
		e := 16
		if v4Mapped(&t.dict[i]) {
			e = 4
		}
		rawSize += e * int(t.count[i])
		dictSize += e
	}
	iw := byteWidth(uint64(max(d, 1) - 1))
	dictSize += n*iw + (d+7)/8 + 5
	if rawSize+(n+7)/8 <= dictSize {
		return putAddrs(dst, v, nil), encARaw
	}
	if bl != nil {
		if st, ok := t.putSet(dst, bl); ok {
			return st, encADictS
		}
	}
	o := t.addrOrder()
	head := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(d))
	dst = append(dst, byte(iw))
	dst = putAddrs(dst, t.dict, o)
	enc = encADict
	bm := head + 5
	n4 := 0
	for _, b := range dst[bm : bm+(d+7)/8] {
		n4 += bits.OnesCount8(b)
	}
	if deltaV4(dst[bm+(d+7)/8:], n4, &t.hist, &t.delta) {
		enc = encADictD
	}
	return putPlanes(dst, t.idx, iw), enc
}

// decodeAddrs decodes an address stream of n rows and sets dict and idx
// such that dict[idx[i]] is row i's address: dict is the stored dictionary
// (decoded into buf) for a dict-encoded stream, the rows themselves (and
// idx 0..n-1) for a raw one. With rows it also returns the per-row
// addresses in dst (resized to n); without, dst comes back empty.
func decodeAddrs(buf, dict *[][16]byte, idx *[]uint32, enc uint8, st []byte, n int, dst [][16]byte, rows bool, set *bloom) ([][16]byte, error) {
	dst = dst[:0]
	ix := slices.Grow((*idx)[:0], n)[:n]
	*idx = ix
	switch enc {
	case encADictS: // version 9: the IPv4 entries are the header's set (set: the column's filter)
		if err := decodeAddrsSet(buf, dict, ix, set, st, n); err != nil {
			return dst, err
		}
		if rows {
			dv := *dict
			dst = slices.Grow(dst, n)[:n]
			for i, x := range ix {
				dst[i] = dv[x]
			}
		}
		return dst, nil
	case encARaw:
		list := &dst
		if !rows {
			list = buf
		}
		l := slices.Grow((*list)[:0], n)[:n]
		*list = l
		used, ok := getAddrs(st, l)
		if !ok || used != len(st) {
			return dst, errBadStream
		}
		for i := range ix {
			ix[i] = uint32(i)
		}
		*dict = l
		return dst, nil
	case encADict, encADictD:
		if len(st) < 5 {
			return dst, errBadStream
		}
		size := int(binary.LittleEndian.Uint32(st[0:4]))
		iw := int(st[4])
		if iw > 4 || size > len(st) || (size == 0 && n > 0) {
			return dst, errBadStream
		}
		dv := slices.Grow((*buf)[:0], size)[:size]
		*buf, *dict = dv, dv
		used, ok := getAddrs(st[5:], dv)
		if !ok || len(st)-5-used != n*iw {
			return dst, errBadStream
		}
		if enc == encADictD {
			undeltaV4(dv)
		}
		// The index planes go straight into idx: no per-row 16-byte copies
		// unless the caller asked for the rows.
		getPlanes(st[5+used:], ix, iw)
		if n > 0 && int(maxOf(ix)) >= size {
			return dst, errBadStream
		}
		if rows {
			dst = slices.Grow(dst, n)[:n]
			for i, x := range ix {
				dst[i] = dv[x]
			}
		}
		return dst, nil
	}
	return dst, errBadStream
}
