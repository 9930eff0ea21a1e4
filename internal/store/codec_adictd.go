package store

import (
	"encoding/binary"
	"slices"
)

// encADictD (version 7) is adict whose IPv4 entries' four byte planes
// hold the zigzag deltas of consecutive IPv4 entries' values (big-endian
// uint32, modulo 2^32), not the addresses: entries of equal count are
// stored in ascending address order, so in the long tail of a block's
// addresses (most seen once or twice) a delta is a few bits where an
// address was 14 or more. The indexes are those of adict: the ordering
// within a count changes no index's frequency.
const encADictD = 9

// minDeltaDict is the fewest IPv4 entries for which the delta form is
// considered: below it the planes are too short for the coders to care.
const minDeltaDict = 64

// addrOrder is freqOrder for an address dictionary: entries by
// descending count and, within a count, IPv4 entries in ascending address
// order (then the others, by first appearance). It rewrites t.idx to the
// new ranks and returns the order (new rank → entry).
func (t *addrTable) addrOrder() []int32 {
	d := len(t.count)
	r := byCount(t.count, &t.rank)
	tmp := t.rank[:d] // the half of the scratch r is not
	if d > 0 && &r[0] == &tmp[0] {
		tmp = t.rank[d : 2*d]
	}
	// Within each run of one count, re-sort by (family, address) packed
	// in one uint64: IPv4 value above the entry number (under 2^21).
	for a := 0; a < d; {
		c := r[a] >> idxBits
		b := a + 1
		for b < d && r[b]>>idxBits == c {
			b++
		}
		if b-a > 1 {
			for k := a; k < b; k++ {
				i := uint32(r[k] & entryMask)
				if e := &t.dict[i]; v4Mapped(e) {
					r[k] = uint64(binary.BigEndian.Uint32(e[12:16]))<<32 | uint64(i)
				} else {
					r[k] = 1<<63 | uint64(i)
				}
			}
			if run := r[a:b]; len(run) < 256 {
				slices.Sort(run)
			} else if s := radixSort(run, tmp[a:b], 32); &s[0] != &run[0] {
				// The run is in entry order, so sorting the bits above
				// the entry number stably is the whole sort.
				copy(run, s)
			}
		}
		a = b
	}
	o := slices.Grow(t.order[:0], d)[:d]
	for k, x := range r {
		o[k] = int32(uint32(x) & entryMask)
	}
	rk := t.rank[:d] // r may be this half: o has been read out of it
	for newI, oldI := range o {
		rk[oldI] = uint64(newI)
	}
	for i, x := range t.idx {
		t.idx[i] = rk[x]
	}
	t.order = o
	return o
}

// deltaV4 rewrites, in place, the n4 IPv4 entries' four byte planes
// (planes[j*n4+i] is byte j of entry i) as the zigzag deltas of their
// big-endian values, when that lowers the planes' order-0 entropy; it
// reports whether it did.
func deltaV4(planes []byte, n4 int, h *[256]uint32, buf *[]byte) bool {
	if n4 < minDeltaDict {
		return false
	}
	p := planes[:4*n4]
	// The deltas go to a second (reused) buffer first to compare
	// entropies; the planes are a few KB.
	var before, after float64
	for j := range 4 {
		before += planeBits(h, p[j*n4:(j+1)*n4])
	}
	z := slices.Grow((*buf)[:0], 4*n4)[:4*n4]
	*buf = z
	var prev uint32
	for i := range n4 {
		v := uint32(p[i])<<24 | uint32(p[n4+i])<<16 | uint32(p[2*n4+i])<<8 | uint32(p[3*n4+i])
		d := v - prev
		prev = v
		zz := d<<1 ^ uint32(int32(d)>>31)
		z[i], z[n4+i], z[2*n4+i], z[3*n4+i] = byte(zz>>24), byte(zz>>16), byte(zz>>8), byte(zz)
	}
	for j := range 4 {
		after += planeBits(h, z[j*n4:(j+1)*n4])
	}
	if after >= before {
		return false
	}
	copy(p, z)
	return true
}

// planeBits is the order-0 entropy of b in bits (Σ c·log2(n/c)).
func planeBits(h *[256]uint32, b []byte) float64 {
	histogram(h, b)
	ln := log2Fast(uint32(len(b)))
	bits := 0.0
	for _, c := range h {
		if c != 0 {
			bits += float64(c) * (ln - log2Fast(c))
		}
	}
	return bits
}

// undeltaV4 turns a decoded encADictD dictionary's IPv4 entries back
// from deltas into addresses.
func undeltaV4(dict [][16]byte) {
	var prev uint32
	for i := range dict {
		a := &dict[i]
		if !v4Mapped(a) {
			continue
		}
		z := binary.BigEndian.Uint32(a[12:16])
		prev += z>>1 ^ -(z & 1)
		binary.BigEndian.PutUint32(a[12:16], prev)
	}
}
