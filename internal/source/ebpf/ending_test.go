package ebpf

import (
	"net/netip"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// endingTable is a flow table whose emit callback is ending.note, as in
// the source (active records after 5 s, end linger 3 s, idle 10 s).
func endingTable(t *testing.T, e *ending, recs *[]flow.Record) *flow.Table {
	t.Helper()
	tab, err := flow.NewTable(flow.Config{MaxFlows: 64, IdleTimeout: 10 * time.Second, ActiveTimeout: 5 * time.Second, EndLinger: 3 * time.Second},
		func(r *flow.Record) { e.note(r); *recs = append(*recs, *r) })
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// ms is a test time, milliseconds after an epoch.
func ms(n int) int64 {
	return time.Unix(1_700_000_000, 0).Add(time.Duration(n) * time.Millisecond).UnixNano()
}

// tcpPkt feeds one TCP packet of flow port (a:port → b:80, or back) to tab.
func tcpPkt(tab *flow.Table, port uint16, fromA bool, at int, flags uint8, role flow.Role) {
	var k flow.Key
	k.Proto, k.SrcPort, k.DstPort = flow.ProtoTCP, port, 80
	k.SetSrc(netip.MustParseAddr("10.0.0.9")) // above b: a's key is not the canonical one
	k.SetDst(netip.MustParseAddr("10.0.0.1"))
	if !fromA {
		k = k.Reverse()
	}
	tab.Update(&flow.Packet{Key: k, Time: ms(at), Length: 60, TCPFlags: flags, Role: role})
}

const ack, fin, rst, syn = 0x10, flow.TCPFin, flow.TCPRst, flow.TCPSyn

// TestEnding drives a real flow table as the source does with TCP flows
// whose end flags fall before and after an active record, and flushes it
// inside their end linger with reason shutdown: the table's end rule
// (FIN both ways, or an RST) gives reason end whichever record carried
// the flags and whichever side opened; a flow closed one way, or not at
// all, stays shutdown.
func TestEnding(t *testing.T) {
	var e ending
	var recs []flow.Record
	tab := endingTable(t, &e, &recs)
	init := map[uint16]bool{1: true, 2: true, 3: false, 4: true, 5: false} // a opened it
	for p, fromA := range init {
		tcpPkt(tab, p, fromA, 0, syn, flow.RoleInitiator)
	}
	tcpPkt(tab, 1, true, 4500, fin|ack, 0) // a's FIN, then an active record, then b's
	tcpPkt(tab, 2, true, 4500, fin|ack, 0) // a's FIN only
	tcpPkt(tab, 3, true, 4500, rst, 0)     // a resets, then an active record
	tab.Expire(ms(5000))                   // active records of all five
	if len(recs) != 5 || len(e.seen) != 3 {
		t.Fatalf("%d active records, end flags of %d flows; want 5 and 3 (1, 2, 3)", len(recs), len(e.seen))
	}
	tcpPkt(tab, 1, false, 5500, fin|ack, 0)
	tcpPkt(tab, 2, true, 5500, ack, 0)
	tcpPkt(tab, 3, true, 5500, ack, 0)
	tcpPkt(tab, 4, true, 5500, ack, 0)
	tcpPkt(tab, 5, false, 5500, fin|ack, 0) // both FINs in the last record, b opened it
	tcpPkt(tab, 5, true, 5600, fin|ack, 0)
	tab.Expire(ms(6000)) // nothing due: inside the linger
	recs = recs[:0]
	tab.Flush(flow.ReasonShutdown)
	want := map[uint16]flow.EndReason{1: flow.ReasonEnd, 2: flow.ReasonShutdown, 3: flow.ReasonEnd, 4: flow.ReasonShutdown, 5: flow.ReasonEnd}
	for _, r := range recs {
		p := r.Key.SrcPort
		if p == 80 {
			p = r.Key.DstPort
		}
		if r.EndReason != want[p] {
			t.Errorf("flow %d: %s, want %s", p, r.EndReason, want[p])
		}
		delete(want, p)
	}
	if len(want) != 0 || len(e.seen) != 0 {
		t.Errorf("no final record of %v; %d flows still remembered", want, len(e.seen))
	}
}

// TestEndingPrune: a flow whose active record carried a FIN and that the
// table then drops idle without a record (an empty delta) is forgotten
// at the next prune, so a new flow on the same ports that sends the
// other FIN only is not taken for ended.
func TestEndingPrune(t *testing.T) {
	var e ending
	var recs []flow.Record
	tab := endingTable(t, &e, &recs)
	tcpPkt(tab, 6, true, 0, syn, flow.RoleInitiator)
	tcpPkt(tab, 6, true, 1000, fin|ack, 0)
	tab.Expire(ms(5000))
	if len(e.seen) != 1 {
		t.Fatalf("end flags of %d flows, want 1", len(e.seen))
	}
	tab.Expire(ms(11000)) // idle, empty delta: no record
	e.prune(tab)
	if len(e.seen) != 0 || tab.Len() != 0 {
		t.Fatalf("after the idle drop: %d remembered, %d in the table", len(e.seen), tab.Len())
	}
	tcpPkt(tab, 6, false, 12000, fin|ack, 0)
	recs = recs[:0]
	tab.Flush(flow.ReasonShutdown)
	if len(recs) != 1 || recs[0].EndReason != flow.ReasonShutdown {
		t.Errorf("records %+v; want one, shutdown", recs)
	}
}
