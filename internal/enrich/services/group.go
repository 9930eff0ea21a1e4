package services

import (
	"math/bits"
)

// Kind says whether a row or datapath group belongs to switches or routers.
type Kind uint8

// Datapath kinds.
const (
	Switch Kind = iota
	Router
)

// String returns "switch" or "router".
func (k Kind) String() string {
	if k == Router {
		return "router"
	}
	return "switch"
}

// bitset is a set of datapath indexes of one kind.
type bitset []uint64

func (b *bitset) set(i int) {
	for len(*b) <= i/64 {
		*b = append(*b, 0)
	}
	(*b)[i/64] |= 1 << (i % 64)
}

func (b bitset) clear(i int) {
	if i/64 < len(b) {
		b[i/64] &^= 1 << (i % 64)
	}
}

// or sets b to b ∪ o.
func (b *bitset) or(o bitset) {
	for len(*b) < len(o) {
		*b = append(*b, 0)
	}
	for i, w := range o {
		(*b)[i] |= w
	}
}

// and returns b ∩ o as a new set.
func (b bitset) and(o bitset) bitset {
	n := min(len(b), len(o))
	r := make(bitset, n)
	for i := range n {
		r[i] = b[i] & o[i]
	}
	return r
}

func (b bitset) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// equal compares as sets: trailing zero words do not matter.
func (b bitset) equal(o bitset) bool {
	if len(b) < len(o) {
		b, o = o, b
	}
	for i, w := range b {
		var v uint64
		if i < len(o) {
			v = o[i]
		}
		if w != v {
			return false
		}
	}
	return true
}

// hash is FNV-1a over the words, trailing zero words skipped so that equal
// sets hash alike.
func (b bitset) hash() uint64 {
	n := len(b)
	for n > 0 && b[n-1] == 0 {
		n--
	}
	h := uint64(14695981039346656037)
	for _, w := range b[:n] {
		h ^= w
		h *= 1099511628211
	}
	return h
}

func (b bitset) clone() bitset { return append(bitset(nil), b...) }

// each calls f for every member index, in order.
func (b bitset) each(f func(int)) {
	for i, w := range b {
		for w != 0 {
			t := bits.TrailingZeros64(w)
			f(i*64 + t)
			w &= w - 1
		}
	}
}

// DPGroup is a datapath group: the set of switches or of routers a row
// applies to. Groups are interned by membership, so every row that applies
// to the same datapaths shares one group.
type DPGroup struct {
	ID      uint32
	Kind    Kind
	members bitset
	hash    uint64
	refs    int // holders: placement classes and ARP classes
	m       *Model
}

// Len returns the number of datapaths in the group.
func (g *DPGroup) Len() int { return g.members.count() }

// Datapaths returns the names of the group's datapaths, in index order.
func (g *DPGroup) Datapaths() []string {
	var out []string
	names := g.m.dpNames[g.Kind]
	g.members.each(func(i int) { out = append(out, names[i]) })
	return out
}

// groups interns DPGroups by membership.
type groups struct {
	byHash map[uint64][]*DPGroup
	nextID uint32
	n      int
}

func (gs *groups) find(k Kind, members bitset, h uint64) *DPGroup {
	for _, g := range gs.byHash[h] {
		if g.Kind == k && g.members.equal(members) {
			return g
		}
	}
	return nil
}

func (gs *groups) unlink(g *DPGroup) {
	l := gs.byHash[g.hash]
	for i, x := range l {
		if x == g {
			l[i] = l[len(l)-1]
			l = l[:len(l)-1]
			break
		}
	}
	if len(l) == 0 {
		delete(gs.byHash, g.hash)
	} else {
		gs.byHash[g.hash] = l
	}
}

func (gs *groups) link(g *DPGroup) {
	if gs.byHash == nil {
		gs.byHash = make(map[uint64][]*DPGroup)
	}
	gs.byHash[g.hash] = append(gs.byHash[g.hash], g)
}
