package conntrack

import (
	"testing"
	"time"
)

// destroyEv builds the destroy event of sconn(i)'s entry with its final
// counters.
func destroyEv(i int, po, bo, pr, br uint64) *Conn {
	c := sconn(i, po, bo, pr, br)
	c.Type, c.Flags = MsgDelete, 0
	return c
}

// eventStore is a store fed dumps and events, as the Source runs it.
func eventStore(max, remember int) *Store {
	return NewStore(StoreConfig{MaxConns: max, Remember: remember, Events: true,
		ActiveTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second, StaleTimeout: 100 * time.Second})
}

// TestStoreVanishBeforeDestroy: issue 22's double count, step by step. A
// connection is exported, counts more, then a dump no longer lists it
// while its destroy event is still on its way (the kernel redelivers it
// later, or it is read after the dump). Its end record carries what the
// dumps showed; the destroy event, read later, adds only what the kernel
// counted after the last dump, in one more end record, and a destroy
// event with nothing new adds no record. The store does not re-create
// the connection from its destroy event.
func TestStoreVanishBeforeDestroy(t *testing.T) {
	for _, late := range []struct {
		name  string
		final [4]uint64 // destroy event's counters
		want  []Counters
	}{
		{"more counts", [4]uint64{14, 1400, 9, 900}, []Counters{{2, 200}, {1, 100}}},
		{"nothing new", [4]uint64{13, 1300, 8, 800}, []Counters{{2, 200}}},
	} {
		t.Run(late.name, func(t *testing.T) {
			s := eventStore(16, 0)
			s.Update(sconn(1, 11, 1100, 8, 800), sec(0))
			s.EndPoll(sec(0))
			if got := collect(s, sec(10)); len(got) != 1 || got[0].DeltaOrig != (Counters{11, 1100}) {
				t.Fatalf("active record: %+v", got)
			}
			s.Update(sconn(1, 13, 1300, 8, 800), sec(11))
			s.EndPoll(sec(11))
			s.EndPoll(sec(12)) // the dump no longer lists it
			got := collect(s, sec(12))
			if len(got) != 1 || got[0].Reason != ExportEnd || got[0].DeltaOrig != (Counters{2, 200}) || got[0].DeltaReply != (Counters{}) {
				t.Fatalf("when it vanished: %+v; want one end record of 2 packets", got)
			}
			if s.Len() != 1 || s.Stats().Vanished != 1 {
				t.Fatalf("len %d stats %+v: the vanished entry must wait, silent, for its destroy event", s.Len(), s.Stats())
			}
			s.EndPoll(sec(13)) // still not listed: nothing more
			if got := collect(s, sec(13)); len(got) != 0 {
				t.Fatalf("second dump without it: %+v", got)
			}
			f := late.final
			s.Update(destroyEv(1, f[0], f[1], f[2], f[3]), sec(14))
			got = append(got, collect(s, sec(14))...)
			if len(got) != len(late.want) {
				t.Fatalf("records %+v; want deltas %v", got, late.want)
			}
			var sum [2]Counters
			for i, x := range got {
				if x.DeltaOrig != late.want[i] || x.Reason != ExportEnd {
					t.Fatalf("record %d: %+v; want end with %v", i, x, late.want[i])
				}
				sum[0].Packets += x.DeltaOrig.Packets
				sum[1].Packets += x.DeltaReply.Packets
			}
			if sum[0].Packets+11 != f[0] || sum[1].Packets+8 != f[2] {
				t.Fatalf("records add up to %v after the first 11/8, the kernel counted %d/%d", sum, f[0], f[2])
			}
			if st := s.Stats(); s.Len() != 0 || st.New != 1 {
				t.Fatalf("len %d stats %+v: the destroy event must end the entry, not start a new one", s.Len(), st)
			}
		})
	}
}

// TestStoreVanishNoEvents: without events (--ct-no-events) no destroy
// event will come: a connection a dump no longer lists ends at once and
// leaves the store.
func TestStoreVanishNoEvents(t *testing.T) {
	s := newTestStore(16)
	s.Update(sconn(1, 5, 500, 5, 500), sec(0))
	s.EndPoll(sec(0))
	s.EndPoll(sec(1))
	got := collect(s, sec(1))
	if len(got) != 1 || got[0].Reason != ExportEnd || got[0].DeltaOrig != (Counters{5, 500}) || s.Len() != 0 {
		t.Fatalf("records %+v len %d; want one end record, the entry removed", got, s.Len())
	}
}

