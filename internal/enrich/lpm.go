package enrich

import (
	"cmp"
	"encoding/binary"
	"net/netip"
	"slices"

	"github.com/weir-dev/weir/internal/flow"
)

// u128 is a 16-byte address as a number (IPv4 IPv4-mapped, as in flow.Key),
// so that IPv4 and IPv6 ranges share one code path.
type u128 struct{ hi, lo uint64 }

func load128(a *[16]byte) u128 {
	return u128{binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])}
}

func (a u128) less(b u128) bool { return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo) }

// next returns a+1, and false when a is the last address.
func (a u128) next() (u128, bool) {
	if a.lo != ^uint64(0) {
		return u128{a.hi, a.lo + 1}, true
	}
	if a.hi != ^uint64(0) {
		return u128{a.hi + 1, 0}, true
	}
	return a, false
}

// prefixRange returns the first and last address of p in the 16-byte
// space (an IPv4 prefix /n is the IPv4-mapped /96+n).
func prefixRange(p netip.Prefix) (first, last u128) {
	a := p.Masked().Addr().As16()
	bits := p.Bits()
	if p.Addr().Is4() {
		bits += 96
	}
	first = load128(&a)
	last = first
	switch {
	case bits == 0:
		last = u128{^uint64(0), ^uint64(0)}
	case bits <= 64:
		last.hi |= ^uint64(0) >> bits
		last.lo = ^uint64(0)
	case bits < 128:
		last.lo |= ^uint64(0) >> (bits - 64)
	}
	return first, last
}

// ranges is a longest-prefix-match table flattened into disjoint address
// ranges: range i starts at starts[i], ends where range i+1 starts, and
// belongs to vals[i] (nil: to no workload). A lookup is one binary search.
type ranges struct {
	starts []u128
	vals   []*flow.Workload
}

// lookup returns the workload of the longest prefix holding a, or nil.
func (r *ranges) lookup(a u128) *flow.Workload {
	lo, hi := 0, len(r.starts)
	for lo < hi { // first start above a
		m := int(uint(lo+hi) >> 1)
		if a.less(r.starts[m]) {
			hi = m
		} else {
			lo = m + 1
		}
	}
	if lo == 0 {
		return nil
	}
	return r.vals[lo-1]
}

// rangePrefix is one prefix on its way into a ranges table.
type rangePrefix struct {
	first, last u128
	bits        int // in the 16-byte space
	w           *flow.Workload
}

// buildRanges flattens prefixes (nested or disjoint, as prefixes always
// are; no two equal) into a ranges table.
func buildRanges(ps []rangePrefix) ranges {
	slices.SortFunc(ps, func(a, b rangePrefix) int {
		if a.first != b.first {
			if a.first.less(b.first) {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.bits, b.bits) // the wider (containing) prefix first
	})
	var r ranges
	emit := func(at u128, w *flow.Workload) {
		n := len(r.starts)
		if n > 0 && r.starts[n-1] == at { // a narrower prefix starts where another range did
			r.vals[n-1] = w
			if n > 1 && r.vals[n-2] == w {
				r.starts, r.vals = r.starts[:n-1], r.vals[:n-1]
			}
			return
		}
		if (n > 0 && r.vals[n-1] == w) || (n == 0 && w == nil) {
			return // the range goes on
		}
		r.starts, r.vals = append(r.starts, at), append(r.vals, w)
	}
	var stack []rangePrefix // open prefixes, each inside the one below
	pop := func() {
		e := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if after, ok := e.last.next(); ok {
			var w *flow.Workload
			if len(stack) > 0 {
				w = stack[len(stack)-1].w
			}
			emit(after, w)
		}
	}
	for _, p := range ps {
		for len(stack) > 0 && stack[len(stack)-1].last.less(p.first) {
			pop()
		}
		emit(p.first, p.w)
		stack = append(stack, p)
	}
	for len(stack) > 0 {
		pop()
	}
	r.starts, r.vals = slices.Clip(r.starts), slices.Clip(r.vals)
	return r
}
