package flow

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// benchKey returns flow f's key in initiator orientation.
func benchKey(f int, v6 bool) Key {
	var k Key
	var a [4]byte
	binary.BigEndian.PutUint32(a[:], 0x0a000000|uint32(f))
	if v6 {
		k.SrcAddr = [16]byte{0x20, 0x01, 0x0d, 0xb8, 12: a[0], 13: a[1], 14: a[2], 15: a[3]}
		k.DstAddr = [16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 15: 1}
		k.IPVersion = 6
	} else {
		SetAddr4(&k.SrcAddr, a[:])
		SetAddr4(&k.DstAddr, []byte{192, 168, 0, 1})
		k.IPVersion = 4
	}
	k.SrcPort, k.DstPort, k.Proto = uint16(1024+f%60000), 443, ProtoTCP
	return k
}

// benchPackets returns a power-of-two number (≥ 1<<15 and ≥ 2×flows) of TCP
// packets: rounds over all flows, each round in a fresh pseudo-random
// order, directions alternating from one round to the next.
func benchPackets(flows int, v6 bool) []Packet {
	size := 1 << 15
	for size < 2*flows {
		size <<= 1
	}
	keys := make([]Key, flows)
	for f := range keys {
		keys[f] = benchKey(f, v6)
	}
	rng := rand.New(rand.NewPCG(1, uint64(flows)))
	perm := make([]int, flows)
	for i := range perm {
		perm[i] = i
	}
	pkts := make([]Packet, size)
	for i := range pkts {
		round, idx := i/flows, i%flows
		if idx == 0 {
			rng.Shuffle(flows, func(a, b int) { perm[a], perm[b] = perm[b], perm[a] })
		}
		p := &pkts[i]
		p.Key = keys[perm[idx]]
		if round&1 == 1 {
			p.Key = p.Key.Reverse()
		}
		p.Time = 1e18 + int64(i)*1000
		p.Length = 1500
		p.TCPFlags = TCPAck
	}
	return pkts
}

// benchFlows are the benchmarks' flow counts; max, if set, is the table's
// MaxFlows (else the flow count): "256-in-64k" is live capture's shape at
// BenchmarkLiveCapture's 256 flows (--max-flows 65536).
var benchFlows = []struct {
	name   string
	n, max int
}{{"1", 1, 0}, {"256-in-64k", 256, 1 << 16}, {"10k", 10_000, 0}, {"1M", 1 << 20, 0}}

// prefilled returns a table of MaxFlows maxFlows (flows if 0) holding every flow
// of pkts (one full cycle), so the timed loop measures steady-state updates
// of existing flows.
func prefilled(b *testing.B, flows, maxFlows int, pkts []Packet) *Table {
	if maxFlows == 0 {
		maxFlows = flows
	}
	tb, err := NewTable(Config{MaxFlows: maxFlows, HashSeed: 1}, func(*Record) {})
	if err != nil {
		b.Fatal(err)
	}
	for i := range pkts {
		tb.Update(&pkts[i])
	}
	if tb.Len() != flows || tb.Stats().FlowsCreated != uint64(flows) {
		b.Fatalf("prefill: Len %d created %d, want %d", tb.Len(), tb.Stats().FlowsCreated, flows)
	}
	return tb
}

func BenchmarkUpdate(b *testing.B) {
	for _, fl := range benchFlows {
		for _, fam := range []string{"ipv4", "ipv6"} {
			b.Run(fmt.Sprintf("flows=%s/%s", fl.name, fam), func(b *testing.B) {
				pkts := benchPackets(fl.n, fam == "ipv6")
				tb := prefilled(b, fl.n, fl.max, pkts)
				mask := len(pkts) - 1
				b.ReportAllocs()
				b.ResetTimer()
				cpu := cpuTime()
				for i := 0; i < b.N; i++ {
					tb.Update(&pkts[i&mask])
				}
				b.StopTimer()
				reportCPU(b, cpu)
				b.ReportMetric(float64(SlotSize()), "B/slot") // after the loop: ResetTimer clears metrics
				b.ReportMetric(float64(tb.MemoryBytes())/float64(tb.Cap()), "B/flow")
				if tb.Stats().FlowsCreated != uint64(fl.n) {
					b.Fatal("timed loop created flows")
				}
			})
		}
	}
}

