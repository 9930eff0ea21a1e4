package store

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// encADictG (version 11, SrcAddr and DstAddr) is encADictS with another
// coding of the rows' indexes: the dictionary's entries of one count
// class are equally likely (a class is an exact count up to 254), so a
// row is coded as its class (one byte plane, entropy-coded) and its
// place among the class's m entries (truncated binary: ⌊log2 m⌋ or one
// more bits, MSB first, in a bit stream after the plane). That is the
// order-0 entropy of the indexes given the classes, where adicts' byte
// planes of the rank lost what the low byte says about the high one (the
// gendb week: ~0.2 B/row over both address columns).
//
//	u32 size, u8 0, u32 n6, size classes, the others' 16 byte planes (n6
//	each), as adicts; then the rows' class planes (n bytes: 255 − class),
//	then the bit stream (each row's place in its class, in row order,
//	padded with zero bits to a whole byte).
const encADictG = 14

// groupCodes are a class's place in the dictionary order (start), its
// entries (m), and its truncated binary code: k = ⌊log2 m⌋ bits, places
// from u = 2^(k+1) − m on take k+1.
type groupCodes struct {
	c [256]groupCode
}

// groupCode is one class slot's code (one 16-byte load a row).
type groupCode struct {
	start, m, u uint32
	k           uint8
}

// setGroups computes the codes of the classes (255 − class, as the class
// plane holds them) from the entries' classes cls.
func (g *groupCodes) setGroups(cls []byte) {
	g.c = [256]groupCode{}
	for _, c := range cls {
		g.c[255-c].m++
	}
	sum := uint32(0)
	for s := range g.c {
		c := &g.c[s]
		c.start = sum
		sum += c.m
		if c.m > 0 {
			c.k = uint8(bits.Len32(c.m) - 1)
			c.u = 2<<c.k - c.m
		}
	}
}

// putGroups appends the class plane and the bit stream for the rows'
// ranks (t.idx, dictionary order) of a dictionary with classes cls.
func (t *addrTable) putGroups(dst []byte, cls []byte) []byte {
	var g groupCodes
	g.setGroups(cls)
	n := len(t.idx)
	off := len(dst)
	maxK := 0
	for _, c := range g.c {
		if c.m > 0 {
			maxK = max(maxK, int(c.k)+1)
		}
	}
	// Room for the plane and every code: the appends below never move dst
	// (plane is written through as they go).
	dst = slices.Grow(dst, n+(n*maxK+7)/8+4)[:off+n]
	plane := dst[off : off+n]
	// Each rank's class slot, by a table of the d ranks (not a search a row).
	sl := slices.Grow(t.slots[:0], len(cls))[:len(cls)]
	t.slots = sl
	for s, c := range g.c {
		fill := sl[c.start : c.start+c.m]
		for i := range fill {
			fill[i] = byte(s)
		}
	}
	var acc uint64 // bits not yet written, the last nb of acc
	var nb uint
	for i, r := range t.idx {
		s := sl[r]
		plane[i] = s
		c := &g.c[s]
		j := uint32(r) - c.start
		k := uint(c.k)
		if j >= c.u {
			j += c.u
			k++
		}
		// nb < 32 before, a code ≤ 21 bits: acc never overflows.
		acc = acc<<k | uint64(j)
		nb += k
		if nb >= 32 {
			nb -= 32
			dst = binary.BigEndian.AppendUint32(dst, uint32(acc>>nb))
		}
	}
	for nb >= 8 {
		nb -= 8
		dst = append(dst, byte(acc>>nb))
	}
	if nb > 0 {
		dst = append(dst, byte(acc<<(8-nb)))
	}
	return dst
}

// getGroups decodes n rows' indexes (ix) from a class plane and bit
// stream src against classes cls: a class without entries, a bit stream
// too short or with bytes left over is a malformed stream.
func getGroups(src []byte, cls []byte, ix []uint32) error {
	n := len(ix)
	if len(src) < n {
		return errBadStream
	}
	var g groupCodes
	g.setGroups(cls)
	plane, bs := src[:n], src[n:]
	var acc uint64 // next bits, MSB-aligned: the first nb are the stream's
	var nb uint
	pos := 0
	for i, s := range plane {
		c := &g.c[s] // a slot without entries: m = u = 0, so j >= m below
		if nb < 32 { // a code is at most 21 bits
			if pos+8 <= len(bs) {
				// One load: the whole bytes that fit go in (the bits after
				// them too, which the next load ORs in again unchanged).
				acc |= binary.BigEndian.Uint64(bs[pos:]) >> nb
				adv := (63 - nb) >> 3
				pos += int(adv)
				nb += adv << 3
			} else {
				for nb <= 56 && pos < len(bs) {
					acc |= uint64(bs[pos]) << (56 - nb)
					pos++
					nb += 8
				}
			}
		}
		// k bits, or k+1 when they read u or more (truncated binary);
		// past the stream's end acc holds zeros, and nb says so.
		k := uint(c.k)
		x2 := uint32(acc >> (63 - k)) // k+1 bits
		j, w := x2>>1, k
		if j >= c.u {
			j, w = x2-c.u, k+1
		}
		if w > nb || j >= c.m {
			return errBadStream
		}
		acc, nb = acc<<w, nb-w
		ix[i] = c.start + j
	}
	// Every byte used, the padding zero.
	if pos != len(bs) || nb >= 8 || (nb > 0 && acc>>(64-nb) != 0) {
		return errBadStream
	}
	return nil
}
