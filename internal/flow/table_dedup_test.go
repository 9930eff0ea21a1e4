package flow

import (
	"testing"
	"time"
)

// dedupTable is a table counting packets once across interfaces; interface
// index 0 is "a", 1 is "b", 2 is "c".
func dedupTable(t *testing.T, on bool) (*Table, *sink) {
	t.Helper()
	ifs := &Ifaces{}
	for _, n := range []string{"a", "b", "c"} {
		ifs.Index(n)
	}
	return newTable(t, Config{MaxFlows: 64, IdleTimeout: time.Minute, DedupIfaces: on, Ifaces: ifs})
}

func on(p Packet, iface uint16) *Packet { p.Iface = iface; return &p }

// TestDedupVethCopies: every packet is seen twice (the two ends of a veth,
// in either order); each is counted once, and the copies are counted as
// duplicates.
func TestDedupVethCopies(t *testing.T) {
	tb, s := dedupTable(t, true)
	for i := range int64(10) {
		req := pk("10.0.0.1", 1000, "10.0.0.2", 53, 17, i*1000, 100, 0, 0)
		rep := pk("10.0.0.2", 53, "10.0.0.1", 1000, 17, i*1000+10, 300, 0, 0)
		if i == 0 || i%2 == 1 {
			tb.Update(on(req, 0)) // leaves through a
			tb.Update(on(req, 1)) // arrives at b
		} else { // rings are read in any order: the copy at b comes first
			tb.Update(on(req, 1))
			tb.Update(on(req, 0))
		}
		tb.Update(on(rep, 1)) // the reply leaves through b
		tb.Update(on(rep, 0)) // and arrives at a
	}
	tb.Flush(ReasonEOF)
	r := one(t, s)
	if r.Packets != 10 || r.Bytes != 1000 || r.RevPackets != 10 || r.RevBytes != 3000 || r.Iface != "a" {
		t.Fatalf("record %+v: want 10/1000 and 10/3000 on a", r)
	}
	if st := tb.Stats(); st.Duplicates != 20 || st.Packets != 40 {
		t.Fatalf("duplicates %d of %d packets, want 20 of 40", st.Duplicates, st.Packets)
	}
}

// TestDedupAsymmetricRoute: the two directions of a flow on different
// interfaces are both real traffic and are both counted.
func TestDedupAsymmetricRoute(t *testing.T) {
	tb, s := dedupTable(t, true)
	for i := range int64(5) {
		tb.Update(on(pk("10.0.0.1", 1000, "10.0.0.2", 80, 6, i*1000, 60, 0, 0), 0))
		tb.Update(on(pk("10.0.0.2", 80, "10.0.0.1", 1000, 6, i*1000+5, 1500, 0, 0), 2))
	}
	tb.Flush(ReasonEOF)
	r := one(t, s)
	if r.Packets != 5 || r.RevPackets != 5 || r.RevBytes != 7500 || tb.Stats().Duplicates != 0 {
		t.Fatalf("record %+v, duplicates %d: want 5 and 5 packets, none ignored", r, tb.Stats().Duplicates)
	}
}

// TestDedupTakeover: once the flow has been quiet for the dedup window, a
// packet on another interface takes the direction over (route change);
// within the window it is a copy.
func TestDedupTakeover(t *testing.T) {
	tb, s := dedupTable(t, true)
	w := int64(DefaultDedupWindow)
	tb.Update(on(pk("10.0.0.1", 1, "10.0.0.2", 2, 17, 0, 100, 0, 0), 0))
	tb.Update(on(pk("10.0.0.1", 1, "10.0.0.2", 2, 17, w-1, 100, 0, 0), 1))   // copy
	tb.Update(on(pk("10.0.0.1", 1, "10.0.0.2", 2, 17, 2*w, 100, 0, 0), 1))   // quiet since 0: b takes over
	tb.Update(on(pk("10.0.0.1", 1, "10.0.0.2", 2, 17, 2*w+1, 100, 0, 0), 0)) // now a copy
	tb.Update(on(pk("10.0.0.1", 1, "10.0.0.2", 2, 17, 2*w+2, 100, 0, 0), 1))
	tb.Flush(ReasonEOF)
	if r := one(t, s); r.Packets != 3 || tb.Stats().Duplicates != 2 {
		t.Fatalf("packets %d duplicates %d, want 3 and 2", r.Packets, tb.Stats().Duplicates)
	}
}

// TestDedupOff: without DedupIfaces every packet counts, as in file replay.
func TestDedupOff(t *testing.T) {
	tb, s := dedupTable(t, false)
	p := pk("10.0.0.1", 1, "10.0.0.2", 2, 17, 0, 100, 0, 0)
	tb.Update(on(p, 0))
	tb.Update(on(p, 1))
	tb.Flush(ReasonEOF)
	if r := one(t, s); r.Packets != 2 || tb.Stats().Duplicates != 0 {
		t.Fatalf("packets %d duplicates %d, want 2 and 0", r.Packets, tb.Stats().Duplicates)
	}
}

// TestPeek: Peek shows each live flow's current counters and changes
// nothing: the records emitted afterwards are the same as without it.
func TestPeek(t *testing.T) {
	tb, s := newTable(t, Config{MaxFlows: 1000, IdleTimeout: time.Minute})
	for i := range 300 {
		p := pk("10.1.0.1", uint16(i), "10.1.0.2", 80, 6, int64(i), uint32(40+i), 0, 0)
		for range i%3 + 1 {
			tb.Update(&p)
		}
	}
	seen := map[uint16]Record{}
	tb.Peek(func(r *Record) { seen[r.Key.SrcPort] = *r })
	if len(seen) != 300 || tb.Len() != 300 || len(s.recs) != 0 {
		t.Fatalf("peek saw %d flows (table %d, emitted %d), want 300, 300, 0", len(seen), tb.Len(), len(s.recs))
	}
	for port, r := range seen {
		n := uint64(port%3 + 1)
		if r.Packets != n || r.Bytes != n*uint64(40+port) || r.EndReason != ReasonNone {
			t.Fatalf("port %d: %+v, want %d packets", port, r, n)
		}
	}
	tb.Flush(ReasonEOF)
	for _, r := range s.recs {
		p := seen[r.Key.SrcPort]
		p.EndReason = ReasonEOF
		if r != p {
			t.Fatalf("after peek: %+v, peeked %+v", r, p)
		}
	}
}
