package engine

import (
	"math"
	"math/bits"
	"time"

	"github.com/weir-dev/weir/internal/bench/result"
)

// Histogram layout: values below 2^subBits are counted exactly; above, each
// power-of-two range is split into 2^(subBits-1) equal buckets, so a
// bucket's width is at most 1/128 of its values (quantiles within 0.8%).
const (
	subBits    = 8
	subHalf    = 1 << (subBits - 1) // 128
	maxShift   = 33                 // values up to 2^41 ns (~36 min) are bucketed; larger ones clamp
	histValues = subHalf*2 + maxShift*subHalf
)

// Hist is one operation's latencies: exact count, sum, min and max, and a
// log-linear histogram for quantiles. The zero value is ready; it is not
// safe for concurrent use (each thread keeps its own and they are merged).
type Hist struct {
	count, sum uint64
	min, max   uint64
	b          *[histValues]uint32 // allocated on first Record
}

// bucket returns the index of v.
func bucket(v uint64) int {
	l := bits.Len64(v)
	if l <= subBits {
		return int(v) // < 256: exact
	}
	shift := l - subBits
	if shift > maxShift {
		return histValues - 1
	}
	return subHalf*2 + (shift-1)*subHalf + int(v>>shift) - subHalf
}

// lowest returns the smallest value of bucket i and its width.
func lowest(i int) (lo, width uint64) {
	if i < subHalf*2 {
		return uint64(i), 1
	}
	i -= subHalf * 2
	shift := uint(i/subHalf + 1)
	return uint64(i%subHalf+subHalf) << shift, 1 << shift
}

// Record adds one latency of d (negative counts as 0).
func (h *Hist) Record(d time.Duration) {
	v := uint64(max(d, 0))
	if h.b == nil {
		h.b = new([histValues]uint32)
		h.min = math.MaxUint64
	}
	h.count++
	h.sum += v
	h.min = min(h.min, v)
	h.max = max(h.max, v)
	i := bucket(v)
	if h.b[i] < math.MaxUint32 {
		h.b[i]++
	}
}

// Merge adds o's samples to h.
func (h *Hist) Merge(o *Hist) {
	if o.b == nil {
		return
	}
	if h.b == nil {
		h.b = new([histValues]uint32)
		h.min = math.MaxUint64
	}
	h.count += o.count
	h.sum += o.sum
	h.min = min(h.min, o.min)
	h.max = max(h.max, o.max)
	for i, c := range o.b {
		h.b[i] = uint32(min(uint64(h.b[i])+uint64(c), math.MaxUint32))
	}
}

// Count returns how many samples h has.
func (h *Hist) Count() uint64 { return h.count }

// Quantile returns the q-quantile (0 < q ≤ 1): the middle of the bucket
// holding the ceil(q×count)-th smallest sample, clamped to [min, max].
func (h *Hist) Quantile(q float64) time.Duration {
	if h.count == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.count)))
	rank = min(max(rank, 1), h.count)
	var seen uint64
	for i, c := range h.b {
		seen += uint64(c)
		if seen >= rank {
			lo, w := lowest(i)
			v := lo + w/2
			return time.Duration(min(max(v, h.min), h.max))
		}
	}
	return time.Duration(h.max)
}

// Latency summarises h.
func (h *Hist) Latency() result.Latency {
	if h.count == 0 {
		return result.Latency{}
	}
	return result.Latency{
		Count: h.count,
		Avg:   time.Duration(h.sum / h.count),
		P50:   h.Quantile(0.50),
		P99:   h.Quantile(0.99),
		Min:   time.Duration(h.min),
		Max:   time.Duration(h.max),
	}
}
