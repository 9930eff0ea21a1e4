package query

import (
	"encoding/binary"
	"slices"
	"unsafe"
)

// v4Table interns IPv4 addresses (version 4, stored IPv4-mapped): an
// open-addressing table of 4-byte keys and their ids, probed linearly. It
// replaces the map of 17-byte keys for the common family: hashing and
// comparing one word instead of 17 bytes halves the cost of interning.
type v4Table struct {
	e    []uint64 // address << 32 | id, one word so a probe touches one line; id 0: empty
	n    int
	bits uint8
}

// mapped4 is the IPv4-mapped prefix ::ffff:0:0/96 as its two words.
const (
	mapped4Lo = 0
	mapped4Hi = 0xffff
)

// v4Mapped reports whether a is an IPv4-mapped address.
func v4Mapped(a *[16]byte) bool {
	return binary.BigEndian.Uint64(a[:8]) == mapped4Lo && binary.BigEndian.Uint32(a[8:12]) == mapped4Hi
}

// id is the interned id of IPv4 address v (a is its stored form), adding
// it to g's addresses if new.
func (t *v4Table) id(g *agg, v uint32, a *[16]byte) uint32 {
	if t.e == nil {
		t.init(12)
	}
	mask := uint64(len(t.e) - 1)
	for i := t.slot(v); ; i = (i + 1) & mask {
		e := t.e[i]
		if uint32(e) == 0 {
			g.addrs = append(growDouble(g.addrs), addrKey{*a, 4})
			id := uint32(len(g.addrs))
			t.e[i] = uint64(v)<<32 | uint64(id)
			if t.n++; t.n*4 > 3*len(t.e) { // at most 3/4 full: 8 slots a line keep probes short, and a smaller table stays in cache
				t.grow()
			}
			return id
		}
		if uint32(e>>32) == v {
			return uint32(e)
		}
	}
}

// slot is where v's probe starts (the top bits of a multiplicative hash).
func (t *v4Table) slot(v uint32) uint64 {
	return uint64(v) * 0x9e3779b97f4a7c15 >> (64 - t.bits)
}

func (t *v4Table) init(bits uint8) {
	t.e, t.n, t.bits = writeFault(make([]uint64, 1<<bits)), 0, bits
}

// grow doubles the table.
func (t *v4Table) grow() {
	old := t.e
	t.init(t.bits + 1)
	mask := uint64(len(t.e) - 1)
	for _, e := range old {
		if uint32(e) == 0 {
			continue
		}
		i := t.slot(uint32(e >> 32))
		for uint32(t.e[i]) != 0 {
			i = (i + 1) & mask
		}
		t.e[i] = e
		t.n++
	}
}

// v6Table interns IPv6 addresses (version 6) as v4Table does IPv4 ones:
// open addressing on the two words of the address. The gendb week has
// 21,000 distinct IPv6 addresses, beyond the direct-mapped cache in front
// of the map, whose 17-byte keys then cost a hash and a miss each.
type v6Table struct {
	e    []v6Entry
	n    int
	bits uint8
}

// v6Entry is one address and its id (0: empty).
type v6Entry struct {
	hi, lo uint64
	id     uint32
}

// id is the interned id of IPv6 address a, adding it to g's addresses if
// new.
func (t *v6Table) id(g *agg, a *[16]byte) uint32 {
	if t.e == nil {
		t.init(10)
	}
	hi, lo := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])
	mask := uint64(len(t.e) - 1)
	for i := t.slot(hi, lo); ; i = (i + 1) & mask {
		e := &t.e[i]
		if e.id == 0 {
			g.addrs = append(growDouble(g.addrs), addrKey{*a, 6})
			id := uint32(len(g.addrs))
			*e = v6Entry{hi, lo, id}
			if t.n++; t.n*4 > 3*len(t.e) {
				t.grow()
			}
			return id
		}
		if e.hi == hi && e.lo == lo {
			return e.id
		}
	}
}

// slot is where the probe for (hi, lo) starts.
func (t *v6Table) slot(hi, lo uint64) uint64 {
	h := (hi*0x9e3779b97f4a7c15 ^ lo) * 0xc2b2ae3d27d4eb4f
	return h >> (64 - t.bits)
}

// slotOf is slot for a's stored form.
func (t *v6Table) slotOf(a *[16]byte) uint64 {
	return t.slot(binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:]))
}

func (t *v6Table) init(bits uint8) {
	t.e, t.n, t.bits = writeFault(make([]v6Entry, 1<<bits)), 0, bits
}

// growDouble returns s with room for one more element, doubling its
// capacity when full: append grows a large slice by a quarter, so the
// address list (tens of thousands) was copied to fresh memory, and
// faulted in, several times over.
func growDouble[T any](s []T) []T {
	if len(s) < cap(s) {
		return s
	}
	return slices.Grow(s, max(len(s), 64))
}

// pageBytes is the smallest page size of the platforms weir runs on.
const pageBytes = 4096

// writeFault stores a zero into every page of s (zero already: a fresh
// slice) and returns s. A large slice is fresh memory that the rehash
// and the probes would read first: a read maps the shared zero page and
// the write after it is a second fault whose TLB flush interrupts every
// CPU of the process (6% of `sip`'s samples on a KVM guest); a write
// first is one fault.
func writeFault[T any](s []T) []T {
	var zero T
	step := max(1, pageBytes/int(unsafe.Sizeof(zero)))
	for i := 0; i < len(s); i += step {
		s[i] = zero
	}
	return s
}

// grow doubles the table.
func (t *v6Table) grow() {
	old := t.e
	t.init(t.bits + 1)
	mask := uint64(len(t.e) - 1)
	for _, e := range old {
		if e.id == 0 {
			continue
		}
		i := t.slot(e.hi, e.lo)
		for t.e[i].id != 0 {
			i = (i + 1) & mask
		}
		t.e[i] = e
		t.n++
	}
}
