package store

import (
	"cmp"
	"math"
	"math/bits"
	"slices"

	"github.com/weir-dev/weir/internal/flow"
)

// prepare rounds a block's times to the store's precision and returns its
// rows sorted by Start (stable), in s.sorted: order, then each record
// moved once. The write path itself encodes from order's permutation
// (blockEncoder.encodeRanked) and gathers only when it must.
func (s *Store) prepare(recs []flow.Record, sorted bool, lo, hi int64) []flow.Record {
	recs, perm, _ := s.order(recs, sorted, lo, hi)
	return s.gather(recs, perm)
}

// gather returns recs in the order perm gives (row j is recs[perm[j]]),
// in s.sorted; perm nil: recs itself.
func (s *Store) gather(recs []flow.Record, perm []int32) []flow.Record {
	if perm == nil {
		return recs
	}
	out := slices.Grow(s.sorted[:0], len(recs))[:len(recs)]
	for j, k := range perm {
		out[j] = recs[k]
	}
	s.sorted = out
	return out
}

// order rounds a block's times to the store's precision (in place) and
// returns the rows' stable order by Start: row j of the block is
// recs[perm[j]], and rank[i] is where recs[i] goes (perm's inverse); both
// nil when recs arrived in Start order. Start then delta-encodes into a
// few bits a row (random nanosecond Starts cost 5 bytes a row each for
// Start and End; at 1 ms, sorted, about 1 and 2.3). It sorts 8-byte
// (Start, index) keys, not 312-byte records. sorted says recs arrived in
// Start order, and lo and hi are their least and greatest Start (Write
// keeps all three as rows go in), so one pass rounds the times and makes
// the sort keys.
func (s *Store) order(recs []flow.Record, sorted bool, lo, hi int64) (rows []flow.Record, perm, rank []int32) {
	prec := int64(max(s.cfg.TimePrecision, 1))
	lo, hi = floorTo(lo, prec), floorTo(hi, prec)
	// Sort (Start in precision units, index) packed in one uint64 when the
	// block's span fits beside the row index: a plain integer sort, stable
	// by construction, and at 1 ms a 5-minute block's keys are 19 bits, two
	// radix passes (nanoseconds took four). The quotient is the rounding's
	// own division. Otherwise sort indexes by Start, stably. Far from the
	// int64 ends no rounding wraps, so units and rounded Starts agree.
	qlo, qhi := lo/prec, hi/prec
	packed := !sorted && hi >= lo && lo > math.MinInt64/2 && hi < math.MaxInt64/2 &&
		uint64(qhi-qlo) < 1<<(64-idxBits) && len(recs) <= 1<<idxBits
	var keys []uint64
	if packed {
		keys = slices.Grow(s.sortKeys[:0], len(recs))[:len(recs)]
		s.sortKeys = keys
	}
	for i := range recs {
		r := &recs[i]
		q := r.Start
		switch {
		case prec == int64(DefaultTimePrecision):
			q = roundTimes(r, int64(DefaultTimePrecision)) // a constant divisor: a multiply, not a division
		case prec > 1:
			q = roundTimes(r, prec)
		}
		if packed {
			if r.Start < lo || r.Start > hi { // not the span Write saw: sort the slow way
				packed = false
				continue
			}
			keys[i] = uint64(q-qlo)<<idxBits | uint64(i)
		}
	}
	if sorted {
		return recs, nil, nil
	}
	perm = slices.Grow(s.sortPerm[:0], len(recs))[:len(recs)]
	rank = slices.Grow(s.sortRank[:0], len(recs))[:len(recs)]
	s.sortPerm, s.sortRank = perm, rank
	if packed {
		s.sortTmp = slices.Grow(s.sortTmp[:0], len(keys))[:len(keys)]
		keys = radixSort(keys, s.sortTmp, idxBits)
		const mask = 1<<idxBits - 1
		for j, k := range keys {
			perm[j] = int32(k & mask)
		}
	} else {
		for i := range perm {
			perm[i] = int32(i)
		}
		slices.SortStableFunc(perm, func(a, b int32) int { return cmp.Compare(recs[a].Start, recs[b].Start) })
	}
	for j, k := range perm {
		rank[k] = int32(j)
	}
	return recs, perm, rank
}

// identity returns 0, 1, ..., n-1: the rank of rows already in order.
func (e *blockEncoder) identity(n int) []int32 {
	for i := len(e.ident); i < n; i++ {
		e.ident = append(e.ident, int32(i))
	}
	return e.ident[:n]
}

// needOrder says whether a pass other than extract's and putAddrsPorts'
// reads the rows (src, as extract saw them): a sparse column in use,
// enrichment, or node names that differ (one name is the same in any
// order).
func (e *blockEncoder) needOrder(src []flow.Record) bool {
	z := &e.nonZero
	for _, id := range [...]int{cDropPackets, cDropBytes, cDropReason, cSampling, cNATSrcAddr, cNATDstAddr,
		cNATVersion, cNATSrcPort, cNATDstPort, cVerdict, cRule, cMark, cZone} {
		if z[id] != 0 {
			return true
		}
	}
	if e.enr {
		return true
	}
	if z[cNode] != 0 {
		for i := range src {
			if src[i].Node != src[0].Node {
				return true
			}
		}
	}
	return false
}

// idxBits is the row-index part of a packed sort key (MaxBlockRows fits).
const idxBits = 21

// floorTo rounds t down to a multiple of p (toward minus infinity).
// roundTimes rounds r's Start down and its End up to a multiple of prec
// and returns Start in prec units. Small enough to inline, so a constant
// prec divides by multiplying (two 64-bit divisions a row were a third of
// order's time).
func roundTimes(r *flow.Record, prec int64) int64 {
	q := r.Start / prec
	if q*prec > r.Start { // floor, one division
		q--
	}
	r.Start = q * prec
	r.End = -floorTo(-r.End, prec) // ceiling
	return q
}

func floorTo(t, p int64) int64 {
	r := t % p
	if r < 0 {
		r += p
	}
	return t - r
}

// radixSort sorts keys by their bits from lo up (the bits below lo, a row
// index, keep their order: the sort is stable) with least-significant-
// digit passes through tmp (len(keys)): 11-bit digits, or 8-bit ones for
// fewer than radixSmall keys, whose 2048 counters would cost more than
// the keys (a stable sort's result does not depend on the digit). Sorting
// a block's 5000 Start keys this way takes a few passes over 40 KB
// instead of pdqsort's n·log n comparisons. It returns the sorted slice,
// which is keys or tmp.
func radixSort(keys, tmp []uint64, lo uint) []uint64 {
	var all uint64
	for _, k := range keys {
		all |= k
	}
	hi := uint(bits.Len64(all))
	digit, mask := uint(11), uint64(1<<11-1)
	if len(keys) < radixSmall {
		digit, mask = 8, 1<<8-1
	}
	var count [1 << 11]int
	for sh := lo; sh < hi; sh += digit {
		c := count[:mask+1]
		clear(c)
		for _, k := range keys {
			c[(k>>sh)&mask]++
		}
		sum := 0
		for i, n := range c {
			c[i] = sum
			sum += n
		}
		tmp = tmp[:len(keys)]
		for _, k := range keys {
			d := (k >> sh) & mask
			tmp[c[d]] = k
			c[d]++
		}
		keys, tmp = tmp, keys
	}
	return keys
}

// radixSmall is the fewest keys radixSort gives 11-bit digits.
const radixSmall = 1500
