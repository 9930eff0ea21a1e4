package flow

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestUpdateAggregate: packets added one by one and the same packets
// added as per-direction aggregates (what the eBPF source hands the
// table) give the same records: counters both ways, flags, start and end,
// orientation by role hints, and timeouts judged from an aggregate's first
// packet (a run after an idle gap starts a new record).
func TestUpdateAggregate(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	cfg := Config{MaxFlows: 1000, IdleTimeout: 10 * time.Second, ActiveTimeout: 1000 * time.Second}
	one, s1 := newTable(t, cfg)
	agg, s2 := newTable(t, cfg)
	type run struct {
		a    Aggregate
		pkts []Packet
	}
	var runs []run
	for f := range 40 {
		proto := []uint8{6, 17}[f%2]
		cli, srv := fmt.Sprintf("10.0.%d.1", f), "192.0.2.9"
		if f%3 == 0 {
			cli, srv = fmt.Sprintf("2001:db8::%x", f+1), "2001:db8::ffff"
		}
		at := int64(f) * sec
		for round := range 3 {
			if round == 2 && f%4 == 0 {
				at += 30 * sec // idle: a new record
			}
			for _, fwd := range []bool{round != 1 || f%5 != 0, round == 1 && f%5 == 0} { // some start with the reply
				var rr run
				n := 1 + r.IntN(5)
				for i := range n {
					at += int64(1+r.IntN(300)) * 1e6
					p := pk(cli, uint16(1000+f), srv, 80, proto, at, uint32(40+r.IntN(1400)), 0, RoleUnknown)
					if !fwd {
						p = pk(srv, 80, cli, uint16(1000+f), proto, at, uint32(40+r.IntN(1400)), 0, RoleUnknown)
					}
					if proto == 6 {
						p.TCPFlags = TCPAck
						if round == 0 && i == 0 && fwd {
							p.TCPFlags, p.Role = TCPSyn, RoleInitiator
						}
					}
					rr.pkts = append(rr.pkts, p)
					if i == 0 {
						rr.a.First = p.Time
					}
					rr.a.Packet.Key, rr.a.Packet.Time = p.Key, p.Time
					rr.a.Packet.TCPFlags |= p.TCPFlags
					if p.Role != RoleUnknown {
						rr.a.Packet.Role = p.Role
					}
					rr.a.Packets++
					rr.a.Bytes += uint64(p.Length)
				}
				runs = append(runs, rr)
			}
		}
	}
	for _, rr := range runs {
		for i := range rr.pkts {
			one.Update(&rr.pkts[i])
		}
		agg.UpdateAggregate(&rr.a)
	}
	one.Flush(ReasonEOF)
	agg.Flush(ReasonEOF)
	if len(s1.recs) == 0 || len(s1.recs) != len(s2.recs) {
		t.Fatalf("%d records one by one, %d from aggregates", len(s1.recs), len(s2.recs))
	}
	sortRecords := func(rs []Record) {
		slices.SortFunc(rs, func(a, b Record) int { return int(a.Start - b.Start) })
	}
	sortRecords(s1.recs)
	sortRecords(s2.recs)
	for i := range s1.recs {
		if s1.recs[i] != s2.recs[i] {
			t.Fatalf("record %d:\n one %+v\n agg %+v", i, s1.recs[i], s2.recs[i])
		}
	}
	if one.Stats() != agg.Stats() {
		t.Errorf("stats:\n one %+v\n agg %+v", one.Stats(), agg.Stats())
	}
}

// TestContains: a live flow is found by its key in either direction,
// IPv4 and IPv6; a flow that was never added, or has expired, is not.
func TestContains(t *testing.T) {
	tb, _ := newTable(t, Config{MaxFlows: 100, IdleTimeout: 10 * time.Second})
	v4 := pk("10.0.0.1", 1000, "10.0.0.2", 53, 17, sec, 60, 0, RoleUnknown)
	v6 := pk("2001:db8::1", 1000, "2001:db8::2", 443, 6, sec, 60, 0, RoleUnknown)
	tb.Update(&v4)
	tb.Update(&v6)
	for _, p := range []Packet{v4, v6} {
		rev := p.Key
		rev.SrcAddr, rev.DstAddr, rev.SrcPort, rev.DstPort = rev.DstAddr, rev.SrcAddr, rev.DstPort, rev.SrcPort
		if !tb.Contains(&p.Key) || !tb.Contains(&rev) {
			t.Errorf("%v: not found (forward %v, reverse %v)", p.Key, tb.Contains(&p.Key), tb.Contains(&rev))
		}
		other := p.Key
		other.DstPort++
		if tb.Contains(&other) {
			t.Errorf("%v: found though never added", other)
		}
	}
	tb.Expire(100 * sec)
	if tb.Contains(&v4.Key) || tb.Contains(&v6.Key) {
		t.Error("expired flows still found")
	}
}
