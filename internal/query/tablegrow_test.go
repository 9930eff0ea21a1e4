package query

import (
	"math/rand/v2"
	"testing"

	"github.com/weir-dev/weir/internal/prefetch"
)

// checkProbes fails unless every group of t is found by probing from its
// home: every slot from its home to its own is full.
func checkProbes(t *testing.T, tb *table) {
	t.Helper()
	n := 0
	for x := range tb.slots {
		if tb.slots[x].c.Flows == 0 {
			continue
		}
		n++
		for i := tb.slots[x].k.hash() & tb.mask; i != uint64(x); i = (i + 1) & tb.mask {
			if tb.slots[i].c.Flows == 0 {
				t.Fatalf("group at slot %d of %d: empty slot %d between it and its home", x, len(tb.slots), i)
			}
		}
	}
	if n != tb.n {
		t.Fatalf("%d groups in the slots, the table counts %d", n, tb.n)
	}
}

// TestSplitInPlace doubles tables in place (Go heap slots, copied into
// twice as many, then split) at load factors up to the limit, with groups
// chosen to crowd the last slots: their runs wrap to the first slots in
// the old table, and in the new one the probes of those homed at the top
// would wrap too (put back last). Every group must keep its sums and be
// found from its home.
func TestSplitInPlace(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	late := 0
	for round := range 40 {
		old := 1 << (4 + round%7)
		var tb table
		tb.slots, tb.mask = make([]slot, old), uint64(old-1)
		want := map[gkey]sums{}
		limit := old * 7 / 10
		crowd := round%2 == 0 // half the rounds: most groups homed in the old table's last 8 slots
		for len(want) < limit-r.IntN(limit/4+1) {
			k := gkey{addrs: r.Uint64(), rest: uint64(r.Uint32()), t: int64(r.Uint32())}
			if h := k.hash(); crowd && h&uint64(old-1) < uint64(old-8) && r.IntN(4) != 0 {
				continue
			}
			c := sums{Packets: r.Uint64(), Bytes: r.Uint64(), Flows: 1 + r.Uint64N(9)}
			*tb.find(k) = c
			want[k] = c
		}
		checkProbes(t, &tb)
		p := tb.emptySlot()
		if p < 0 {
			t.Fatal("a table at its load limit has no empty slot")
		}
		big := make([]slot, 2*old)
		copy(big, tb.slots)
		tb.slots = big
		late += tb.split(old, p)
		if tb.mask != uint64(2*old-1) {
			t.Fatalf("mask %x after doubling %d", tb.mask, old)
		}
		checkProbes(t, &tb)
		for k, w := range want {
			if got := *tb.find(k); got != w {
				t.Fatalf("round %d: group %+v: %+v, want %+v", round, k, got, w)
			}
		}
		if tb.n != len(want) {
			t.Fatalf("round %d: %d groups, want %d", round, tb.n, len(want))
		}
	}
	if late == 0 {
		t.Fatal("no probe wrapped from the last slot: the groups put back last were not exercised")
	}
}

// TestGrowMidBatch adds groups the way aggregate does, a batch of slot
// addresses prefetched ahead of the finds, in one table that grows from
// the Go heap through mapped slots past hugePage bytes (in place on
// Linux) while batches are under way: a prefetched address then points
// into memory the growth moved or freed, which must be harmless.
func TestGrowMidBatch(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var s sharded
	s.init()
	defer s.release()
	want := map[gkey]sums{}
	keys := make([]gkey, 3*shards*(8<<20)/64/4) // each shard's table reaches 8 MiB of slots or more
	for i := range keys {
		keys[i] = gkey{addrs: r.Uint64()}
	}
	hs := make([]uint64, len(keys))
	for i := range keys {
		hs[i] = keys[i].hash()
	}
	var pf [aheadRows]uintptr
	grew := 0
	for lo := 0; lo < len(keys); lo += aheadRows {
		hi := min(lo+aheadRows, len(keys))
		prefetch.Lines(slotAddrs(pf[:0], &s, hs[lo:hi]))
		for j := lo; j < hi; j++ {
			before := len(s.shard(hs[j]).slots)
			one := sums{Packets: uint64(j), Bytes: 3, Flows: 1}
			s.findH(keys[j], hs[j]).add(&one)
			if len(s.shard(hs[j]).slots) != before && j != lo {
				grew++
			}
			w := want[keys[j]]
			w.add(&one)
			want[keys[j]] = w
		}
	}
	if grew == 0 {
		t.Fatal("no table grew in the middle of a batch")
	}
	for i := range s.t {
		checkProbes(t, &s.t[i])
		if len(s.t[i].slots)*64 < 8<<20 {
			t.Fatalf("shard %d has %d slots: it never grew past the in-place size", i, len(s.t[i].slots))
		}
	}
	if s.n != len(want) {
		t.Fatalf("%d groups, want %d", s.n, len(want))
	}
	for k, w := range want {
		if got := *s.find(k); got != w {
			t.Fatalf("group %+v: %+v, want %+v", k, got, w)
		}
	}
}
