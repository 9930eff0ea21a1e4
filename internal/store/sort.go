package store

import (
	"cmp"
	"math/bits"
	"slices"

	"github.com/weir-dev/weir/internal/flow"
)

// prepare rounds a block's times to the store's precision and returns its
// rows sorted by Start (stable), in s.sorted: Start then delta-encodes into
// a few bits a row (random nanosecond Starts cost 5 bytes a row each for
// Start and End; at 1 ms, sorted, about 1 and 2.3). Readers get rows in
// Start order. It sorts 16-byte (Start, index) pairs and then moves each
// record once, not 100-byte records at every swap. sorted says recs
// arrived in Start order, and lo and hi are their least and greatest
// Start (Write keeps all three as rows go in), so one pass rounds the
// times and makes the sort keys.
func (s *Store) prepare(recs []flow.Record, sorted bool, lo, hi int64) []flow.Record {
	prec := int64(s.cfg.TimePrecision)
	if prec > 1 {
		lo, hi = floorTo(lo, prec), floorTo(hi, prec)
	}
	// Sort (Start, index) packed in one uint64 when the block's Start span
	// in precision units fits beside the row index: a plain integer sort,
	// stable by construction. Otherwise sort indexes by Start, stably.
	unit := uint64(max(prec, 1))
	if uint64(hi-lo) < 1<<(64-idxBits) {
		unit = 1 // no division needed to fit
	}
	packed := !sorted && hi >= lo && uint64(hi-lo)/unit < 1<<(64-idxBits) && len(recs) <= 1<<idxBits
	var keys []uint64
	if packed {
		keys = slices.Grow(s.sortKeys[:0], len(recs))[:len(recs)]
		s.sortKeys = keys
	}
	for i := range recs {
		r := &recs[i]
		if prec > 1 {
			r.Start = floorTo(r.Start, prec)
			r.End = -floorTo(-r.End, prec) // ceiling
		}
		if packed {
			if r.Start < lo || r.Start > hi { // not the span Write saw: sort the slow way
				packed = false
				continue
			}
			keys[i] = uint64(r.Start-lo)/unit<<idxBits | uint64(i)
		}
	}
	if sorted {
		return recs
	}
	mask := uint64(1)<<idxBits - 1
	if packed {
		s.sortTmp = slices.Grow(s.sortTmp[:0], len(keys))[:len(keys)]
		keys = radixSort(keys, s.sortTmp, idxBits)
	} else {
		keys = slices.Grow(s.sortKeys[:0], len(recs))[:len(recs)]
		s.sortKeys = keys
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
