package flow

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

func TestIdle(t *testing.T) {
	tb, s := newTable(t, Config{MaxFlows: 8}) // idle defaults to 15s
	a := pk("10.0.0.1", 1000, "10.0.0.2", 53, ProtoUDP, 1*sec, 70, 0, 0)
	b := pk("10.0.0.2", 53, "10.0.0.1", 1000, ProtoUDP, 3*sec, 130, 0, 0)
	tb.Update(&a)
	tb.Update(&b)
	tb.Expire(18*sec - 1)
	if len(s.recs) != 0 || tb.Len() != 1 {
		t.Fatalf("expired early: %+v", s.recs)
	}
	tb.Expire(18 * sec) // last packet 3s + 15s
	checkRec(t, one(t, s), Record{Key: a.Key, Packets: 1, Bytes: 70, RevPackets: 1, RevBytes: 130,
		EndReason: ReasonIdle, Start: 1 * sec, End: 3 * sec})
	if st := tb.Stats(); tb.Len() != 0 || st.Evicted[ReasonIdle] != 1 || st.Records[ReasonIdle] != 1 {
		t.Errorf("Len %d stats %+v", tb.Len(), st)
	}
	// The slot is free: the same key starts a new flow.
	tb.Update(&b)
	if tb.Len() != 1 || tb.Stats().FlowsCreated != 2 {
		t.Errorf("Len %d FlowsCreated %d", tb.Len(), tb.Stats().FlowsCreated)
	}
}

// TestActiveDeltas: one packet every 10s from 0 to 100s, Expire every second
// after that second's packets; active 60s, idle 15s.
func TestActiveDeltas(t *testing.T) {
	tb, s := newTable(t, Config{MaxFlows: 8, IdleTimeout: 15 * time.Second, ActiveTimeout: time.Minute})
	for now := int64(0); now <= 200; now++ {
		if now%10 == 0 && now <= 100 {
			p := pk("10.0.0.1", 1, "10.0.0.2", 2, ProtoTCP, now*sec, 1000, TCPAck, 0)
			tb.Update(&p)
		}
		tb.Expire(now * sec)
	}
	k := mkKey("10.0.0.1", 1, "10.0.0.2", 2, ProtoTCP)
	want := []Record{
		// Record started at 0: at Expire(60s) it holds packets 0..60.
		{Key: k, Packets: 7, Bytes: 7000, TCPFlags: TCPAck, EndReason: ReasonActive, Start: 0, End: 60 * sec},
		// Packets 70..100, idle at 100+15.
		{Key: k, Packets: 4, Bytes: 4000, TCPFlags: TCPAck, EndReason: ReasonIdle, Start: 70 * sec, End: 100 * sec},
	}
	if len(s.recs) != 2 {
		t.Fatalf("%d records: %+v", len(s.recs), s.recs)
	}
	for i := range want {
		checkRec(t, s.recs[i], want[i])
	}
	if st := tb.Stats(); st.EmptyDeltasSkipped != 0 || tb.Len() != 0 {
		t.Errorf("EmptyDeltasSkipped %d Len %d", st.EmptyDeltasSkipped, tb.Len())
	}
}

// TestActiveThenIdleEmpty: after an active report no packet comes: the idle
// eviction has an empty delta and emits nothing.
func TestActiveThenIdleEmpty(t *testing.T) {
	tb, s := newTable(t, DefaultConfig(8))
	for now := int64(0); now <= 100; now++ {
		if now%10 == 0 && now <= 60 {
			p := pk("10.0.0.1", 1, "10.0.0.2", 2, ProtoUDP, now*sec, 10, 0, 0)
			tb.Update(&p)
		}
		tb.Expire(now * sec)
	}
	if len(s.recs) != 1 || s.recs[0].EndReason != ReasonActive || s.recs[0].Packets != 7 {
		t.Fatalf("records %+v", s.recs)
	}
	st := tb.Stats()
	if tb.Len() != 0 || st.EmptyDeltasSkipped != 1 || st.Evicted[ReasonIdle] != 1 || st.Records[ReasonIdle] != 0 {
		t.Errorf("Len %d stats %+v", tb.Len(), st)
	}
}

// tcpSession is a full TCP conversation a→b, closed by FINs.
func tcpSession(a, b string) []Packet {
	return []Packet{
		pk(a, 50000, b, 80, ProtoTCP, 1000*sec, 60, TCPSyn, RoleInitiator),
		pk(b, 80, a, 50000, ProtoTCP, 1000*sec+1e6, 60, TCPSyn|TCPAck, RoleResponder),
		pk(a, 50000, b, 80, ProtoTCP, 1000*sec+2e6, 52, TCPAck, 0),
		pk(a, 50000, b, 80, ProtoTCP, 1001*sec, 400, TCPAck|TCPPsh, 0),
		pk(b, 80, a, 50000, ProtoTCP, 1002*sec, 1400, TCPAck|TCPPsh, 0),
		pk(a, 50000, b, 80, ProtoTCP, 1005*sec, 52, TCPAck|TCPFin, 0),
		pk(b, 80, a, 50000, ProtoTCP, 1005*sec+100e6, 52, TCPAck|TCPFin, 0),
	}
}

