package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketBounds(t *testing.T) {
	prev := -1
	for _, v := range []uint64{0, 1, 255, 256, 257, 511, 512, 1000, 1 << 20, 1<<41 - 1} {
		i := bucket(v)
		if i < prev || i >= histValues {
			t.Fatalf("bucket(%d) = %d after %d", v, i, prev)
		}
		prev = i
		lo, w := lowest(i)
		if v < lo || v >= lo+w {
			t.Errorf("value %d in bucket %d = [%d, %d)", v, i, lo, lo+w)
		}
		if v >= 256 && float64(w)/float64(lo) > 1.0/128+1e-12 {
			t.Errorf("bucket %d: width %d over %d", i, w, lo)
		}
	}
	if bucket(1<<50) != histValues-1 {
		t.Errorf("huge value not clamped")
	}
}

// Quantiles against sorting, within the bucket precision; min, max, avg exact.
func TestHistQuantiles(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h, a, b Hist
	var all []time.Duration
	var sum time.Duration
	for i := range 100_000 {
		d := time.Duration(r.ExpFloat64()*20_000) + 3_000
		if i%1000 == 0 {
			d = time.Duration(r.Int64N(int64(time.Second)))
		}
		all = append(all, d)
		sum += d
		h.Record(d)
		if i%2 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	a.Merge(&b)
	slices.Sort(all)
	for _, x := range []*Hist{&h, &a} {
		l := x.Latency()
		if l.Count != uint64(len(all)) || l.Min != all[0] || l.Max != all[len(all)-1] || l.Avg != sum/time.Duration(len(all)) {
			t.Fatalf("latency %+v, want count %d min %v max %v avg %v", l, len(all), all[0], all[len(all)-1], sum/time.Duration(len(all)))
		}
		for _, q := range []float64{0.5, 0.99} {
			want := all[int(q*float64(len(all)))-1]
			got := x.Quantile(q)
			if diff := float64(got-want) / float64(want); diff > 0.008 || diff < -0.008 {
				t.Errorf("q%v = %v, want %v (%.2f%%)", q, got, want, diff*100)
			}
		}
	}
	var empty Hist
	if empty.Latency().Count != 0 || empty.Quantile(0.5) != 0 {
		t.Error("empty histogram")
	}
}

func BenchmarkHistRecord(b *testing.B) {
	b.ReportAllocs()
	var h Hist
	h.Record(1)
	for i := range b.N {
		h.Record(time.Duration(i&0xffff) * 37)
	}
}
