package flow

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

// familyKeys returns keys that differ from one another only in the bytes
// a narrower key for IPv4 would drop or fold: IPv4 (IPv4-mapped, version
// 4), the same addresses with IPVersion 6 (IPv4-mapped IPv6), IPv6
// addresses ending in the same four bytes, addresses that differ from the
// IPv4-mapped prefix only in bytes 8..11 or 0..7 (bad input, still
// version 4), and one IPv4-mapped address paired with a plain IPv6 one.
func familyKeys() []Key {
	var keys []Key
	add := func(src, dst string, v uint8) {
		for _, port := range []uint16{53, 443} {
			k := mkKey(src, 1024+port, dst, port, ProtoUDP)
			k.IPVersion = v
			keys = append(keys, k)
		}
	}
	for _, a := range []string{"10.0.0.1", "10.0.0.2"} {
		m := "::ffff:" + a
		add(a, "10.0.1.1", 4)
		add(m, "::ffff:10.0.1.1", 6)
		add("2001:db8::"+a, "2001:db8::10.0.1.1", 6)
		add("::fffe:"+a, "::ffff:10.0.1.1", 4)
		add("1::ffff:"+a, "::ffff:10.0.1.1", 4)
		add(m, "2001:db8::1", 6)
	}
	return keys
}

// TestMixedFamiliesMatchReference: packets over familyKeys, both ways, with
// random Expire calls and a table small enough for full evictions, through
// UpdateBatch in random chunks and through Update: the two record streams
// are identical, every key stays a flow of its own (the records sum to a
// map-based model's totals per conversation), and the probe chains hold.
func TestMixedFamiliesMatchReference(t *testing.T) {
	keys := familyKeys()
	seen := map[Key]bool{}
	for _, k := range keys {
		if !k.srcLess() {
			k = k.Reverse()
		}
		if seen[k] {
			t.Fatalf("familyKeys repeats %v", k)
		}
		seen[k] = true
	}
	for _, maxFlows := range []int{len(keys) * 2, len(keys) / 3} {
		rng := rand.New(rand.NewPCG(3, uint64(maxFlows)))
		cfg := Config{MaxFlows: maxFlows, IdleTimeout: 30 * time.Millisecond, HashSeed: 17}
		var a, b []Record
		got := refModel{}
		ta, _ := NewTable(cfg, func(r *Record) { a = append(a, *r) })
		tb, _ := NewTable(cfg, func(r *Record) { b = append(b, *r); got.addRecord(r) })
		want := refModel{}
		pkts := make([]Packet, 20000)
		for i := range pkts {
			p := &pkts[i]
			p.Key = keys[rng.IntN(len(keys))]
			if rng.IntN(2) == 0 {
				p.Key = p.Key.Reverse()
			}
			p.Time, p.Length = int64(i)*int64(time.Millisecond/4), uint32(rng.IntN(1500)+20)
			want.add(p)
		}
		for off := 0; off < len(pkts); {
			n := min(len(pkts)-off, rng.IntN(100))
			for i := off; i < off+n; i++ {
				ta.Update(&pkts[i])
			}
			tb.UpdateBatch(pkts[off : off+n])
			off += n
			if rng.IntN(4) == 0 {
				now := int64(off)*int64(time.Millisecond/4) + rng.Int64N(int64(40*time.Millisecond))
				ta.Expire(now)
				tb.Expire(now)
			}
			checkChains(t, ta)
			checkChains(t, tb)
		}
		ta.Flush(ReasonEOF)
		tb.Flush(ReasonEOF)
		if len(a) != len(b) || ta.Stats() != tb.Stats() {
			t.Fatalf("MaxFlows %d: %d vs %d records; stats\n%+v\n%+v", maxFlows, len(a), len(b), ta.Stats(), tb.Stats())
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("MaxFlows %d: record %d: %+v vs %+v", maxFlows, i, a[i], b[i])
			}
		}
		compareModels(t, got, want)
		if len(want) != len(keys) {
			t.Errorf("model holds %d conversations, want %d", len(want), len(keys))
		}
		st := ta.Stats()
		if st.Evicted[ReasonIdle] == 0 || maxFlows < len(keys) && st.Evicted[ReasonFull] == 0 {
			t.Errorf("MaxFlows %d: sequence did not exercise expiry and eviction: %+v", maxFlows, st)
		}
	}
	// The records keep each key's family: an IPv4-mapped IPv6 key stays
	// version 6 and prints as IPv6, an IPv4 key as IPv4.
	k := keys[2] // ::ffff:10.0.0.1 → ::ffff:10.0.1.1, version 6
	if k.IPVersion != 6 || k.Src() != netip.MustParseAddr("::ffff:10.0.0.1") || keys[0].Src() != netip.MustParseAddr("10.0.0.1") {
		t.Fatalf("familyKeys order: %v %v", k.Src(), keys[0].Src())
	}
}
