package format

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// appendTime must agree with time.AppendFormat everywhere: every day of
// 1600–2400 at random times of day, leap days and year boundaries, random
// instants over the whole int64 range (including before 1970), and the
// extremes.
func TestAppendTimeMatchesStdlib(t *testing.T) {
	check := func(ns int64) {
		got := string(appendTime(nil, ns))
		want := string(appendTimeSlow(nil, ns))
		if got != want {
			t.Fatalf("appendTime(%d) = %s, want %s", ns, got, want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	start := time.Date(1678, 1, 1, 0, 0, 0, 0, time.UTC).Unix() / 86400 // int64 ns covers 1677–2262
	end := time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC).Unix() / 86400
	for day := start; day < end; day++ {
		check(day*86400*1e9 + rng.Int64N(86400*1e9))
		check(day * 86400 * 1e9)              // midnight
		check(day*86400*1e9 + 86399999999999) // last ns of the day
	}
	for i := 0; i < 200000; i++ {
		check(int64(rng.Uint64()))
	}
	for _, ns := range []int64{0, -1, 1, math.MinInt64, math.MaxInt64, -86400 * 1e9, 951782400e9 /* 2000-02-29 */} {
		check(ns)
	}
}

func BenchmarkAppendTime(b *testing.B) {
	buf := make([]byte, 0, 64)
	ns := time.Date(2026, 11, 22, 7, 55, 1, 123456789, time.UTC).UnixNano()
	b.ReportAllocs()
	for b.Loop() {
		buf = appendTime(buf[:0], ns)
	}
}
