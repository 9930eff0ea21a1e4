package nflog

import (
	"encoding/binary"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// BenchmarkDecode measures one NFLOG message through the whole hot path:
// netlink attribute walk, payload decode (internal/packet), prefix lookup
// and the deny-flow table update, over 1024 distinct flows (IPv4 and IPv6,
// two prefixes) in messages shaped like the kernel's (testdata/real.bin).
func BenchmarkDecode(b *testing.B) {
	const n = 1024
	msgs := make([][]byte, n)
	for i := range msgs {
		prefix := "weir-deny "
		if i%2 == 1 {
			prefix = "weir-tcp"
		}
		pl := udp4(a4, b4, uint16(1000+i), 7777, 328, 128)
		if i%4 == 3 {
			pl = udp6(a6, b6, uint16(1000+i), 7777, 300, 128)
		}
		msgs[i] = full(prefix, pl)
	}
	a := NewAggregator(AggregatorConfig{MaxFlows: 4096, IdleTimeout: 1 << 62}, nil)
	for _, m := range msgs { // intern the prefixes, fill the table
		if err := a.Message(m, 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := a.Message(msgs[i&(n-1)], int64(i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExportIdle is a deny-flow export cycle in the shape of
// Antrea's deny-connection export benchmark: 20,000 deny flows of which
// 2,000 are idle; each op exports the idle 2,000 and counts 2,000 new
// flows, so the table stays at 20,000.
func BenchmarkExportIdle(b *testing.B) {
	const total, idle = 20000, 2000
	const step = int64(1e9)
	exported := 0
	var pf Prefixes
	tb := NewDenyTable(total, total/idle*step, &pf, func(*DenyFlow) { exported++ })
	var p Packet
	next := uint32(0)
	key := DenyKey{Flow: flow.Key{Proto: flow.ProtoUDP, DstPort: 7777, IPVersion: 4}, Prefix: pf.ID([]byte("weir-deny ")), Group: 5}
	add := func(now int64) {
		for range idle {
			binary.BigEndian.PutUint32(key.Flow.SrcAddr[12:], next)
			next++
			tb.Add(&key, 328, now, &p)
		}
	}
	for c := range int64(total / idle) {
		add(c * step)
	}
	now := int64(total/idle) * step
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		exported = 0
		if tb.Expire(now) != idle || exported != idle {
			b.Fatalf("exported %d", exported)
		}
		add(now)
		now += step
	}
}
