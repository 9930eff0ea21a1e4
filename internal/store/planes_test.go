package store

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// TestPutPlanesSub checks the one-pass plane writer against byte j of
// every v[i]-base written plane by plane, for every width and lengths
// around its unrolled cases, after a prefix already in dst.
func TestPutPlanesSub(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for w := 0; w <= 8; w++ {
		for _, n := range []int{0, 1, 2, 3, 7, 64, 1001} {
			v := make([]uint64, n)
			base := r.Uint64() >> 1
			for i := range v {
				v[i] = base + r.Uint64()>>uint(64-8*max(w, 1))
			}
			want := []byte("prefix")
			for j := 0; j < w; j++ {
				for _, x := range v {
					want = append(want, byte((x-base)>>(8*j)))
				}
			}
			if got := putPlanesSub([]byte("prefix"), v, base, w); !bytes.Equal(got, want) {
				t.Fatalf("w %d n %d: planes differ", w, n)
			}
			if base == 0 {
				continue
			}
			for i := range v {
				v[i] -= base
			}
			if got := putPlanes([]byte("prefix"), v, w); !bytes.Equal(got, want) {
				t.Fatalf("putPlanes w %d n %d: planes differ", w, n)
			}
		}
	}
}

// TestMinMax checks minMax and minMaxSigned against a plain scan on odd and even lengths,
// with the extremes at either end and in the middle.
func TestMinMax(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := 1; n < 40; n++ {
		for k := 0; k < 20; k++ {
			v := make([]uint64, n)
			for i := range v {
				v[i] = r.Uint64() >> uint(r.IntN(64))
			}
			lo, hi := v[0], v[0]
			for _, x := range v {
				lo, hi = min(lo, x), max(hi, x)
			}
			if gl, gh := minMax(v); gl != lo || gh != hi {
				t.Fatalf("n %d: minMax %d %d, want %d %d", n, gl, gh, lo, hi)
			}
			for i := range v {
				v[i] = uint64(int64(v[i]) - 1<<62) // some negative
			}
			sl, sh := int64(v[0]), int64(v[0])
			for _, x := range v {
				sl, sh = min(sl, int64(x)), max(sh, int64(x))
			}
			if gl, gh := minMaxSigned(v); int64(gl) != sl || int64(gh) != sh {
				t.Fatalf("n %d: minMaxSigned %d %d, want %d %d", n, int64(gl), int64(gh), sl, sh)
			}
		}
	}
}

// TestHistogram checks histogram's counts against a plain count on both
// sides of histSplitMin, on skewed and flat bytes, after a dirty h.
func TestHistogram(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 5, 100, histSplitMin - 1, histSplitMin, histSplitMin + 3, 5000} {
		for _, skew := range []int{0, 3, 7} {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(r.Uint32() >> uint(24+skew))
			}
			var want [256]uint32
			for _, x := range b {
				want[x]++
			}
			h := [256]uint32{1, 2, 3}
			if histogram(&h, b); h != want {
				t.Fatalf("n %d skew %d: counts differ", n, skew)
			}
		}
	}
}

// roundRef is roundTimes' floor and ceiling by a divisor the compiler
// cannot see.
//
//go:noinline
func roundRef(start, end, prec int64) (int64, int64, int64) {
	q := start / prec
	if q*prec > start {
		q--
	}
	c := end / prec
	if c*prec < end {
		c++
	}
	return q, q * prec, c * prec
}

// TestRoundTimes checks order's rounding at the default precision (a
// constant divisor) against division by a variable, negative times and
// exact multiples included.
func TestRoundTimes(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const p = int64(DefaultTimePrecision)
	for k := 0; k < 100000; k++ {
		var rec flow.Record
		rec.Start, rec.End = r.Int64N(1<<62)-1<<61, r.Int64N(1<<62)-1<<61
		if k%3 == 0 {
			rec.Start -= rec.Start % p
			rec.End -= rec.End % p
		}
		q, s, e := roundRef(rec.Start, rec.End, p)
		in := rec
		if got := roundTimes(&rec, p); got != q || rec.Start != s || rec.End != e {
			t.Fatalf("%d %d: got %d %d %d, want %d %d %d", in.Start, in.End, got, rec.Start, rec.End, q, s, e)
		}
	}
}
