package flow

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// A packet that arrives after its flow's idle timeout, or after an ended
// flow's linger, starts a new record even though no Expire ran in between:
// the old record leaves with the reason it had earned.
func TestExpiredOnUpdateWithoutExpire(t *testing.T) {
	var got []Record
	tb, err := NewTable(Config{MaxFlows: 8, IdleTimeout: 15 * time.Second, EndLinger: 2 * time.Second},
		func(r *Record) { got = append(got, *r) })
	if err != nil {
		t.Fatal(err)
	}
	k := mkKey("10.0.0.1", 1000, "10.0.0.2", 53, ProtoUDP)
	t0 := int64(1000 * sec)
	tb.Update(&Packet{Key: k, Time: t0, Length: 100})
	tb.Update(&Packet{Key: k.Reverse(), Time: t0 + 1*sec, Length: 200})
	tb.Update(&Packet{Key: k, Time: t0 + 16*sec, Length: 300}) // 15 s after the last packet
	if len(got) != 1 || got[0].EndReason != ReasonIdle || got[0].Packets != 1 || got[0].RevBytes != 200 ||
		got[0].Start != t0 || got[0].End != t0+sec {
		t.Fatalf("after an idle gap: %+v", got)
	}

	// TCP: FIN both ways, then a packet 2 s later (the linger) without a SYN.
	tk := mkKey("10.0.0.1", 40000, "10.0.0.2", 80, ProtoTCP)
	tb.Update(&Packet{Key: tk, Time: t0, Length: 60, TCPFlags: TCPFin | TCPAck})
	tb.Update(&Packet{Key: tk.Reverse(), Time: t0 + sec/10, Length: 60, TCPFlags: TCPFin | TCPAck})
	tb.Update(&Packet{Key: tk, Time: t0 + sec/10 + 2*sec, Length: 40, TCPFlags: TCPAck})
	if len(got) != 2 || got[1].EndReason != ReasonEnd || got[1].Packets != 1 || got[1].RevPackets != 1 {
		t.Fatalf("after the end linger: %+v", got[1:])
	}
	tb.Flush(ReasonEOF)
	// Flush emits in slot order (the hash seed's): match by protocol.
	if len(got) == 4 && got[2].Key.Proto == ProtoTCP {
		got[2], got[3] = got[3], got[2]
	}
	if len(got) != 4 || got[2].Bytes != 300 || got[3].Bytes != 40 || got[2].EndReason != ReasonEOF || got[3].EndReason != ReasonEOF {
		t.Fatalf("the packets after the gaps started new flows: %+v", got[2:])
	}
	if st := tb.Stats(); st.FlowsCreated != 4 || st.Evicted[ReasonIdle] != 1 || st.Evicted[ReasonEnd] != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// The next-expiry bound must never be late: with it, Expire emits exactly
// what a full scan at every call would emit, in the same order and at the
// same call. Timeouts are far apart (idle 60s, active 40s, linger 1s) and
// few flows are live, so a bound that missed a deadline moving earlier
// (an end linger, a restarted active record) would delay an emission.
func TestDueBoundIsNeverLate(t *testing.T) {
	type emitted struct {
		Record
		at int // number of the Update/Expire call that emitted it
	}
	run := func(fullScans bool) []emitted {
		var recs []emitted
		call := 0
		cfg := Config{MaxFlows: 64, IdleTimeout: 60 * time.Second, ActiveTimeout: 40 * time.Second,
			EndLinger: time.Second, HashSeed: 3}
		tb, err := NewTable(cfg, func(r *Record) { recs = append(recs, emitted{*r, call}) })
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(11, 12))
		keys := make([]Key, 6)
		for i := range keys {
			keys[i] = mkKey("10.0.0.1", uint16(i), "10.0.0.2", 80, ProtoTCP)
		}
		now := int64(1000 * sec)
		for n := 0; n < 20000; n++ {
			call++
			now += rng.Int64N(4e8) - 4e7 // ~200 ms steps, sometimes back
			if rng.IntN(400) == 0 {
				now += 70 * sec // a quiet spell: everything goes idle
			}
			p := Packet{Key: keys[rng.IntN(len(keys))], Time: now, Length: 100}
			if rng.IntN(2) == 0 {
				p.Key = p.Key.Reverse()
			}
			switch rng.IntN(40) {
			case 0, 1, 2, 3:
				p.TCPFlags = TCPFin
			case 4:
				p.TCPFlags = TCPRst
			case 5:
				p.TCPFlags, p.Role = TCPSyn, RoleInitiator
			}
			tb.Update(&p)
			checkDue(t, tb)
			if rng.IntN(4) == 0 {
				call++
				if fullScans {
					tb.due = math.MinInt64
				}
				tb.Expire(now + rng.Int64N(int64(sec)))
				checkDue(t, tb)
			}
		}
		tb.Flush(ReasonEOF)
		return recs
	}
	bounded, full := run(false), run(true)
	var reasons [NumReasons]int
	for _, e := range full {
		reasons[e.EndReason]++
	}
	if reasons[ReasonEnd] < 100 || reasons[ReasonActive] < 20 || reasons[ReasonIdle] < 5 {
		t.Fatalf("records by reason %v: the sequence does not exercise every deadline", reasons)
	}
	if !reflect.DeepEqual(bounded, full) {
		n := min(len(bounded), len(full))
		for i := 0; i < n; i++ {
			if bounded[i] != full[i] {
				t.Fatalf("record %d differs:\nbounded %+v\nfull    %+v", i, bounded[i], full[i])
			}
		}
		t.Fatalf("%d records with the bound, %d with full scans", len(bounded), len(full))
	}
}

