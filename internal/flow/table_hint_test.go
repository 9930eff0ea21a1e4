package flow

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestScanFPs: the SWAR scan agrees with a byte-by-byte one on random
// windows (few distinct values, so matches, repeats and zeros are common)
// and on every single-match position.
func TestScanFPs(t *testing.T) {
	ref := func(w *[fpPad + 1]uint8, fp uint8) uint32 {
		for i, f := range w {
			if f == fp {
				return uint32(i)
			}
		}
		return fpPad + 1
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var w [fpPad + 1]uint8
	for range 200_000 {
		for i := range w {
			w[i] = uint8(rng.IntN(4)) * 0x55 // 0x00, 0x55, 0xaa, 0xff
		}
		fp := uint8(rng.IntN(4))*0x55 | 1
		if rng.IntN(2) == 0 {
			w[rng.IntN(len(w))] = fp
		}
		if got, want := scanFPs(&w, fp), ref(&w, fp); got != want {
			t.Fatalf("scanFPs(%x, %#x) = %d, want %d", w, fp, got, want)
		}
	}
	for fp := 1; fp < 256; fp += 2 {
		for pos := range len(w) + 1 {
			for i := range w {
				w[i] = uint8(fp) - 1 // one below: a borrow-prone neighbour
			}
			if pos < len(w) {
				w[pos] = uint8(fp)
			}
			if got := scanFPs(&w, uint8(fp)); got != uint32(pos) {
				t.Fatalf("fp %#x at %d: scanFPs = %d", fp, pos, got)
			}
		}
	}
}

// hintKeys returns keys chosen by their hash in a table of n slots with
// the given seed: a pair with the same 32-bit hash (so the same home,
// fingerprint and tag: a hint at the pair's other flow passes the tag check
// and only the key tells them apart), 10 with the same home (displaced up
// to 9 slots: past the 8 fingerprints a scan reads) and 5 whose home is the
// last slot (their probes wrap to slot 0; the scan reads padding).
func hintKeys(t *testing.T, n uint32, seed uint64) (pair [2]Key, sameHome, wrap []Key) {
	t.Helper()
	tb := &Table{n: n}
	tb.setSeed(seed)
	hash := func(k *Key) uint32 {
		var r pending
		tb.prep(k, &r)
		return r.h
	}
	key := func(i int) Key { // i's bits spread over both addresses and the ports
		x := uint64(i+1) * 0x9e3779b97f4a7c15
		var k Key
		SetAddr4(&k.SrcAddr, []byte{10, byte(x), byte(x >> 8), byte(x >> 16)})
		SetAddr4(&k.DstAddr, []byte{10, byte(x >> 24), byte(x >> 32), byte(x >> 40)})
		k.SrcPort, k.DstPort, k.Proto, k.IPVersion = uint16(x>>48), 53, ProtoUDP, 4
		return k
	}
	seen := make(map[uint32]int)
	found := false
	for i := 0; i < 1<<22 && !found; i++ { // ~300k keys make a 32-bit collision all but certain
		k := key(i)
		h := hash(&k)
		if j, ok := seen[h]; ok {
			pair, found = [2]Key{key(j), k}, true
		}
		seen[h] = i
	}
	if !found {
		t.Fatal("no two keys with one hash")
	}
	byHome := make(map[uint32][]Key)
	for i := 0; len(sameHome) == 0 || len(wrap) == 0; i++ {
		k := key(1<<22 + i)
		home := fastrange(hash(&k), n)
		byHome[home] = append(byHome[home], k)
		if l := byHome[home]; len(l) == 10 && len(sameHome) == 0 && home < n-20 {
			sameHome = l
		}
		if l := byHome[n-1]; len(l) == 5 && len(wrap) == 0 {
			wrap = l
		}
	}
	return pair, sameHome, wrap
}

// TestUpdateBatchHints: UpdateBatch's slot hints are only hints. Flows the
// scan cannot place (another flow of the same hash first in the window, a
// probe past the 8 fingerprints it reads, a probe that wraps past the
// table's end) and flows the hint misses because earlier packets of the
// batch evicted or moved them (full evictions) are all counted as Update
// counts them: same records, same stats. Both ways of hinting: a sparse
// table (home slots) and one past 1/sparse full (scan).
func TestUpdateBatchHints(t *testing.T) {
	const maxFlows = 192
	n := uint32(maxFlows + maxFlows/3 + 1)
	pair, sameHome, wrap := hintKeys(t, n, 7)
	for _, filler := range []int{0, 60} { // 17 flows: sparse; 77: scanned
		cfg := Config{MaxFlows: maxFlows, IdleTimeout: time.Hour, HashSeed: 7}
		var a, b []Record
		ta, _ := NewTable(cfg, func(r *Record) { a = append(a, *r) })
		tb, _ := NewTable(cfg, func(r *Record) { b = append(b, *r) })
		keys := append(append(append([]Key{}, pair[:]...), sameHome...), wrap...)
		for i := range filler {
			keys = append(keys, mkKey("10.2.0.1", uint16(i), "10.2.0.2", 53, ProtoUDP))
		}
		rng := rand.New(rand.NewPCG(uint64(filler), 1))
		now := int64(0)
		pkts := func(m int, keys []Key) []Packet {
			ps := make([]Packet, m)
			for i := range ps {
				now += int64(time.Microsecond)
				ps[i] = Packet{Key: keys[rng.IntN(len(keys))], Time: now, Length: uint32(1 + rng.IntN(1500)), TCPFlags: TCPAck}
				if rng.IntN(2) == 0 {
					ps[i].Key = ps[i].Key.Reverse()
				}
			}
			return ps
		}
		both := func(ps []Packet) {
			for i := range ps {
				ta.Update(&ps[i])
			}
			tb.UpdateBatch(ps)
		}
		for _, k := range keys { // every flow in, in this order: the pair's second displaced by its first
			both([]Packet{{Key: k, Time: now, Length: 1}})
		}
		if want := filler > 0; tb.scanAhead() != want {
			t.Fatalf("%d flows in %d slots: scan %v, want %v", tb.Len(), tb.n, !want, want)
		}
		// The layout the cases need: the pair at home and home+1 with equal
		// tags, a flow 8 or more slots from home, a flow wrapped to slot 0.
		h := tb.lookup(&pair[0]).tag
		i0, i1 := fastrange(h, n), (fastrange(h, n)+1)%n
		if tb.slots[i0].tag != h || tb.slots[i1].tag != h || &tb.slots[i1] != tb.lookup(&pair[1]) {
			t.Fatalf("pair not at home and home+1 with one tag")
		}
		far, wrapped := false, false
		for i := range tb.slots {
			if s := &tb.slots[i]; s.tag != 0 {
				d := (uint32(i) + n - fastrange(s.tag, n)) % n
				far = far || d >= fpPad+1
				wrapped = wrapped || uint32(i) < fastrange(s.tag, n)
			}
		}
		if !far || !wrapped {
			t.Fatalf("no flow past the scan's window (%v) or wrapped (%v)", far, wrapped)
		}
		for range 50 {
			both(pkts(rng.IntN(200), keys))
			checkChains(t, tb)
		}
		// A burst of new flows: full evictions in the middle of batches move
		// and remove flows whose hints are already taken.
		for i := range 20 {
			fresh := make([]Key, 40)
			for j := range fresh {
				fresh[j] = mkKey("10.3.0.1", uint16(i*40+j), "10.3.0.2", 80, ProtoTCP)
			}
			both(pkts(150, append(fresh, keys...)))
			checkChains(t, tb)
		}
		ta.Flush(ReasonEOF)
		tb.Flush(ReasonEOF)
		if ta.Stats() != tb.Stats() || len(a) != len(b) {
			t.Fatalf("filler %d: %d vs %d records; stats\n%+v\n%+v", filler, len(a), len(b), ta.Stats(), tb.Stats())
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("filler %d: record %d: %+v vs %+v", filler, i, a[i], b[i])
			}
		}
		if ta.Stats().Evicted[ReasonFull] == 0 {
			t.Fatalf("filler %d: no full evictions: %+v", filler, ta.Stats())
		}
	}
}
