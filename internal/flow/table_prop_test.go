package flow

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"
)

// side is a reference total for one sender of one conversation.
type side struct {
	pkts, bytes uint64
	flags       uint8
}

// convo is the reference model's totals for one conversation, keyed by the
// canonical key and indexed by "sender is the lower endpoint".
type convo struct {
	by         [2]side // [0]: sent by the lower endpoint
	start, end int64
}

// refModel is a naive map-based model: it only sums, and knows nothing of
// slots, timeouts or orientation.
type refModel map[Key]*convo

func (m refModel) add(p *Packet) {
	k, d := p.Key, 0
	if !k.srcLess() {
		k, d = k.Reverse(), 1
	}
	c := m[k]
	if c == nil {
		c = &convo{start: p.Time, end: p.Time}
		m[k] = c
	}
	c.by[d].pkts++
	c.by[d].bytes += uint64(p.Length)
	c.by[d].flags |= p.TCPFlags
	c.start, c.end = min(c.start, p.Time), max(c.end, p.Time)
}

// addRecord folds an emitted record into the same shape as refModel.
func (m refModel) addRecord(r *Record) {
	k, ini := r.Key, 0 // ini: canonical index of the initiator
	if !k.srcLess() {
		k, ini = k.Reverse(), 1
	}
	c := m[k]
	if c == nil {
		c = &convo{start: r.Start, end: r.End}
		m[k] = c
	}
	c.by[ini].pkts += r.Packets
	c.by[ini].bytes += r.Bytes
	c.by[ini].flags |= r.TCPFlags
	c.by[1-ini].pkts += r.RevPackets
	c.by[1-ini].bytes += r.RevBytes
	c.by[1-ini].flags |= r.RevTCPFlags
	c.start, c.end = min(c.start, r.Start), max(c.end, r.End)
}

// TestDeltasSumToTotals: for a random packet sequence with random Expire
// calls, the records emitted per conversation sum to the reference model's
// totals per direction, with the same flags and time span.
func TestDeltasSumToTotals(t *testing.T) {
	for _, c := range []struct {
		name     string
		maxFlows int
		keys     int
	}{
		{"roomy", 1000, 60},
		{"full-pressure", 16, 60},
		{"tiny", 1, 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(c.maxFlows)))
			cfg := Config{MaxFlows: c.maxFlows, IdleTimeout: 5 * time.Second,
				ActiveTimeout: 3 * time.Second, EndLinger: time.Second, HashSeed: 99}
			got := refModel{}
			tb, err := NewTable(cfg, func(r *Record) {
				if r.Packets+r.RevPackets == 0 {
					t.Errorf("empty record emitted: %+v", r)
				}
				got.addRecord(r)
			})
			if err != nil {
				t.Fatal(err)
			}
			tb.pktLimit = 4 // exercise wrap reports too
			want := refModel{}
			keys := make([]Key, c.keys)
			for i := range keys {
				proto := []uint8{ProtoTCP, ProtoUDP, ProtoICMP}[i%3]
				a := fmt.Sprintf("10.0.0.%d", rng.IntN(4)+1)
				b := fmt.Sprintf("10.0.1.%d", rng.IntN(4)+1)
				if i%2 == 0 {
					a = fmt.Sprintf("2001:db8::%x", rng.IntN(4)+1)
					b = fmt.Sprintf("2001:db8::1:%x", rng.IntN(4)+1)
				}
				keys[i] = mkKey(a, uint16(rng.IntN(3)), b, uint16(rng.IntN(3)), proto)
				if proto == ProtoICMP {
					keys[i].SrcPort, keys[i].DstPort, keys[i].ICMPType = 0, 0, uint8(i%4)
				}
			}
			now := int64(1000 * sec)
			for n := 0; n < 5000; n++ {
				now += rng.Int64N(20e6) - 2e6 // mostly forward, sometimes back
				var p Packet
				p.Key = keys[rng.IntN(len(keys))]
				if rng.IntN(2) == 0 {
					p.Key = p.Key.Reverse()
				}
				p.Time, p.Length, p.Iface = now, uint32(rng.IntN(1500)+20), uint16(rng.IntN(3))
				if p.Key.Proto == ProtoTCP {
					p.TCPFlags = uint8(rng.IntN(256)) &^ (TCPFin | TCPRst)
					if x := rng.IntN(40); x == 0 {
						p.TCPFlags |= TCPFin
					} else if x == 1 {
						p.TCPFlags |= TCPRst
					}
				}
				p.Role = Role(max(0, rng.IntN(8)-5)) // mostly RoleUnknown
				want.add(&p)
				tb.Update(&p)
				if rng.IntN(30) == 0 {
					tb.Expire(now + rng.Int64N(int64(8*sec)))
				}
				if tb.Len() > c.maxFlows {
					t.Fatalf("Len %d > MaxFlows", tb.Len())
				}
			}
			tb.Flush(ReasonEOF)
			compareModels(t, got, want)
			st := tb.Stats()
			var pkts uint64
			for _, cv := range got {
				pkts += cv.by[0].pkts + cv.by[1].pkts
			}
			if st.Packets != 5000 || pkts != 5000 || tb.Len() != 0 {
				t.Errorf("Stats.Packets %d emitted %d Len %d, want 5000, 5000, 0", st.Packets, pkts, tb.Len())
			}
			var removed uint64
			for _, e := range st.Evicted {
				removed += e
			}
			if removed != st.FlowsCreated {
				t.Errorf("flows removed %d != created %d", removed, st.FlowsCreated)
			}
			t.Logf("stats %+v", st)
		})
	}
}