func BenchmarkUpdateBatch(b *testing.B) {
	for _, fl := range benchFlows {
		for _, fam := range []string{"ipv4", "ipv6"} {
			b.Run(fmt.Sprintf("flows=%s/%s", fl.name, fam), func(b *testing.B) {
				pkts := benchPackets(fl.n, fam == "ipv6")
				tb := prefilled(b, fl.n, fl.max, pkts)
				const batch = 256
				nb := len(pkts) / batch
				b.ReportAllocs()
				b.ResetTimer()
				cpu := cpuTime()
				// b.N packets, in batches of 256 (one op = one packet).
				for done, j := 0, 0; done < b.N; j++ {
					m := min(batch, b.N-done)
					off := (j % nb) * batch
					tb.UpdateBatch(pkts[off : off+m])
					done += m
				}
				b.StopTimer()
				reportCPU(b, cpu)
				if tb.Stats().FlowsCreated != uint64(fl.n) {
					b.Fatal("timed loop created flows")
				}
			})
		}
	}
}

// BenchmarkUpdateNewFlowsFull: every packet is a new flow into a full table
// (MaxFlows 64k): the amortized cost of full-table eviction.
func BenchmarkUpdateNewFlowsFull(b *testing.B) {
	const flows = 1 << 16
	pkts := benchPackets(1<<20, false)[:1<<20]
	for i := range pkts {
		pkts[i].Key = benchKey(i, false)
	}
	tb, err := NewTable(Config{MaxFlows: flows, HashSeed: 1}, func(*Record) {})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := &pkts[i&(len(pkts)-1)]
		p.Time = int64(i) // later flows are fresher
		tb.Update(p)
	}
}

func BenchmarkExpire(b *testing.B) {
	b.Run("flows=1M", func(b *testing.B) {
		flows := 1 << 20
		pkts := benchPackets(flows, false)
		tb := prefilled(b, flows, 0, pkts)
		now := pkts[len(pkts)-1].Time + int64(time.Second) // nothing is due: pure scan
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			tb.due = math.MinInt64 // force the full scan this benchmark is named for
			tb.Expire(now)
		}
		b.StopTimer()
		if tb.Len() != flows {
			b.Fatal("Expire evicted flows")
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(tb.slots)), "ns/slot")
	})
	// The common case between evictions: nothing is due, Expire returns
	// after one comparison whatever the table size.
	b.Run("flows=1M/nothing-due", func(b *testing.B) {
		flows := 1 << 20
		pkts := benchPackets(flows, false)
		tb := prefilled(b, flows, 0, pkts)
		tb.Expire(pkts[len(pkts)-1].Time) // one scan sets the exact bound
		now := pkts[len(pkts)-1].Time + int64(time.Second)
		if now >= tb.due {
			b.Fatalf("bound %d not after now %d", tb.due, now)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			tb.Expire(now)
		}
	})
}

// BenchmarkMemoryLatency is not weir's: it measures this machine, for
// reading the Update numbers. One op is one dependent load (a pointer
// chase through a random cycle) in an array of the given size: about the
// cost of one cache miss on a table slot of that footprint.
func BenchmarkMemoryLatency(b *testing.B) {
	for _, size := range []int{1 << 20, 2 << 20, 4 << 20, 128 << 20} {
		b.Run(fmt.Sprintf("size=%dMiB", size>>20), func(b *testing.B) {
			n := size / 64 // one cache line per hop
			next := make([]uint32, n*16)
			perm := rand.New(rand.NewPCG(1, 2)).Perm(n)
			for i := range perm {
				next[perm[i]*16] = uint32(perm[(i+1)%n] * 16)
			}
			b.ResetTimer()
			j := uint32(0)
			for i := 0; i < b.N; i++ {
				j = next[j]
			}
			benchSink = j
		})
	}
}

var benchSink uint32
