package store

import (
	"cmp"
	"math"
	"math/bits"
	"slices"

	"github.com/weir-dev/weir/internal/flow"
)

// prepare rounds a block's times to the store's precision and returns its
// rows sorted by Start (stable), in s.sorted: Start then delta-encodes into
// a few bits a row (random nanosecond Starts cost 5 bytes a row each for
// Start and End; at 1 ms, sorted, about 1 and 2.3). Readers get rows in
// Start order. It sorts 16-byte (Start, index) pairs and then moves each
// record once, not 100-byte records at every swap.
func (s *Store) prepare(recs []flow.Record) []flow.Record {
	prec := int64(s.cfg.TimePrecision)
	sorted := true
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for i := range recs {
		r := &recs[i]
		if prec > 1 {
			r.Start = floorTo(r.Start, prec)
			r.End = -floorTo(-r.End, prec) // ceiling
		}
		sorted = sorted && (i == 0 || recs[i-1].Start <= r.Start)
		lo, hi = min(lo, r.Start), max(hi, r.Start)
	}
	if sorted {
		return recs
	}
	// Sort (Start, index) packed in one uint64 when the block's Start span
	// in precision units fits beside the row index: a plain integer sort,
	// stable by construction. Otherwise sort indexes by Start, stably.
	keys := slices.Grow(s.sortKeys[:0], len(recs))[:len(recs)]
	s.sortKeys = keys
	unit := uint64(max(prec, 1))
	if uint64(hi-lo) < 1<<(64-idxBits) {
		unit = 1 // no division needed to fit
	}
	mask := uint64(1)<<idxBits - 1
	if uint64(hi-lo)/unit < 1<<(64-idxBits) && len(recs) <= 1<<idxBits {
		for i := range recs {
			keys[i] = uint64(recs[i].Start-lo)/unit<<idxBits | uint64(i)
		}
		s.sortTmp = slices.Grow(s.sortTmp[:0], len(keys))[:len(keys)]
		keys = radixSort(keys, s.sortTmp, idxBits)
	} else {
		for i := range keys {
			keys[i] = uint64(i)
		}
		slices.SortStableFunc(keys, func(a, b uint64) int { return cmp.Compare(recs[a].Start, recs[b].Start) })
		mask = ^uint64(0)
	}
	out := slices.Grow(s.sorted[:0], len(recs))[:len(recs)]
	for j, k := range keys {
		out[j] = recs[k&mask]
	}
	s.sorted = out
	return out
}

// idxBits is the row-index part of a packed sort key (MaxBlockRows fits).
const idxBits = 21

// floorTo rounds t down to a multiple of p (toward minus infinity).
func floorTo(t, p int64) int64 {
	r := t % p
	if r < 0 {
		r += p
	}
	return t - r
}

// radixSort sorts keys by their bits from lo up (the bits below lo, a row
// index, keep their order: the sort is stable) with least-significant-
// digit passes of 11 bits through tmp (len(keys)). Sorting a block's
// 5000 Start keys this way takes a few passes over 40 KB instead of
// pdqsort's n·log n comparisons. It returns the sorted slice, which is
// keys or tmp.
func radixSort(keys, tmp []uint64, lo uint) []uint64 {
	var all uint64
	for _, k := range keys {
		all |= k
	}
	hi := uint(bits.Len64(all))
	const digit = 11
	var count [1 << digit]int
	for sh := lo; sh < hi; sh += digit {
		clear(count[:])
		for _, k := range keys {
			count[(k>>sh)&(1<<digit-1)]++
		}
		sum := 0
		for i, c := range count {
			count[i] = sum
			sum += c
		}
		tmp = tmp[:len(keys)]
		for _, k := range keys {
			d := (k >> sh) & (1<<digit - 1)
			tmp[count[d]] = k
			count[d]++
		}
		keys, tmp = tmp, keys
	}
	return keys
}