func compareModels(t *testing.T, got, want refModel) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d conversations emitted, want %d", len(got), len(want))
	}
	for k, w := range want {
		g := got[k]
		if g == nil {
			t.Errorf("%v:%d ↔ %v:%d never emitted", k.Src(), k.SrcPort, k.Dst(), k.DstPort)
			continue
		}
		if *g != *w {
			t.Errorf("%v:%d ↔ %v:%d/%d: got %+v want %+v", k.Src(), k.SrcPort, k.Dst(), k.DstPort, k.Proto, *g, *w)
		}
	}
}

// TestChurnBackwardShift: a small table under random inserts, idle expiry
// and full evictions; after every step each live flow is found, every
// flow the table dropped was emitted, and every probe chain is unbroken.
func TestChurnBackwardShift(t *testing.T) {
	for _, c := range []struct{ seed, maxFlows uint64 }{{1, 48}, {2, 48}, {3, 48}, {4, 1000}} {
		seed := c.seed // 1000 flows over 200 keys: mostly empty blocks for Expire to skip
		rng := rand.New(rand.NewPCG(seed, 77))
		live := map[Key]bool{}
		tb, err := NewTable(Config{MaxFlows: int(c.maxFlows), IdleTimeout: 10 * time.Second, HashSeed: seed},
			func(r *Record) {
				k := r.Key
				if !k.srcLess() {
					k = k.Reverse()
				}
				if !live[k] {
					t.Fatalf("emitted a flow not live: %+v", r)
				}
				delete(live, k)
			})
		if err != nil {
			t.Fatal(err)
		}
		now := int64(0)
		for step := 0; step < 20000; step++ {
			if rng.IntN(10) == 0 {
				now += int64(sec)
				tb.Expire(now)
			} else {
				k := mkKey("10.0.0.1", uint16(rng.IntN(200)), "10.0.0.2", 7, ProtoUDP)
				p := Packet{Key: k, Time: now - rng.Int64N(int64(5*sec)), Length: 1}
				tb.Update(&p)
				if !k.srcLess() {
					k = k.Reverse()
				}
				live[k] = true
			}
			if tb.Len() != len(live) {
				t.Fatalf("seed %d step %d: Len %d, model %d", seed, step, tb.Len(), len(live))
			}
			for k := range live {
				if tb.lookup(&k) == nil {
					t.Fatalf("seed %d step %d: live flow %v lost", seed, step, k.SrcPort)
				}
			}
			checkChains(t, tb)
		}
	}
}

