package query

import (
	"math/rand/v2"
	"testing"
)

// TestShardedAgainstMap adds rows of 420,000 random groups to a sharded
// table, enough for every shard to grow past hugeMin (its slots then come
// from mappings outside the Go heap, on Linux) and on to 4 MiB, and checks
// every group's sums against a map: a group lost or doubled in a rehash
// would show.
func TestShardedAgainstMap(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var s sharded
	s.init()
	defer s.release()
	want := map[gkey]sums{}
	keys := make([]gkey, 420000)
	for i := range keys {
		keys[i] = gkey{addrs: r.Uint64(), rest: uint64(r.Uint32())}
	}
	for i := range len(keys) + 100000 {
		k := keys[i%len(keys)] // every group, then some again
		if i >= len(keys) {
			k = keys[r.IntN(len(keys))]
		}
		one := sums{Packets: r.Uint64N(100), Bytes: r.Uint64N(1 << 20), RevPackets: 1, RevBytes: 2, Flows: 1}
		s.find(k).add(&one)
		w := want[k]
		w.add(&one)
		want[k] = w
	}
	if s.n != len(want) {
		t.Fatalf("%d groups, want %d", s.n, len(want))
	}
	for k, w := range want {
		if got := *s.find(k); got != w {
			t.Fatalf("group %+v: %+v, want %+v", k, got, w)
		}
	}
	seen := 0
	s.each(func(sl *slot) {
		if _, ok := want[sl.k]; !ok {
			t.Fatalf("group %+v was never added", sl.k)
		}
		seen++
	})
	if seen != len(want) {
		t.Fatalf("each saw %d groups, want %d", seen, len(want))
	}
	for i := range s.t {
		if n := len(s.t[i].slots) * 64; n < 4<<20 {
			t.Fatalf("shard %d is only %d bytes: the mapped slots were not exercised", i, n)
		}
	}
}
