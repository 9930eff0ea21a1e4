package store

import (
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestClassStarts: the four-way interleaved count of a dictionary's
// classes gives each class the start of a plain count's prefix sums, for
// lengths around the interleave (the tail loop) and for runs of one class.
func TestClassStarts(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := range 40 {
		for _, spread := range []int{1, 3, 256} {
			cls := make([]byte, n)
			for i := range cls {
				cls[i] = byte(r.IntN(spread))
			}
			var want [256]int
			for _, c := range cls {
				want[255-c]++
			}
			sum := 0
			for c, k := range want {
				want[c] = sum
				sum += k
			}
			if got := classStarts(cls); got != want {
				t.Fatalf("%d classes of %d kinds: starts differ from the plain count", n, spread)
			}
		}
	}
}

// TestSpreadPerPacket: the branch-free spread of a flagNoPkt column's
// values over its rows gives each row with packets q·p + r from the next
// value in order and each row without packets 0, and flags (only) a row
// with packets whose remainder is not under them or whose count
// overflows; nonZero counts the rows with packets.
func TestSpreadPerPacket(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for round := range 200 {
		n := 1 + r.IntN(300)
		pk := make([]uint64, n)
		for i := range pk {
			if r.IntN(4) != 0 {
				pk[i] = 1 + r.Uint64N(1000)
			}
		}
		if round%50 == 0 {
			pk[r.IntN(n)] = 1 << 60 // q·p overflows for q ≥ 16
		}
		m, or := nonZero(pk)
		want := 0
		for _, p := range pk {
			if p != 0 {
				want++
			}
		}
		if m != want {
			t.Fatalf("nonZero %d, want %d", m, want)
		}
		vals := make([]uint64, m)
		for j := range vals {
			vals[j] = r.Uint64N(1<<16) | r.Uint64N(1100)<<16 // some remainders too big
		}
		v := make([]uint64, n)
		copy(v, vals)
		bad := spreadPerPacket(v, pk, m, or)
		j, wantBad := 0, false
		for i, p := range pk {
			if p == 0 {
				if v[i] != 0 {
					t.Fatalf("row %d without packets: %d", i, v[i])
				}
				continue
			}
			q, rem := vals[j]&0xffff, vals[j]>>16
			j++
			hi, lo := bits.Mul64(q, p)
			b, carry := bits.Add64(lo, rem, 0)
			if hi|carry != 0 || rem >= p {
				wantBad = true
				continue
			}
			if v[i] != b {
				t.Fatalf("row %d: %d, want %d", i, v[i], b)
			}
		}
		if (bad != 0) != wantBad {
			t.Fatalf("round %d: bad %v, want %v", round, bad != 0, wantBad)
		}
	}
}

// TestSpreadPerPacket48 checks the loop for packets under 2^48 against
// the one for any counts, the bound included (q = 2^16-1 and r = p-1
// with p = 2^48-1 is the largest count).
func TestSpreadPerPacket48(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for round := range 500 {
		n := 1 + r.IntN(200)
		pk := make([]uint64, n)
		for i := range pk {
			if r.IntN(5) != 0 {
				pk[i] = 1 + r.Uint64N(1<<48-1)>>r.IntN(48)
			}
		}
		if round%3 == 0 {
			pk[r.IntN(n)] = 1<<48 - 1
		}
		m, or := nonZero(pk)
		if or>>48 != 0 {
			t.Fatalf("round %d: packets past 2^48", round)
		}
		v := make([]uint64, n)
		j := 0
		for _, p := range pk {
			if p == 0 {
				continue
			}
			q, rem := r.Uint64N(1<<16), r.Uint64N(p)
			switch r.IntN(8) {
			case 0:
				q, rem = 1<<16-1, p-1
			case 1:
				rem = p + r.Uint64N(3) // too big
			}
			v[j] = rem<<16 | q
			j++
		}
		if j != m {
			t.Fatalf("round %d: %d values, nonZero %d", round, j, m)
		}
		want, got := slices.Clone(v), slices.Clone(v)
		wb, gb := spreadPerPacketWide(want, pk, m), spreadPerPacket48(got, pk, m)
		if (wb != 0) != (gb != 0) || wb == 0 && !slices.Equal(got, want) {
			t.Fatalf("round %d: bad %d, want %d; values differ %v", round, gb, wb, !slices.Equal(got, want))
		}
	}
}

// TestMaxOf checks the four-way maximum against a plain one, every
// length around the interleave (the tail loop) and the maximum anywhere.
func TestMaxOf(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for n := range 40 {
		for range 20 {
			u := make([]uint32, n)
			for i := range u {
				u[i] = r.Uint32() >> r.IntN(32)
			}
			want := uint32(0)
			for _, x := range u {
				want = max(want, x)
			}
			if got := maxOf(u); got != want {
				t.Fatalf("len %d: %d, want %d", n, got, want)
			}
			w := make([]uint64, n)
			for i := range w {
				w[i] = uint64(u[i]) << 20
			}
			if got := maxOf(w); got != uint64(want)<<20 {
				t.Fatalf("len %d: %d, want %d", n, got, uint64(want)<<20)
			}
		}
	}
}