// checkChains asserts the linear-probing invariant: every slot between a
// live flow's home and its position is occupied, and each live flow's
// stEmpty bit says whether it has counted packets since its last report.
func checkChains(t *testing.T, tb *Table) {
	t.Helper()
	n := tb.n
	if len(tb.tags) != int(n) || len(tb.slots) != int(n) {
		t.Fatalf("%d tags, %d slots, n %d", len(tb.tags), len(tb.slots), n)
	}
	for i := range tb.tags {
		if tb.tags[i] != tb.slots[i].tag {
			t.Fatalf("slot %d: tag index %#x, slot tag %#x", i, tb.tags[i], tb.slots[i].tag)
		}
	}
	count := 0
	for i := uint32(0); i < n; i++ {
		if tb.slots[i].tag == 0 {
			continue
		}
		count++
		if s := &tb.slots[i]; (s.state&stEmpty != 0) != (s.pkts[0]|s.pkts[1] == 0) {
			t.Fatalf("slot %d: state %#x with packets %v: stEmpty out of step", i, s.state, s.pkts)
		}
		for j := fastrange(tb.slots[i].tag, n); j != i; j = (j + 1) % n {
			if tb.slots[j].tag == 0 {
				t.Fatalf("slot %d: hole at %d in its probe chain", i, j)
			}
		}
	}
	if count != tb.Len() {
		t.Fatalf("%d occupied slots, Len %d", count, tb.Len())
	}
	for b := range tb.blocks {
		live := 0
		for i := b * blockSlots; i < min((b+1)*blockSlots, int(n)); i++ {
			if tb.slots[i].tag != 0 {
				live++
			}
		}
		if int(tb.blocks[b]) != live {
			t.Fatalf("block %d counts %d live flows, holds %d", b, tb.blocks[b], live)
		}
	}
}

// TestZeroAllocs: Update (hits, inserts with full evictions, end/linger) and
// Expire (idle, active, end emits) allocate nothing.
func TestZeroAllocs(t *testing.T) {
	var emitted int
	tb, err := NewTable(Config{MaxFlows: 1024, ActiveTimeout: time.Second}, func(*Record) { emitted++ })
	if err != nil {
		t.Fatal(err)
	}
	pkts := make([]Packet, 4096)
	for i := range pkts {
		pkts[i] = pk("10.0.0.1", uint16(i), "10.0.0.2", 80, ProtoTCP, int64(i), 100, TCPAck, 0)
		if i%7 == 0 {
			pkts[i].TCPFlags |= TCPFin
			pkts[i].Key = pkts[i].Key.Reverse()
		}
	}
	i := 0
	if a := testing.AllocsPerRun(10000, func() {
		tb.Update(&pkts[i%len(pkts)])
		i++
	}); a != 0 {
		t.Errorf("Update: %v allocs/op", a)
	}
	now := int64(0)
	if a := testing.AllocsPerRun(100, func() {
		now += int64(sec) / 2
		for j := 0; j < 50; j++ {
			tb.Update(&pkts[(i+j)%len(pkts)])
		}
		i += 50
		tb.Expire(now)
	}); a != 0 {
		t.Errorf("Expire: %v allocs/op", a)
	}
	if tb.Stats().FullPasses == 0 || emitted == 0 {
		t.Errorf("test did not exercise evictions: %+v", tb.Stats())
	}
}

// TestUpdateBatchSameAsUpdate: the same random packets through Update and
// through each of UpdateBatch's paths (random chunk sizes, Expire between
// chunks) give the same records in the same order and the same stats. Two
// mixes: "flags", random TCP flags and Role hints (mostly add's special
// cases); "plain", mostly plain ACKs (applyHit's inline case) with every
// case it hands to add mixed in: copies at other interfaces (DedupIfaces),
// time going back, idle gaps, counters at a lowered wrap limit, FIN, RST
// and Role hints.
func TestUpdateBatchSameAsUpdate(t *testing.T) {
	for _, path := range []struct {
		name  string
		batch func(*Table, []Packet)
	}{{"UpdateBatch", (*Table).UpdateBatch}, {"small", (*Table).updateBatchSmall}, {"big", (*Table).updateBatchBig}} {
		for _, plain := range []bool{false, true} {
			name := path.name + "/flags"
			if plain {
				name = path.name + "/plain"
			}
			t.Run(name, func(t *testing.T) { updateBatchSameAsUpdate(t, path.batch, plain) })
		}
	}
}

