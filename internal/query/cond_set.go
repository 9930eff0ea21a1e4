package query

import (
	"slices"

	"github.com/weir-dev/weir/internal/store"
)

// addrSet evaluates an or of equality leaves on one address column
// ("sip = a or sip = b or …", the console's series of its top N) in one
// pass: each distinct address of the block is tested against the set once
// (a map for whole addresses, the prefixes in turn), then each row by its
// entry and family, instead of one pass over the rows per leaf and one
// more per or to combine them. Its answers are the or's.
type addrSet struct {
	attr     attr               // aSrcAddr or aDstAddr
	exact    map[[16]byte]uint8 // whole addresses: bit 0 a leaf of IPv4, bit 1 of IPv6
	prefixes []*leaf            // the leaves with shorter prefixes
}

// Families of an addrSet entry: which leaves' family an address matched.
const (
	setV4 uint8 = 1 << iota
	setV6
)

// fuse gives every or of n whose leaves (through nested ors) are two or
// more equality tests of the same address column its addrSet, and
// descends into the rest.
func fuse(n node) {
	switch n := n.(type) {
	case *andNode:
		fuse(n.l)
		fuse(n.r)
	case *orNode:
		var leaves []*leaf
		if orLeaves(n, &leaves) && len(leaves) >= 2 {
			n.set = newAddrSet(leaves)
			return
		}
		fuse(n.l)
		fuse(n.r)
	}
}

// orLeaves collects the leaves under an or, reporting whether they are
// all equality tests of one address column (sip or dip).
func orLeaves(n node, out *[]*leaf) bool {
	switch n := n.(type) {
	case *orNode:
		return orLeaves(n.l, out) && orLeaves(n.r, out)
	case *leaf:
		if n.op != opEq || n.attr != aSrcAddr && n.attr != aDstAddr || len(*out) > 0 && (*out)[0].attr != n.attr {
			return false
		}
		*out = append(*out, n)
		return true
	}
	return false
}

func newAddrSet(leaves []*leaf) *addrSet {
	s := &addrSet{attr: leaves[0].attr, exact: map[[16]byte]uint8{}}
	for _, l := range leaves {
		if l.bits != 128 {
			s.prefixes = append(s.prefixes, l)
			continue
		}
		if l.v4 {
			s.exact[l.addr] |= setV4
		} else {
			s.exact[l.addr] |= setV6
		}
	}
	return s
}

// families is which families' leaves match address a: setV4, setV6 or both.
func (s *addrSet) families(a *[16]byte) uint8 {
	f := s.exact[*a]
	for _, l := range s.prefixes {
		if l.prefixMatch(a) {
			if l.v4 {
				f |= setV4
			} else {
				f |= setV6
			}
		}
	}
	return f
}

// eval sets sel[i] to whether row i's address is in the set (in its family).
func (s *addrSet) eval(c *store.Columns, sel []bool, e *evaluator) {
	dict, idx, rows := c.SrcDict, c.SrcIdx, c.SrcAddr
	if s.attr == aDstAddr {
		dict, idx, rows = c.DstDict, c.DstIdx, c.DstAddr
	}
	ver := c.IPVersion[:len(sel)]
	if dict == nil { // live records: row by row
		for i := range sel {
			sel[i] = s.families(&rows[i])&family(ver[i]) != 0
		}
		return
	}
	e.fam = slices.Grow(e.fam[:0], len(dict))[:len(dict)]
	m := e.fam
	for j := range dict {
		m[j] = s.families(&dict[j])
	}
	idx = idx[:len(sel)]
	for i, x := range idx {
		sel[i] = m[x]&family(ver[i]) != 0
	}
}

// family is the addrSet bit of IP version v.
func family(v uint8) uint8 {
	if v == 4 {
		return setV4
	}
	return setV6
}
