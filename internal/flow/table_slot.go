package flow

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// keyWords is a Key as five 64-bit words (little-endian loads of its 40
// bytes), in canonical orientation: the lower endpoint first.
type keyWords [5]uint64

// Key must be exactly 40 bytes for keyWords: these fail to compile otherwise.
var (
	_ [unsafe.Sizeof(Key{}) - 40]byte
	_ [40 - unsafe.Sizeof(Key{})]byte
)

// eq compares two keys; xor-or of the words is one branch instead of five.
func (a *keyWords) eq(b *keyWords) bool {
	return (a[0]^b[0])|(a[1]^b[1])|(a[2]^b[2])|(a[3]^b[3])|(a[4]^b[4]) == 0
}

// key converts canonical words back to a Key (lower endpoint as Src).
func (a *keyWords) key() Key {
	var k Key
	b := (*[40]byte)(unsafe.Pointer(&k))
	binary.LittleEndian.PutUint64(b[0:], a[0])
	binary.LittleEndian.PutUint64(b[8:], a[1])
	binary.LittleEndian.PutUint64(b[16:], a[2])
	binary.LittleEndian.PutUint64(b[24:], a[3])
	binary.LittleEndian.PutUint64(b[32:], a[4])
	return k
}

// prep makes k canonical into r.w with its direction bit in r.dir, and
// hashes it into r.h: one call for what every update does first.
//
// The words are ordered so the lower endpoint comes first; r.dir is 0 if
// k's Src is the lower endpoint, 1 if not. The order is Key.srcLess's,
// computed branch-free from the loaded words: a subtract-with-borrow chain
// over (addr high, addr low, port) yields "Dst endpoint < Src endpoint" as
// the final borrow. The hash mixes the five words with the table's random
// seeds into a 32-bit value that is never 0 (0 marks an empty slot); the
// same value is the slot's tag and, through fastrange, its home index.
func (t *Table) prep(k *Key, r *pending) { prepSeeded(&t.seed, k, r) }

// prepSeeded is prep with the table's seeds s.
func prepSeeded(s *[6]uint64, k *Key, r *pending) {
	b := (*[40]byte)(unsafe.Pointer(k)) // Key has no padding: its bytes are its fields
	a0 := binary.LittleEndian.Uint64(b[0:])
	a1 := binary.LittleEndian.Uint64(b[8:])
	b0 := binary.LittleEndian.Uint64(b[16:])
	b1 := binary.LittleEndian.Uint64(b[24:])
	x := binary.LittleEndian.Uint64(b[32:])
	// Big-endian values of the address halves (byte swaps), as srcLess compares them.
	_, c := bits.Sub64(uint64(k.DstPort), uint64(k.SrcPort), 0)
	_, c = bits.Sub64(bits.ReverseBytes64(b1), bits.ReverseBytes64(a1), c)
	_, c = bits.Sub64(bits.ReverseBytes64(b0), bits.ReverseBytes64(a0), c)
	if c != 0 { // Dst < Src: swap the endpoints
		// Bytes 32..35 are SrcPort, DstPort: swap the two 16-bit halves.
		a0, a1, b0, b1, x = b0, b1, a0, a1, x&^0xffffffff|(x&0xffff)<<16|(x>>16)&0xffff
	}
	r.w[0], r.w[1], r.w[2], r.w[3], r.w[4] = a0, a1, b0, b1, x // not a composite literal: that goes through the stack
	r.dir = uint8(c)
	h := mum(mum(a0^s[0], a1^s[1])^x^s[4], mum(b0^s[2], b1^s[3])^s[5])
	r.h = uint32(h>>32) | 1
}

// mum is a 64×64→128-bit multiply folded by xor: one multiply spreads every
// input bit over the whole output (the wyhash mixing step).
func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// fastrange maps h uniformly onto [0, n) with a multiply and a shift instead
// of a modulo, so n need not be a power of two (memory stays linear).
func fastrange(h, n uint32) uint32 { return uint32(uint64(h) * uint64(n) >> 32) }

// slot is one flow. Layout: key, tag, packet counters, flags and state in
// the first 64 bytes (what a probe and a hit read first), the 64-bit byte
// counters and times after; 96 bytes in all.
type slot struct {
	key   keyWords  // canonical key
	tag   uint32    // hash(key), never 0 when live; 0 = empty slot (mirrored in Table.tags, which probes read)
	pkts  [2]uint32 // per canonical sender: [0] lower endpoint, [1] upper
	iface uint16    // Packet.Iface of the flow's first packet
	flags [2]uint8  // OR of TCP flags per canonical sender
	state uint8     // st* bits
	owner [2]uint16 // per canonical sender: Packet.Iface+1 that counts it (DedupIfaces), 0 = none yet
	vlan  uint16    // Packet.VLAN of the flow's first packet
	bytes [2]uint64 // per canonical sender
	start int64     // first packet time of the current record (min)
	end   int64     // last packet time of the current record (max); last seen
}

// slot.state bits.
const (
	stInitHi    = 1 << iota // the initiator is the upper endpoint (canonical Dst)
	stRoleFixed             // a Role hint has fixed the orientation
	stFinLo                 // FIN seen from the lower endpoint
	stFinHi                 // FIN seen from the upper endpoint
	stEnding                // FIN both ways or RST: emit after the linger
	stEmpty                 // no packet since the last active report: pkts[0]|pkts[1] == 0
)

// blockSlots is the number of slots per occupancy count in Table.blocks.
const blockSlots = 64

// emptyFor returns the first empty slot on h's probe sequence.
func (t *Table) emptyFor(h uint32) uint32 {
	i := fastrange(h, t.n)
	for t.tags[i] != 0 {
		if i++; i == t.n {
			i = 0
		}
	}
	return i
}

// lookup returns the slot of the flow with packet key k (either direction),
// or nil.
func (t *Table) lookup(k *Key) *slot {
	var r pending
	t.prep(k, &r)
	h := r.h
	for i := fastrange(h, t.n); ; {
		if tg := t.tags[i]; tg == h {
			if s := &t.slots[i]; s.key.eq(&r.w) {
				return s
			}
		} else if tg == 0 {
			return nil
		}
		if i++; i == t.n {
			i = 0
		}
	}
}

// remove empties slot i by backward-shift deletion: later members of the
// probe cluster move back into the hole when their home allows it, so no
// tombstones are ever needed and probe chains stay short.
func (t *Table) remove(i uint32) {
	n := t.n
	t.live--
	t.blocks[i/blockSlots]--
	j := i
	for {
		if j++; j == n {
			j = 0
		}
		tag := t.tags[j]
		if tag == 0 {
			break
		}
		home := fastrange(tag, n) // tag is the hash: no rehash needed to find home
		// s may fill hole i unless its home lies cyclically in (i, j].
		var stay bool
		if i <= j {
			stay = i < home && home <= j
		} else {
			stay = i < home || home <= j
		}
		if !stay {
			t.slots[i] = t.slots[j]
			t.tags[i] = tag
			t.blocks[i/blockSlots]++
			t.blocks[j/blockSlots]--
			i = j
		}
	}
	t.slots[i].tag = 0
	t.tags[i] = 0
}

// firstEmpty returns the index of an empty slot. A sweep that starts just
// after it never sees a probe cluster wrap past its start, so backward
// shifts during the sweep only move slots it has not visited yet.
func (t *Table) firstEmpty() uint32 {
	for i, tag := range t.tags {
		if tag == 0 {
			return uint32(i)
		}
	}
	return 0 // unreachable: len(slots) > MaxFlows ≥ live
}