func updateBatchSameAsUpdate(t *testing.T, batch func(*Table, []Packet), plain bool) {
	rng := rand.New(rand.NewPCG(11, 12))
	var a, b []Record
	cfg := Config{MaxFlows: 24, IdleTimeout: 2 * time.Second, ActiveTimeout: 50 * time.Millisecond, HashSeed: 5}
	if plain {
		cfg.DedupIfaces, cfg.DedupWindow = true, 3*time.Millisecond
		cfg.IdleTimeout = 40 * time.Millisecond
	}
	ta, _ := NewTable(cfg, func(r *Record) { a = append(a, *r) })
	tb, _ := NewTable(cfg, func(r *Record) { b = append(b, *r) })
	if plain {
		ta.pktLimit, tb.pktLimit = 2, 2
	}
	pkts := make([]Packet, 20000)
	for i := range pkts {
		p := pk("10.0.0.1", uint16(rng.IntN(30)), "10.0.0.2", 80, ProtoTCP, int64(i)*int64(time.Millisecond), uint32(i), uint8(rng.IntN(256)), Role(rng.IntN(3)))
		if rng.IntN(2) == 0 {
			p.Key = p.Key.Reverse()
		}
		if plain {
			p.TCPFlags, p.Role = TCPAck, RoleUnknown
			switch rng.IntN(40) {
			case 0:
				p.TCPFlags |= TCPFin
			case 1:
				p.TCPFlags |= TCPRst
			case 2:
				p.Role = Role(1 + rng.IntN(2))
			}
			p.Time -= rng.Int64N(int64(30 * time.Millisecond)) // back in time, sometimes before a record's start
			if rng.IntN(4) == 0 {
				p.Iface = uint16(rng.IntN(3)) // a copy at another interface, or a route change
			}
		}
		pkts[i] = p
	}
	for off := 0; off < len(pkts); {
		n := min(len(pkts)-off, rng.IntN(100))
		for i := off; i < off+n; i++ {
			ta.Update(&pkts[i])
		}
		batch(tb, pkts[off:off+n])
		off += n
		now := int64(off) * int64(time.Millisecond)
		ta.Expire(now)
		tb.Expire(now)
		checkChains(t, ta)
		checkChains(t, tb)
	}
	ta.Flush(ReasonEOF)
	tb.Flush(ReasonEOF)
	if len(a) != len(b) || ta.Stats() != tb.Stats() {
		t.Fatalf("%d vs %d records; stats\n%+v\n%+v", len(a), len(b), ta.Stats(), tb.Stats())
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("record %d: %+v vs %+v", i, a[i], b[i])
		}
	}
	if st := ta.Stats(); st.Evicted[ReasonFull] == 0 || st.Records[ReasonActive] == 0 || st.PortReuses == 0 {
		t.Errorf("sequence did not exercise evictions: %+v", st)
	}
	if st := ta.Stats(); plain && (st.Duplicates == 0 || st.WrapReports == 0 || st.Evicted[ReasonIdle] == 0 || st.Evicted[ReasonEnd] == 0) {
		t.Errorf("plain mix did not reach every case add handles: %+v", st)
	}
	if a := testing.AllocsPerRun(100, func() { batch(tb, pkts[:200]) }); a != 0 {
		t.Errorf("%v allocs/op", a)
	}
}

