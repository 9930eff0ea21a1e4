package ebpf

import (
	"math/rand/v2"
	"testing"
)

// TestCarry: counting packets into the shared word as the kernel does
// (carry.add, the ring's path) gives the exact sums for any carry points
// above the largest packet, and the word's fields never reach their
// carry points.
func TestCarry(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []carry{defaultCarry, {packets: 1, bytes: 65536}, {packets: 3, bytes: 2048}, {packets: 1000, bytes: 1 << 20}} {
		var v flowFlowVal
		var packets, bytes uint64
		for range 100_000 {
			n := uint32(rng.IntN(1500) + 1)
			if c.bytes > 65536 {
				n = uint32(rng.IntN(65535) + 1)
			}
			c.add(&v, n)
			packets++
			bytes += uint64(n)
			if v.Pb>>pbShift >= c.packets || v.Pb&(1<<pbShift-1) >= c.bytes {
				t.Fatalf("carry %+v: word %#x holds a field at its carry point", c, v.Pb)
			}
		}
		if p, b := c.counts(&v); p != packets || b != bytes {
			t.Errorf("carry %+v: counts %d/%d, want %d/%d", c, p, b, packets, bytes)
		}
	}
	// The defaults carry at half of each field: 24 bits of packets, 40 of bytes.
	v := flowFlowVal{Pb: (1<<23-1)<<pbShift | (1<<39 - 10)}
	defaultCarry.add(&v, 20)
	if p, b := defaultCarry.counts(&v); p != 1<<23 || b != 1<<39+10 || v.Carry != 1<<32|1 {
		t.Errorf("counts %d/%d carry %#x after both fields reached their carry points", p, b, v.Carry)
	}
}