// TestEndLinger: FIN both ways marks the flow ending; the last ACK during the
// linger is counted and moves the deadline to its time + 2s.
func TestEndLinger(t *testing.T) {
	tb, s := newTable(t, Config{MaxFlows: 8})
	a, b := "192.0.2.10", "192.0.2.3"
	for _, p := range tcpSession(a, b) {
		tb.Update(&p)
	}
	last := pk(a, 50000, b, 80, ProtoTCP, 1005*sec+200e6, 52, TCPAck, 0)
	tb.Update(&last)
	tb.Expire(1007*sec + 200e6 - 1)
	if len(s.recs) != 0 {
		t.Fatalf("ended before the linger: %+v", s.recs)
	}
	tb.Expire(1007*sec + 200e6)
	checkRec(t, one(t, s), Record{
		Key:     mkKey(a, 50000, b, 80, ProtoTCP),
		Packets: 5, Bytes: 60 + 52 + 400 + 52 + 52, TCPFlags: TCPSyn | TCPAck | TCPPsh | TCPFin,
		RevPackets: 3, RevBytes: 60 + 1400 + 52, RevTCPFlags: TCPSyn | TCPAck | TCPPsh | TCPFin,
		EndReason: ReasonEnd, Start: 1000 * sec, End: 1005*sec + 200e6,
	})
	if st := tb.Stats(); st.Evicted[ReasonEnd] != 1 || tb.Len() != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestEndOneFinIsNotEnd: a FIN from one side only leaves the flow to idle.
func TestEndOneFinIsNotEnd(t *testing.T) {
	tb, s := newTable(t, Config{MaxFlows: 8})
	p := pk("10.0.0.1", 1, "10.0.0.2", 2, ProtoTCP, 0, 40, TCPFin|TCPAck, 0)
	tb.Update(&p)
	tb.Expire(10 * sec)
	if len(s.recs) != 0 {
		t.Fatalf("half-closed flow ended: %+v", s.recs)
	}
	tb.Expire(15 * sec)
	if r := one(t, s); r.EndReason != ReasonIdle {
		t.Errorf("reason %v, want idle", r.EndReason)
	}
}

func TestEndRst(t *testing.T) {
	tb, s := newTable(t, Config{MaxFlows: 8, EndLinger: time.Second})
	syn := pk("10.0.0.1", 3333, "10.0.0.2", 22, ProtoTCP, 5*sec, 60, TCPSyn, RoleInitiator)
	rst := pk("10.0.0.2", 22, "10.0.0.1", 3333, ProtoTCP, 5*sec+10, 40, TCPRst|TCPAck, 0)
	tb.Update(&syn)
	tb.Update(&rst)
	tb.Expire(6*sec + 9)
	if len(s.recs) != 0 {
		t.Fatal("early")
	}
	tb.Expire(6*sec + 10)
	checkRec(t, one(t, s), Record{Key: syn.Key, Packets: 1, Bytes: 60, TCPFlags: TCPSyn,
		RevPackets: 1, RevBytes: 40, RevTCPFlags: TCPRst | TCPAck, EndReason: ReasonEnd, Start: 5 * sec, End: 5*sec + 10})
}

// TestPortReuse: a new SYN during the linger closes the old flow at once and
// starts a new one in the same slot.
func TestPortReuse(t *testing.T) {
	tb, s := newTable(t, Config{MaxFlows: 8})
	a, b := "192.0.2.10", "192.0.2.3"
	for _, p := range tcpSession(a, b) {
		tb.Update(&p)
	}
	syn := pk(a, 50000, b, 80, ProtoTCP, 1006*sec, 60, TCPSyn, RoleInitiator)
	tb.Update(&syn)
	checkRec(t, one(t, s), Record{
		Key:     syn.Key,
		Packets: 4, Bytes: 60 + 52 + 400 + 52, TCPFlags: TCPSyn | TCPAck | TCPPsh | TCPFin,
		RevPackets: 3, RevBytes: 60 + 1400 + 52, RevTCPFlags: TCPSyn | TCPAck | TCPPsh | TCPFin,
		EndReason: ReasonEnd, Start: 1000 * sec, End: 1005*sec + 100e6,
	})
	// The new flow is not ending: it outlives the old linger.
	tb.Expire(1009 * sec)
	if tb.Len() != 1 || len(s.recs) != 1 {
		t.Fatalf("Len %d records %d", tb.Len(), len(s.recs))
	}
	tb.Flush(ReasonEOF)
	if len(s.recs) != 2 {
		t.Fatalf("%d records", len(s.recs))
	}
	checkRec(t, s.recs[1], Record{Key: syn.Key, Packets: 1, Bytes: 60, TCPFlags: TCPSyn,
		EndReason: ReasonEOF, Start: 1006 * sec, End: 1006 * sec})
	if st := tb.Stats(); st.PortReuses != 1 || st.FlowsCreated != 2 || st.Evicted[ReasonEnd] != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestFullEvictsStalest: MaxFlows 32 evicts 32/16 = 2 flows per pass, the
// two with the oldest last-seen times (spaced 10s apart, far above the
// histogram's resolution of span/128).
func TestFullEvictsStalest(t *testing.T) {
	tb, s := newTable(t, Config{MaxFlows: 32, IdleTimeout: time.Hour})
	rng := rand.New(rand.NewPCG(1, 2))
	key := func(i int) Packet {
		return pk(fmt.Sprintf("10.0.%d.%d", i/200, i%200+1), uint16(1000+i), "10.9.9.9", 443, ProtoTCP, 0, 100, TCPAck, 0)
	}
	// Create 32 flows, then touch them again in a random order: flow
	// order[j] is last seen at (100 + 10j)s.
	for i := 0; i < 32; i++ {
		p := key(i)
		p.Time = int64(i) * sec
		tb.Update(&p)
	}
	order := rng.Perm(32)
	for j, i := range order {
		p := key(i)
		p.Time = int64(100+10*j) * sec
		tb.Update(&p)
	}
	if tb.Len() != 32 || len(s.recs) != 0 {
		t.Fatalf("Len %d records %d", tb.Len(), len(s.recs))
	}
	newFlow := func(i int) {
		p := key(i)
		p.Time = 1000 * sec
		tb.Update(&p)
	}
	evicted := func() map[Key]Record {
		m := map[Key]Record{}
		for _, r := range s.recs {
			if r.EndReason == ReasonFull {
				m[r.Key] = r
			}
		}
		return m
	}
	newFlow(100) // full: evicts order[0], order[1]
	if tb.Len() != 31 {
		t.Fatalf("Len %d, want 31", tb.Len())
	}
	got := evicted()
	for j := 0; j < 2; j++ {
		k := key(order[j]).Key
		r, ok := got[k]
		if !ok {
			t.Fatalf("flow %d (last seen %ds) not evicted; evicted %+v", order[j], 100+10*j, got)
		}
		want := Record{Key: k, Packets: 2, Bytes: 200, TCPFlags: TCPAck, EndReason: ReasonFull,
			Start: int64(order[j]) * sec, End: int64(100+10*j) * sec}
		checkRec(t, r, want)
	}
	if len(got) != 2 {
		t.Fatalf("evicted %d flows, want 2", len(got))
	}
	newFlow(101) // 32 live: no eviction
	if len(evicted()) != 2 || tb.Len() != 32 {
		t.Fatalf("evicted %d Len %d", len(evicted()), tb.Len())
	}
	newFlow(102) // full again: the next two stalest
	got = evicted()
	for j := 0; j < 4; j++ {
		if _, ok := got[key(order[j]).Key]; !ok {
			t.Errorf("flow order[%d] not evicted", j)
		}
	}
	if len(got) != 4 {
		t.Fatalf("evicted %d flows, want 4", len(got))
	}
	st := tb.Stats()
	if st.Evicted[ReasonFull] != 4 || st.FullPasses != 2 || st.Records[ReasonFull] != 4 {
		t.Errorf("stats %+v", st)
	}
	tb.Flush(ReasonEOF)
	var pkts uint64
	for _, r := range s.recs {
		pkts += r.Packets + r.RevPackets
	}
	if pkts != 32*2+3 || st.Packets != pkts || tb.Len() != 0 {
		t.Errorf("emitted %d packets, table saw %d, want %d", pkts, st.Packets, 32*2+3)
	}
}

// TestFullTinyTable: MaxFlows 1 evicts the one flow for each new one.
func TestFullTinyTable(t *testing.T) {
	tb, s := newTable(t, Config{MaxFlows: 1})
	for i := 0; i < 5; i++ {
		p := pk("10.0.0.1", uint16(i), "10.0.0.2", 2, ProtoUDP, int64(i), 1, 0, 0)
		tb.Update(&p)
	}
	tb.Flush(ReasonEOF)
	if len(s.recs) != 5 || tb.Stats().Evicted[ReasonFull] != 4 {
		t.Fatalf("records %d stats %+v", len(s.recs), tb.Stats())
	}
	for i, r := range s.recs {
		if r.Key.SrcPort != uint16(i) {
			t.Errorf("record %d has port %d", i, r.Key.SrcPort)
		}
	}
}

// TestFullSameTime: when every flow has the same last-seen time, a pass
// still evicts exactly MaxFlows/16.
func TestFullSameTime(t *testing.T) {
	tb, _ := newTable(t, Config{MaxFlows: 64})
	for i := 0; i < 65; i++ {
		p := pk("10.0.0.1", uint16(i), "10.0.0.2", 2, ProtoUDP, 7, 1, 0, 0)
		tb.Update(&p)
	}
	if tb.Len() != 61 || tb.Stats().Evicted[ReasonFull] != 4 {
		t.Fatalf("Len %d evicted %d, want 61, 4", tb.Len(), tb.Stats().Evicted[ReasonFull])
	}
}