// TestTagIndexBatchChurn: random batches (UpdateBatch, chunks of 0 to 300
// packets: shorter and longer than its pipeline), expiries and full-table
// evictions, against a map of each conversation's packet and byte totals.
// After every step each live flow is found and the tag index matches the
// slots; at the end the records emitted sum to the model's totals. The big
// table (over hugeMin) lives in its own mapping on Linux. Every table
// starts on UpdateBatch's two-stage path; the big one grows onto the
// three-stage one.
func TestTagIndexBatchChurn(t *testing.T) {
	for _, c := range []struct {
		seed             uint64
		maxFlows, keys   int
		steps, checkEach int
		idle             time.Duration
	}{{1, 48, 200, 400, 1, 10 * time.Second}, {2, 1000, 3000, 400, 1, 10 * time.Second},
		{3, 40_000, 60_000, 400, 100, time.Hour}} {
		start := time.Now()
		rng := rand.New(rand.NewPCG(c.seed, 99))
		type tot struct{ pkts, bytes uint64 }
		model, got := map[Key]tot{}, map[Key]tot{}
		live, evicted := map[Key]bool{}, map[Key]bool{}
		canon := func(k Key) Key {
			if !k.srcLess() {
				return k.Reverse()
			}
			return k
		}
		tb, err := NewTable(Config{MaxFlows: c.maxFlows, IdleTimeout: c.idle, HashSeed: c.seed},
			func(r *Record) {
				k := canon(r.Key)
				if r.EndReason != ReasonActive {
					if !live[k] && !evicted[k] { // evicted: one the batch running brought back
						t.Fatalf("emitted a flow not live: %+v", r)
					}
					delete(live, k)
					evicted[k] = true
				}
				g := got[k]
				got[k] = tot{g.pkts + r.Packets + r.RevPackets, g.bytes + r.Bytes + r.RevBytes}
			})
		if err != nil {
			t.Fatal(err)
		}
		if c.maxFlows == 40_000 && tb.MemoryBytes() < hugeMin {
			t.Fatalf("table of %d B: not past hugeMin", tb.MemoryBytes())
		}
		if big := tb.n > smallTable; big != (c.maxFlows == 40_000) {
			t.Fatalf("%d slots: past smallTable %v, want %v", tb.n, big, !big)
		}
		paths := map[int]bool{}
		now := int64(0)
		pkts := make([]Packet, 300)
		for step := 0; step < c.steps; step++ {
			if rng.IntN(8) == 0 {
				now += int64(sec)
				tb.Expire(now)
			}
			n := rng.IntN(len(pkts) + 1)
			for i := range pkts[:n] {
				k := mkKey("10.0.0.1", uint16(rng.IntN(c.keys)), "10.0.0.2", uint16(7+rng.IntN(2)), ProtoUDP)
				if rng.IntN(2) == 0 {
					k = k.Reverse()
				}
				pkts[i] = Packet{Key: k, Time: now - rng.Int64N(int64(5*sec)), Length: uint32(1 + rng.IntN(1500))}
				ck := canon(k)
				m := model[ck]
				model[ck] = tot{m.pkts + 1, m.bytes + uint64(pkts[i].Length)}
			}
			// Each flow of the batch is live while the batch runs; one the
			// batch's full evictions removed (emitted) is live again only
			// if a later packet of the batch brought it back.
			clear(evicted)
			for i := range pkts[:n] {
				live[canon(pkts[i].Key)] = true
			}
			paths[tb.batchPath()] = true
			tb.UpdateBatch(pkts[:n])
			for k := range evicted {
				if tb.lookup(&k) != nil {
					live[k] = true
				}
			}
			if step%c.checkEach != 0 {
				continue
			}
			if tb.Len() != len(live) {
				t.Fatalf("seed %d step %d: Len %d, model %d", c.seed, step, tb.Len(), len(live))
			}
			for k := range live {
				if tb.lookup(&k) == nil {
					t.Fatalf("seed %d step %d: live flow %v lost", c.seed, step, k.SrcPort)
				}
			}
			checkChains(t, tb)
		}
		tb.Flush(ReasonEOF)
		checkChains(t, tb)
		if len(got) != len(model) {
			t.Fatalf("seed %d: records for %d conversations, model has %d", c.seed, len(got), len(model))
		}
		for k, m := range model {
			if got[k] != m {
				t.Fatalf("seed %d: %v: records sum to %+v, model %+v", c.seed, k, got[k], m)
			}
		}
		if st := tb.Stats(); st.Evicted[ReasonFull] == 0 {
			t.Errorf("seed %d: no full evictions: %+v", c.seed, st)
		}
		want := map[int]bool{pathSmall: true} // the paths each table's occupancy takes it through
		if c.maxFlows == 40_000 {
			want[pathBig] = true
		}
		if !maps.Equal(paths, want) {
			t.Errorf("seed %d: UpdateBatch paths taken %v, want %v", c.seed, paths, want)
		}
		t.Logf("seed %d: %d flows: %v", c.seed, c.maxFlows, time.Since(start))
	}
}
