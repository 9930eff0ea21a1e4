package flow

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// checkStage runs the hash stage over ps and compares every ring entry with
// prep's: the batch paths find a flow only if both hash and canonicalize a
// key alike (Update inserts with prep).
func checkStage(t *testing.T, tb *Table, ps []Packet) {
	t.Helper()
	for _, stage := range []func(*Table, []Packet, *pending){(*Table).stagePackets} {
		ring := make([]pending, len(ps)+1)
		sentinel := pending{h: 0xdeadbeef, dir: 7}
		ring[len(ps)] = sentinel
		if len(ps) > 0 {
			stage(tb, ps, &ring[0])
		}
		for i := range ps {
			var want pending
			tb.prep(&ps[i].Key, &want)
			if ring[i] != want {
				t.Fatalf("key %+v: stage %+v, prep %+v", ps[i].Key, ring[i], want)
			}
		}
		if ring[len(ps)] != sentinel {
			t.Fatalf("stage of %d keys wrote past them: %+v", len(ps), ring[len(ps)])
		}
	}
}

// TestStageMatchesPrep: the assembly hash stage equals prep on keys that
// differ in few bits (every step of the endpoint order is reached, both
// directions, equal endpoints), on random keys, for Packet and Aggregate
// strides and for every chunk length up to 2·prefetchDistance.
func TestStageMatchesPrep(t *testing.T) {
	tb, _ := newTable(t, Config{MaxFlows: 1000})
	rng := rand.New(rand.NewPCG(5, 6))
	ps := make([]Packet, 4096)
	for i := range ps {
		k := &ps[i].Key
		if i%2 == 0 {
			nearKey(rng, k)
		} else {
			b := (*[40]byte)(unsafe.Pointer(k))
			for j := range b {
				b[j] = byte(rng.Uint32())
			}
		}
		k.Proto, k.ICMPType, k.ICMPCode, k.IPVersion = byte(i), byte(i>>8), 0xff, 6
	}
	checkStage(t, tb, ps)
	for n := 0; n <= 2*prefetchDistance; n++ {
		checkStage(t, tb, ps[n:2*n])
	}
	// Aggregates: the same keys at Aggregate's stride.
	as := make([]Aggregate, 300)
	for i := range as {
		as[i].Key = ps[i].Key
	}
	ring := make([]pending, len(as))
	tb.stageAggregates(as, &ring[0])
	for i := range as {
		var want pending
		tb.prep(&as[i].Key, &want)
		if ring[i] != want {
			t.Fatalf("aggregate %d: stage %+v, prep %+v", i, ring[i], want)
		}
	}
}

// FuzzStage: for any 40 key bytes and seed, the hash stage equals prep, and
// the key and its reverse share hash and words with opposite directions
// (unless both endpoints are equal).
func FuzzStage(f *testing.F) {
	f.Add(make([]byte, 40), uint64(1))
	f.Add([]byte("0123456789abcdef0123456789abcdefPPQQ\x06\x00\x00\x04"), uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, seed uint64) {
		if len(b) < 40 {
			return
		}
		tb, err := NewTable(Config{MaxFlows: 64, HashSeed: seed | 1}, func(*Record) {})
		if err != nil {
			t.Fatal(err)
		}
		ps := make([]Packet, 2)
		copy((*[40]byte)(unsafe.Pointer(&ps[0].Key))[:], b)
		ps[1].Key = ps[0].Key.Reverse()
		checkStage(t, tb, ps)
		var r0, r1 pending
		tb.prep(&ps[0].Key, &r0)
		tb.prep(&ps[1].Key, &r1)
		if r0.w != r1.w || r0.h != r1.h || r0.h&1 == 0 {
			t.Fatalf("key and reverse: %+v, %+v", r0, r1)
		}
		same := ps[0].Key.SrcAddr == ps[0].Key.DstAddr && ps[0].Key.SrcPort == ps[0].Key.DstPort
		if !same && r0.dir == r1.dir {
			t.Fatalf("key and reverse: both dir %d", r0.dir)
		}
	})
}
