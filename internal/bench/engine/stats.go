package engine

import (
	"encoding/json"
	"errors"
	"math"
	"sort"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/internal/bench/profile"
	"github.com/weir-dev/weir/internal/bench/result"
)

// OpResult is one flow operation's totals in one client process.
type OpResult struct {
	Group int    `json:"group"`
	Txn   int    `json:"txn"`
	Op    int    `json:"op"`
	Hist  Hist   `json:"hist"`
	Bytes uint64 `json:"bytes"`
	Lost  uint64 `json:"lost,omitempty"`
}

// TxnResult is one transaction's totals in one client process; Start and
// End are wall-clock Unix nanoseconds (first thread in, last thread out).
type TxnResult struct {
	Group int    `json:"group"`
	Txn   int    `json:"txn"`
	Hist  Hist   `json:"hist"`
	Bytes uint64 `json:"bytes"`
	Start int64  `json:"start"`
	End   int64  `json:"end"`
}

// ClientResult is what one client process measured. Intervals[i] covers
// [T0 + i×Interval, T0 + (i+1)×Interval).
type ClientResult struct {
	Pair      int                `json:"pair"`
	Start     int64              `json:"start"` // Unix ns
	End       int64              `json:"end"`
	Ops       []OpResult         `json:"ops"`
	Txns      []TxnResult        `json:"txns"`
	Conns     []result.ConnStats `json:"conns"`
	ConnsLeft uint64             `json:"conns_left,omitempty"` // connections beyond MaxConnRecords
	Intervals []result.Interval  `json:"intervals"`
	Errors    []string           `json:"errors,omitempty"`
}

// MaxConnRecords bounds the connections one client process records.
const MaxConnRecords = 1 << 17

// counters are one thread's running totals, read by the interval sampler.
// Padded to a cache line so threads do not share one.
type counters struct {
	bytes, iters atomic.Uint64
	_            [48]byte
}

// histJSON is Hist's wire form: exact sums and the non-empty buckets.
type histJSON struct {
	N   uint64      `json:"n"`
	Sum uint64      `json:"sum"`
	Min uint64      `json:"min"`
	Max uint64      `json:"max"`
	B   [][2]uint64 `json:"b,omitempty"` // bucket index, count
}

// MarshalJSON writes the non-empty buckets only.
func (h Hist) MarshalJSON() ([]byte, error) {
	j := histJSON{N: h.count, Sum: h.sum, Min: h.min, Max: h.max}
	if h.b != nil {
		for i, c := range h.b {
			if c > 0 {
				j.B = append(j.B, [2]uint64{uint64(i), uint64(c)})
			}
		}
	} else {
		j.Min = 0
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads MarshalJSON's form, checking every index.
func (h *Hist) UnmarshalJSON(data []byte) error {
	var j histJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*h = Hist{}
	if j.N == 0 {
		return nil
	}
	h.b = new([histValues]uint32)
	var n uint64
	for _, bc := range j.B {
		if bc[0] >= histValues || bc[1] > math.MaxUint32 {
			return errors.New("engine: histogram bucket out of range")
		}
		h.b[bc[0]] += uint32(bc[1])
		n += bc[1]
	}
	if n != j.N || j.Min > j.Max {
		return errors.New("engine: histogram counts do not add up")
	}
	h.count, h.sum, h.min, h.max = j.N, j.Sum, j.Min, j.Max
	return nil
}

// Aggregate merges the client processes' results into the run's tables.
func Aggregate(p *profile.Profile, rs []*ClientResult) (txns []result.TxnStats, ops []result.OpStats, intervals []result.Interval, elapsed time.Duration) {
	type tkey struct{ g, t int }
	type okey struct{ g, t, o int }
	tx := map[tkey]*TxnResult{}
	op := map[okey]*OpResult{}
	var start, end int64
	for _, r := range rs {
		if r == nil {
			continue
		}
		if start == 0 || (r.Start != 0 && r.Start < start) {
			start = r.Start
		}
		end = max(end, r.End)
		for i := range r.Txns {
			x := &r.Txns[i]
			k := tkey{x.Group, x.Txn}
			a := tx[k]
			if a == nil {
				a = &TxnResult{Group: x.Group, Txn: x.Txn, Start: x.Start}
				tx[k] = a
			}
			a.Hist.Merge(&x.Hist)
			a.Bytes += x.Bytes
			if x.Start != 0 && (a.Start == 0 || x.Start < a.Start) {
				a.Start = x.Start
			}
			a.End = max(a.End, x.End)
		}
		for i := range r.Ops {
			x := &r.Ops[i]
			k := okey{x.Group, x.Txn, x.Op}
			a := op[k]
			if a == nil {
				a = &OpResult{Group: x.Group, Txn: x.Txn, Op: x.Op}
				op[k] = a
			}
			a.Hist.Merge(&x.Hist)
			a.Bytes += x.Bytes
			a.Lost += x.Lost
		}
		for i, iv := range r.Intervals {
			for len(intervals) <= i {
				intervals = append(intervals, result.Interval{Start: iv.Start, Len: iv.Len})
			}
			intervals[i].Bytes += iv.Bytes
			intervals[i].Iters += iv.Iters
		}
	}
	rate := func(v float64, d time.Duration) float64 {
		if d <= 0 {
			return 0
		}
		return v / d.Seconds()
	}
	for gi := range p.Groups {
		g := &p.Groups[gi]
		for ti := range g.Txns {
			a := tx[tkey{gi, ti}]
			if a == nil {
				continue
			}
			wall := time.Duration(a.End - a.Start)
			lat := a.Hist.Latency()
			txns = append(txns, result.TxnStats{
				Group: gi, GroupName: g.Name, Txn: ti, Name: g.Txns[ti].Name,
				Latency: lat, Bytes: a.Bytes, Wall: wall,
				BytesPerSec: rate(float64(a.Bytes), wall), OpsPerSec: rate(float64(lat.Count), wall),
			})
			for oi := range g.Txns[ti].Ops {
				o := op[okey{gi, ti, oi}]
				if o == nil {
					continue
				}
				po := &g.Txns[ti].Ops[oi]
				lat := o.Hist.Latency()
				s := result.OpStats{
					Group: gi, Txn: ti, Op: oi, Kind: po.Kind.String(), Size: po.Size,
					Latency: lat, Bytes: o.Bytes, Lost: o.Lost,
					BytesPerSec: rate(float64(o.Bytes), wall), OpsPerSec: rate(float64(lat.Count), wall),
				}
				if po.Kind == profile.Connect {
					s.Proto = po.Proto.String()
				}
				ops = append(ops, s)
			}
		}
	}
	sort.SliceStable(ops, func(i, j int) bool {
		a, b := ops[i], ops[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Txn != b.Txn {
			return a.Txn < b.Txn
		}
		return a.Op < b.Op
	})
	if end > start {
		elapsed = time.Duration(end - start)
	}
	return txns, ops, intervals, elapsed
}