// TestStoreIdleThenDestroy: a UDP flow reported idle, then destroyed by
// the kernel with the same counters, leaves no second record (the issue
// saw an end record with the same counts, then an empty one).
func TestStoreIdleThenDestroy(t *testing.T) {
	for _, events := range []bool{true, false} {
		s := newTestStore(16)
		if events {
			s = eventStore(16, 0)
		}
		s.Update(sconn(1, 3, 384, 3, 234), sec(0))
		s.EndPoll(sec(0))
		s.Update(sconn(1, 3, 384, 3, 234), sec(31))
		s.EndPoll(sec(31))
		got := collect(s, sec(31))
		if len(got) != 1 || got[0].Reason != ExportIdle || got[0].DeltaOrig != (Counters{3, 384}) {
			t.Fatalf("events=%v: idle: %+v", events, got)
		}
		if events {
			s.Update(destroyEv(1, 3, 384, 3, 234), sec(33))
		}
		s.EndPoll(sec(34))
		if got := collect(s, sec(34)); len(got) != 0 || s.Len() != 0 {
			t.Fatalf("events=%v: after the destroy: %+v, len %d; want no record, the entry gone", events, got, s.Len())
		}
	}
}

// TestStoreTupleReuse: the kernel replaces a TIME_WAIT entry by a new
// connection on the same tuple (new id) before the old one's destroy
// event is read; that late event adds the old connection's last counts,
// not a copy of them, and leaves the new connection alone.
func TestStoreTupleReuse(t *testing.T) {
	s := eventStore(16, 8)
	old := sconn(1, 6, 600, 4, 400)
	old.Orig.Proto, old.Has, old.TCPState = 6, old.Has|HasTCP, TCPTimeWait
	s.Update(old, sec(0))
	s.EndPoll(sec(0))
	if got := collect(s, sec(0)); len(got) != 1 || got[0].Reason != ExportEnd || got[0].DeltaOrig != (Counters{6, 600}) {
		t.Fatalf("end of the old connection: %+v", got)
	}
	nw := sconn(1, 2, 200, 1, 100)
	nw.Orig.Proto, nw.Has, nw.TCPState, nw.ID = 6, nw.Has|HasTCP, TCPEstablished, 77
	s.Update(nw, sec(1))
	s.EndPoll(sec(1))
	late := destroyEv(1, 7, 700, 4, 400) // one more packet before it went
	late.Orig.Proto = 6
	s.Update(late, sec(2))
	got := collect(s, sec(20))
	var oldSum, newSum Counters
	for _, x := range got {
		switch x.ID {
		case old.ID:
			oldSum.Packets += x.DeltaOrig.Packets
		case 77:
			newSum.Packets += x.DeltaOrig.Packets
		}
	}
	if oldSum.Packets != 1 || newSum.Packets != 2 || len(got) != 2 {
		t.Fatalf("records %+v; want the old connection's 1 late packet and the new one's 2", got)
	}
	if st := s.Stats(); st.Restarted != 1 || st.Recalled != 1 || s.Len() != 1 {
		t.Fatalf("len %d stats %+v", s.Len(), st)
	}
}

// TestStoreEndedBound: ended connections still in the kernel's table are
// kept silent in the store, then (when it is full) in the memo; past both
// bounds the oldest are forgotten, counted in ForgottenEnded, and exactly
// those are counted again when a dump lists them. Memory stays bounded.
func TestStoreEndedBound(t *testing.T) {
	const held, remember, conns = 4, 4, 12
	s := eventStore(held, remember)
	tw := func(i int) *Conn {
		c := sconn(i, 5, 500, 5, 500)
		c.Orig.Proto, c.Has, c.TCPState = 6, c.Has|HasTCP, TCPTimeWait
		return c
	}
	for i := range conns {
		s.Update(tw(i), sec(0))
		collect(s, sec(0)) // each one's end record
	}
	st := s.Stats()
	if st.Exported[ExportEnd] != conns || s.Len() != held || len(s.memo) != remember || st.ForgottenEnded != conns-held-remember {
		t.Fatalf("len %d memo %d stats %+v; want %d end records, %d forgotten", s.Len(), len(s.memo), st, conns, conns-held-remember)
	}
	// A dump lists all of them, still in TIME_WAIT.
	var again int
	for i := range conns {
		s.Update(tw(i), sec(1))
		for _, x := range collect(s, sec(1)) {
			if x.DeltaOrig != (Counters{}) {
				again++
			}
		}
		if s.Len() > held || len(s.memo) > remember {
			t.Fatalf("store %d, memo %d: over the bounds %d, %d", s.Len(), len(s.memo), held, remember)
		}
	}
	if uint64(again) > s.Stats().ForgottenEnded || again == 0 {
		t.Fatalf("%d connections counted again, %d forgotten", again, s.Stats().ForgottenEnded)
	}
}
