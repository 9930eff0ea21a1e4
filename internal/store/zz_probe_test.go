package store

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"time"
)

func TestZZProbe(t *testing.T) {
	if os.Getenv("PROBE") == "" {
		t.Skip()
	}
	e := newTestEncoder(t)
	g := newGen(1)
	var seeds [][]byte
	for _, n := range []int{1, 7, 300} {
		b, _ := e.encode(nil, g.window(nil, n, t0, "x"))
		seeds = append(seeds, b)
	}
	b, _ := e.encode(nil, withNAT(g.window(nil, 300, t0, "x"), 3))
	seeds = append(seeds, b)
	b, _ = e.encode(nil, withEnrich(g.window(nil, 300, t0, "x"), 4))
	seeds = append(seeds, b)
	for _, gb := range goldenBlocks {
		seeds = append(seeds, readGolden(t, gb.file))
	}
	for i, s := range seeds {
		t.Logf("seed %d: %d bytes", i, len(s))
	}
	r := rand.New(rand.NewPCG(1, 2))
	var worst time.Duration
	var worstA uint64
	var ms runtime.MemStats
	interesting := []uint32{0, 1, 0xff, 0xffff, 1 << 20, 1<<20 - 1, 0xffffffff, 0x7fffffff, 4096, 65536}
	for it := 0; it < 20000; it++ {
		s := append([]byte(nil), seeds[r.IntN(len(seeds))]...)
		for k := 0; k < 1+r.IntN(4); k++ {
			p := r.IntN(len(s))
			switch r.IntN(3) {
			case 0:
				s[p] ^= byte(1 << r.IntN(8))
			case 1:
				if p+4 <= len(s) {
					binary.LittleEndian.PutUint32(s[p:], interesting[r.IntN(len(interesting))])
				}
			case 2:
				s[p] = byte(r.IntN(256))
			}
		}
		runtime.ReadMemStats(&ms)
		a0 := ms.TotalAlloc
		st := time.Now()
		var c Columns
		_ = decodeBlock(s, true, &c)
		_ = decodeBlock(s, false, &c)
		_, _ = parseIndex(s)
		d := time.Since(st)
		runtime.ReadMemStats(&ms)
		a := ms.TotalAlloc - a0
		if d > worst || a > worstA {
			if d > worst {
				worst = d
			}
			if a > worstA {
				worstA = a
			}
			h, _ := parseHeader(s, false)
			rows := -1
			if h != nil {
				rows = h.rows
			}
			t.Logf("it %d: %v, %d bytes alloc, rows %d, len %d", it, d, a, rows, len(s))
		}
	}
}