// checkDue asserts the bound's invariant: no live flow can expire before
// tb.due.
func checkDue(t *testing.T, tb *Table) {
	t.Helper()
	for i := range tb.slots {
		if s := &tb.slots[i]; s.tag != 0 && tb.deadline(s) < tb.due {
			t.Fatalf("slot %d can expire at %d, before the bound %d", i, tb.deadline(s), tb.due)
		}
	}
}

// One flow through an active report: the next packet restarts its record,
// so its active deadline moves from "none" to 40 s after that packet, and
// a packet from slightly earlier (time going backwards) moves it earlier
// still. The bound must follow both.
func TestDueFollowsRestartedRecord(t *testing.T) {
	var got []Record
	tb, err := NewTable(Config{MaxFlows: 4, IdleTimeout: 60 * time.Second, ActiveTimeout: 40 * time.Second,
		EndLinger: time.Second}, func(r *Record) { got = append(got, *r) })
	if err != nil {
		t.Fatal(err)
	}
	k := mkKey("10.0.0.1", 1, "10.0.0.2", 2, ProtoUDP)
	t0 := int64(1000 * sec)
	tb.Update(&Packet{Key: k, Time: t0, Length: 10})
	tb.Update(&Packet{Key: k, Time: t0 + 39*sec, Length: 10}) // idle deadline now t0+99 s
	tb.Expire(t0 + 40*sec)                                    // active report; the record is now empty
	if len(got) != 1 || got[0].EndReason != ReasonActive {
		t.Fatalf("want one active record, got %+v", got)
	}
	checkDue(t, tb)
	tb.Update(&Packet{Key: k, Time: t0 + 41*sec, Length: 10}) // restarts the record
	checkDue(t, tb)
	tb.Update(&Packet{Key: k, Time: t0 + 40*sec + sec/2, Length: 10}) // earlier than the record's start
	checkDue(t, tb)
	tb.Expire(t0 + 80*sec + sec/2) // 40 s after the earliest packet of the record
	if len(got) != 2 || got[1].EndReason != ReasonActive || got[1].Packets != 2 || got[1].Start != t0+40*sec+sec/2 {
		t.Fatalf("the restarted record's active report is late or wrong: %+v", got)
	}
}
