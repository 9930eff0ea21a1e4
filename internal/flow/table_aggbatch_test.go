package flow

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestUpdateAggregatesSameAsUpdateAggregate: the same random aggregates
// (some of no packets, both directions, flags and roles) through
// UpdateAggregate one by one and through UpdateAggregates (random chunk
// sizes, Expire between chunks) give the same records in the same order
// and the same stats: a table of 24 flows (two-stage path, full-table
// evictions) and one of 30,000 (over smallTable slots: the three-stage
// path).
func TestUpdateAggregatesSameAsUpdateAggregate(t *testing.T) {
	for _, c := range []struct {
		maxFlows, ports int
	}{{24, 30}, {30000, 20000}} {
		rng := rand.New(rand.NewPCG(13, uint64(c.maxFlows)))
		var a, b []Record
		cfg := Config{MaxFlows: c.maxFlows, IdleTimeout: 2 * time.Second, ActiveTimeout: 50 * time.Millisecond, HashSeed: 5}
		ta, _ := NewTable(cfg, func(r *Record) { a = append(a, *r) })
		tb, _ := NewTable(cfg, func(r *Record) { b = append(b, *r) })
		if big := tb.n > smallTable; big != (c.maxFlows > 1000) {
			t.Fatalf("%d flows: %d slots, want the other path", c.maxFlows, tb.n)
		}
		as := make([]Aggregate, 40000)
		for i := range as {
			p := pk("10.0.0.1", uint16(rng.IntN(c.ports)), "10.0.0.2", 80, ProtoTCP, int64(i)*int64(time.Millisecond), 0, uint8(rng.IntN(256)), Role(rng.IntN(3)))
			if rng.IntN(2) == 0 {
				p.Key = p.Key.Reverse()
			}
			as[i] = Aggregate{Packet: p, Packets: uint32(rng.IntN(4)), Bytes: uint64(rng.IntN(1 << 20)), First: p.Time - int64(rng.IntN(1000))*int64(time.Microsecond)}
		}
		for off := 0; off < len(as); {
			n := min(len(as)-off, rng.IntN(300))
			for i := off; i < off+n; i++ {
				ta.UpdateAggregate(&as[i])
			}
			tb.UpdateAggregates(as[off : off+n])
			off += n
			now := int64(off) * int64(time.Millisecond)
			ta.Expire(now)
			tb.Expire(now)
		}
		ta.Flush(ReasonEOF)
		tb.Flush(ReasonEOF)
		if len(a) == 0 || len(a) != len(b) || ta.Stats() != tb.Stats() {
			t.Fatalf("%d flows: %d vs %d records; stats\n%+v\n%+v", c.maxFlows, len(a), len(b), ta.Stats(), tb.Stats())
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%d flows: record %d: %+v vs %+v", c.maxFlows, i, a[i], b[i])
			}
		}
		if st := ta.Stats(); c.maxFlows < 1000 && (st.Evicted[ReasonFull] == 0 || st.Records[ReasonActive] == 0) {
			t.Errorf("sequence did not exercise evictions: %+v", st)
		}
		if n := testing.AllocsPerRun(100, func() { tb.UpdateAggregates(as[:200]) }); n != 0 {
			t.Errorf("UpdateAggregates: %v allocs/op", n)
		}
	}
}
