package conntrack

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/nfnetlink"
)

var t0 = time.Unix(1_700_000_000, 0)

// sconn builds a dump entry for connection i (a UDP flow 10.0.x.y:i →
// 192.0.2.1:53) with the given counters per direction.
func sconn(i int, po, bo, pr, br uint64) *Conn {
	src := netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}).As16()
	dst := netip.AddrFrom4([4]byte{192, 0, 2, 1}).As16()
	c := &Conn{
		Type: MsgNew, Flags: nfnetlink.FlagMulti, Family: 2, // a dump reply
		Has:    HasOrig | HasReply | HasStatus | HasCountersOrig | HasCountersReply | HasMark | HasZone | HasID,
		Orig:   Tuple{Src: src, Dst: dst, SrcPort: uint16(1024 + i), DstPort: 53, Proto: 17},
		Reply:  Tuple{Src: dst, Dst: src, SrcPort: 53, DstPort: uint16(1024 + i), Proto: 17},
		Status: StatusConfirmed | StatusSeenReply,
		ID:     uint32(i + 1),
	}
	c.CountersOrig = Counters{po, bo}
	c.CountersReply = Counters{pr, br}
	return c
}

// collect runs one Export and returns copies of the records.
func collect(s *Store, now time.Time) []Export {
	var out []Export
	s.Export(now, func(x *Export) { out = append(out, *x) })
	return out
}

func sec(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }

func newTestStore(max int) *Store {
	return NewStore(StoreConfig{MaxConns: max, ActiveTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second, StaleTimeout: 100 * time.Second})
}

// TestStoreDeltas: polls with growing counters, an export after each
// active timeout; the deltas are exact per direction and the totals follow.
func TestStoreDeltas(t *testing.T) {
	s := newTestStore(16)
	readings := [][4]uint64{{1, 100, 0, 0}, {5, 700, 2, 80}, {12, 1900, 9, 1000}, {12, 1900, 9, 1000}, {20, 3000, 9, 1000}}
	var prev [4]uint64
	for k, r := range readings {
		now := sec(20 * k)
		s.Update(sconn(1, r[0], r[1], r[2], r[3]), now)
		s.EndPoll(now)
		got := collect(s, now.Add(10*time.Second))
		want := [4]uint64{r[0] - prev[0], r[1] - prev[1], r[2] - prev[2], r[3] - prev[3]}
		if want == [4]uint64{} {
			if len(got) != 0 {
				t.Fatalf("poll %d: no new counts but %d records", k, len(got))
			}
			continue
		}
		if len(got) != 1 {
			t.Fatalf("poll %d: %d records, want 1", k, len(got))
		}
		x := got[0]
		d := [4]uint64{x.DeltaOrig.Packets, x.DeltaOrig.Bytes, x.DeltaReply.Packets, x.DeltaReply.Bytes}
		if d != want || x.TotalOrig != (Counters{r[0], r[1]}) || x.TotalReply != (Counters{r[2], r[3]}) {
			t.Fatalf("poll %d: delta %v totals %v %v, want delta %v totals %v", k, d, x.TotalOrig, x.TotalReply, want, r)
		}
		if x.Reason != ExportActive {
			t.Errorf("poll %d: reason %v, want active", k, x.Reason)
		}
		prev = r
	}
	if st := s.Stats(); st.New != 1 || st.Updated != 4 || st.Conns != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestStoreCounterReset: a counter going backwards gives no negative
// delta: the counts not yet exported are still exported, the base
// restarts at the new reading, and the reset is counted.
func TestStoreCounterReset(t *testing.T) {
	s := newTestStore(16)
	s.Update(sconn(1, 10, 1000, 0, 0), sec(0))
	collect(s, sec(10)) // exports 10/1000
	s.Update(sconn(1, 15, 1500, 0, 0), sec(11))
	s.Update(sconn(1, 3, 300, 0, 0), sec(12)) // reset: 5/500 owed, base 3/300
	s.Update(sconn(1, 4, 420, 0, 0), sec(13))
	got := collect(s, sec(20))
	if len(got) != 1 || got[0].DeltaOrig != (Counters{6, 620}) || got[0].TotalOrig != (Counters{4, 420}) {
		t.Fatalf("records %+v, want one with delta {6 620}", got)
	}
	if st := s.Stats(); st.CounterResets != 1 {
		t.Errorf("counter resets %d, want 1", st.CounterResets)
	}
}

// TestStoreNAT: both tuples are kept, distinct, as the kernel reported them.
func TestStoreNAT(t *testing.T) {
	s := newTestStore(16)
	c := sconn(1, 1, 60, 1, 60)
	vip, backend := netip.MustParseAddr("10.96.0.10").As16(), netip.MustParseAddr("10.244.1.7").As16()
	c.Orig.Dst, c.Reply.Src = vip, backend
	c.Status |= StatusDstNAT | StatusDstNATDone
	s.Update(c, sec(0))
	got := collect(s, sec(10))
	if len(got) != 1 || got[0].Orig != c.Orig || got[0].Reply != c.Reply || got[0].Orig.Dst != vip || got[0].Reply.Src != backend || !got[0].Status.DNAT() {
		t.Fatalf("records %+v", got)
	}
}

// TestStoreReasons: active, idle and stale with a fake clock.
func TestStoreReasons(t *testing.T) {
	s := newTestStore(16) // active 10s, idle 30s, stale 100s
	s.Update(sconn(1, 1, 100, 0, 0), sec(0))
	if got := collect(s, sec(9)); len(got) != 0 {
		t.Fatalf("before any timeout: %+v", got)
	}
	if got := collect(s, sec(10)); len(got) != 1 || got[0].Reason != ExportActive {
		t.Fatalf("active: %+v", got)
	}
	// Counts move at 15, then nothing: active at 20 (last export 10),
	// and once exported, nothing more until new counts.
	s.Update(sconn(1, 2, 200, 0, 0), sec(15))
	s.Update(sconn(1, 2, 200, 0, 0), sec(19))
	if got := collect(s, sec(20)); len(got) != 1 || got[0].Reason != ExportActive || got[0].Last != sec(15) {
		t.Fatalf("active 2: %+v", got)
	}
	if got := collect(s, sec(60)); len(got) != 0 {
		t.Fatalf("no new counts: %+v", got)
	}
	// Idle: counts at 61 not exported by active (export at 20+10 passed,
	// but idle has priority once counters have been still for 30s).
	s.Update(sconn(1, 3, 300, 0, 0), sec(61))
	s.Update(sconn(1, 3, 300, 0, 0), sec(91))
	if got := collect(s, sec(91)); len(got) != 1 || got[0].Reason != ExportIdle || got[0].DeltaOrig != (Counters{1, 100}) {
		t.Fatalf("idle: %+v", got)
	}
	if s.Len() != 1 {
		t.Fatalf("idle must keep the state")
	}
	// Stale: no update at all for 100s after 91: removed, without a
	// record since all its counts went out (none is empty).
	if got := collect(s, sec(190)); len(got) != 0 || s.Len() != 1 {
		t.Fatalf("before stale: %+v, len %d", got, s.Len())
	}
	if got := collect(s, sec(191)); len(got) != 0 || s.Len() != 0 {
		t.Fatalf("stale: %+v, len %d; want removed without an empty record", got, s.Len())
	}
	// With counts not yet exported (no Export ran in between), the stale
	// connection's last record carries them.
	s.Update(sconn(2, 4, 400, 1, 50), sec(200))
	got := collect(s, sec(300))
	if len(got) != 1 || got[0].Reason != ExportStale || got[0].DeltaOrig != (Counters{4, 400}) || s.Len() != 0 {
		t.Fatalf("stale with counts: %+v, len %d", got, s.Len())
	}
	st := s.Stats()
	if st.Exported != [NumExportReasons]uint64{ExportActive: 2, ExportIdle: 1, ExportStale: 1} {
		t.Errorf("exported by reason %v", st.Exported)
	}
}

// TestStoreEnd: the dying bit, TCP TIME_WAIT or CLOSE, a destroy event and
// a connection missing from the dump all end the connection with exactly
// one final record of the remaining delta; a finished entry still in the
// table stays silent and is removed once it goes.
func TestStoreEnd(t *testing.T) {
	cases := []struct {
		name string
		end  func(c *Conn) // nil: missing from the next dump
	}{
		{"dying", func(c *Conn) { c.Status |= StatusDying }},
		{"time_wait", func(c *Conn) { c.Orig.Proto, c.Has, c.TCPState = 6, c.Has|HasTCP, TCPTimeWait }},
		{"close", func(c *Conn) { c.Orig.Proto, c.Has, c.TCPState = 6, c.Has|HasTCP, TCPClose }},
		{"destroy", func(c *Conn) { c.Type = MsgDelete }},
		{"gone", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestStore(16)
			start := func(c *Conn) *Conn {
				if tc.name == "time_wait" || tc.name == "close" {
					c.Orig.Proto, c.Reply.Proto, c.Has, c.TCPState = 6, 6, c.Has|HasTCP, TCPEstablished
				}
				return c
			}
			s.Update(start(sconn(1, 10, 1000, 10, 2000)), sec(0))
			s.Update(start(sconn(2, 1, 1, 1, 1)), sec(0))
			s.EndPoll(sec(0))
			collect(s, sec(10))
			if tc.end != nil {
				c := start(sconn(1, 13, 1300, 11, 2100))
				tc.end(c)
				s.Update(c, sec(11))
			}
			s.Update(start(sconn(2, 1, 1, 1, 1)), sec(11))
			s.EndPoll(sec(11))
			got := collect(s, sec(12))
			if tc.end == nil {
				// All its counts went out at 10; the counts after the last
				// poll are unknown: no record, not an empty one.
				if len(got) != 0 || s.Len() != 1 {
					t.Fatalf("final records %+v, len %d; want none, the connection removed", got, s.Len())
				}
			} else if len(got) != 1 || got[0].Reason != ExportEnd || got[0].DeltaOrig != (Counters{3, 300}) || got[0].Orig != start(sconn(1, 0, 0, 0, 0)).Orig {
				t.Fatalf("final records %+v, want one end record with delta {3 300}", got)
			}
			// Still listed (TIME_WAIT, dying): silent, not new again.
			if tc.end != nil && tc.name != "destroy" {
				c := start(sconn(1, 14, 1400, 11, 2100))
				tc.end(c)
				s.Update(c, sec(13))
			}
			s.Update(start(sconn(2, 1, 1, 1, 1)), sec(13))
			s.EndPoll(sec(13))
			if got := collect(s, sec(100)); len(got) != 0 {
				t.Fatalf("after the end: %+v", got)
			}
			s.Update(start(sconn(2, 1, 1, 1, 1)), sec(101))
			s.EndPoll(sec(101))
			got = collect(s, sec(101))
			if tc.end != nil && tc.name != "destroy" {
				// The packet the kernel counted after the end record (a
				// retransmission in TIME_WAIT) goes out once the entry goes.
				if len(got) != 1 || got[0].Reason != ExportEnd || got[0].DeltaOrig != (Counters{1, 100}) || got[0].DeltaReply != (Counters{}) {
					t.Fatalf("when the ended entry goes: %+v; want one end record of 1 packet, 100 bytes", got)
				}
			} else if len(got) != 0 {
				t.Fatalf("when the ended entry goes: %+v; want none", got)
			}
			if s.Len() != 1 || s.Stats().New != 2 {
				t.Fatalf("len %d stats %+v: the ended connection must be gone and never re-added", s.Len(), s.Stats())
			}
		})
	}
}

// TestStoreShortLived: a destroy event for a connection never seen in a
// dump (shorter than the poll interval) gives one end record with all
// its counts.
func TestStoreShortLived(t *testing.T) {
	s := newTestStore(16)
	c := sconn(7, 4, 400, 4, 800)
	c.Type = MsgDelete
	s.Update(c, sec(1))
	got := collect(s, sec(2))
	if len(got) != 1 || got[0].Reason != ExportEnd || got[0].DeltaOrig != (Counters{4, 400}) || got[0].DeltaReply != (Counters{4, 800}) || s.Len() != 0 {
		t.Fatalf("records %+v len %d", got, s.Len())
	}
}

// TestStoreRestart: a finished TCP connection whose tuple is reused by a
// new connection (new id, established again) starts a new incarnation.
func TestStoreRestart(t *testing.T) {
	s := newTestStore(16)
	c := sconn(1, 5, 500, 5, 500)
	c.Orig.Proto, c.Has, c.TCPState = 6, c.Has|HasTCP, TCPTimeWait
	s.Update(c, sec(0))
	if got := collect(s, sec(1)); len(got) != 1 || got[0].Reason != ExportEnd {
		t.Fatalf("end: %+v", got)
	}
	c = sconn(1, 2, 200, 1, 100)
	c.Orig.Proto, c.Has, c.TCPState, c.ID = 6, c.Has|HasTCP, TCPEstablished, 99
	s.Update(c, sec(2))
	got := collect(s, sec(20))
	if len(got) != 1 || got[0].DeltaOrig != (Counters{2, 200}) || got[0].First != sec(2) || s.Stats().Restarted != 1 {
		t.Fatalf("restart: %+v %+v", got, s.Stats())
	}
}

// TestStoreBound: 1,000 connections through a store of 100 never hold
// more than 100; the 900 evicted are counted and exported as full.
func TestStoreBound(t *testing.T) {
	s := NewStore(StoreConfig{MaxConns: 100, MaxPending: 1000, IdleTimeout: time.Hour, ActiveTimeout: time.Hour, StaleTimeout: time.Hour})
	var full, conns int
	for i := range 1000 {
		s.Update(sconn(i, uint64(i+1), 100, 0, 0), sec(i))
		if s.Len() > 100 {
			t.Fatalf("after %d connections the store holds %d", i+1, s.Len())
		}
		if i%50 == 49 {
			for _, x := range collect(s, sec(i)) {
				if x.Reason != ExportFull {
					t.Fatalf("unexpected record %+v", x)
				}
				if x.DeltaOrig.Packets != uint64(x.Orig.SrcPort-1024+1) {
					t.Fatalf("evicted record %+v lost its counts", x)
				}
				full++
			}
		}
	}
	conns = s.Len()
	st := s.Stats()
	if conns != 100 || st.Evicted != 900 || full != 900 || st.Exported[ExportFull] != 900 || st.EvictedUnexported != 0 {
		t.Fatalf("len %d, full records %d, stats %+v", conns, full, st)
	}
	// The victims were the oldest: connections 900..999 are held.
	for i := range 100 {
		if _, ok := s.index[connKey{orig: sconn(900+i, 0, 0, 0, 0).Orig}]; !ok {
			t.Fatalf("connection %d was evicted instead of an older one", 900+i)
		}
	}
	// A full pending list: further evictions are counted as lost.
	s2 := NewStore(StoreConfig{MaxConns: 10, MaxPending: 5})
	for i := range 30 {
		s2.Update(sconn(i, 1, 1, 0, 0), sec(i))
	}
	if st := s2.Stats(); st.Evicted != 20 || st.Pending != 5 || st.EvictedUnexported != 15 || st.Conns != 10 {
		t.Fatalf("stats %+v", st)
	}
}

// TestStoreRecallLost: a record that could not be queued at eviction
// (pending list full) is not lost if the connection is seen again while
// remembered: its counts go out with the connection's next record, once.
func TestStoreRecallLost(t *testing.T) {
	s := NewStore(StoreConfig{MaxConns: 1, MaxPending: 1, Remember: 8, IdleTimeout: time.Hour, ActiveTimeout: time.Hour, StaleTimeout: time.Hour})
	tot := map[uint16]uint64{}
	emit := func(x *Export) { tot[x.Orig.SrcPort-1024] += x.DeltaOrig.Packets }
	// Poll 1: 0 is evicted by 1 (queued), 1 by 2 (the pending list is
	// full: its record is lost for now).
	for i := range 3 {
		s.Update(sconn(i, 10, 100, 0, 0), sec(1))
	}
	s.Export(sec(1), emit)
	if st := s.Stats(); st.EvictedUnexported != 1 || tot[0] != 10 || tot[1] != 0 {
		t.Fatalf("after poll 1: exported %v, stats %+v", tot, st)
	}
	// Poll 2: 1 comes back with 20 packets: all 20 are owed.
	s.Update(sconn(1, 20, 200, 0, 0), sec(2))
	s.Flush(sec(3), emit)
	if tot[0] != 10 || tot[1] != 20 || tot[2] != 10 || s.Stats().Recalled != 1 {
		t.Errorf("exported %v, want 0:10 1:20 2:10; stats %+v", tot, s.Stats())
	}
}

// TestStoreStaleEvent: an event read after a newer dump carries lower
// counters; it is ignored, not taken for a reset, so nothing is counted
// twice. A dump's lower reading is a reset.
func TestStoreStaleEvent(t *testing.T) {
	s := NewStore(StoreConfig{MaxConns: 4, IdleTimeout: time.Hour, ActiveTimeout: time.Hour, StaleTimeout: time.Hour})
	s.Update(sconn(0, 10, 1000, 0, 0), sec(1)) // dump
	ev := sconn(0, 7, 700, 0, 0)
	ev.Flags = 0 // an event, queued before the dump
	s.Update(ev, sec(1))
	s.Update(sconn(0, 12, 1200, 0, 0), sec(2))
	var out []Export
	s.Flush(sec(3), func(x *Export) { out = append(out, *x) })
	if len(out) != 1 || out[0].DeltaOrig != (Counters{12, 1200}) || s.Stats().StaleEvents != 1 || s.Stats().CounterResets != 0 {
		t.Errorf("records %+v, stats %+v; want one of 12 packets, one stale event", out, s.Stats())
	}
}

// TestStoreFilters: zone set and mark/mask.
func TestStoreFilters(t *testing.T) {
	s := NewStore(StoreConfig{MaxConns: 16, Zones: []uint16{0, 7, 300}, Mark: 0x10, MarkMask: 0xf0})
	add := func(i int, zone uint16, mark uint32) {
		c := sconn(i, 1, 1, 0, 0)
		c.Zone, c.Mark = zone, mark
		s.Update(c, sec(0))
	}
	add(1, 7, 0x11)   // kept
	add(2, 300, 0x1f) // kept
	add(3, 8, 0x10)   // zone out
	add(4, 7, 0x20)   // mark out
	add(5, 0, 0x0)    // mark out
	add(6, 364, 0x10) // zone out (same bit index as 300 mod 64)
	if st := s.Stats(); st.Conns != 2 || st.Filtered != 4 {
		t.Fatalf("stats %+v", st)
	}
}

// TestStoreProperty: random polls with random counter growth, resets,
// removals, replacements (new id) and exports at random times; over each
// life of a connection the exported deltas add up to its final counters,
// plus the readings just before each reset (carried, not lost), minus
// the readings just after (clamped: the base restarts there).
func TestStoreProperty(t *testing.T) {
	const n = 60
	t.Run("roomy", func(t *testing.T) {
		storeProperty(t, StoreConfig{MaxConns: 2 * n}, func(st StoreStats) bool { return st.Evicted == 0 })
	})
	// A store of a third of the connections: evictions every poll, and
	// the remembered counters keep every count exported exactly once.
	t.Run("evicting", func(t *testing.T) {
		storeProperty(t, StoreConfig{MaxConns: n / 3, MaxPending: 100 * n, Remember: 2 * n},
			func(st StoreStats) bool {
				return st.Evicted > 100 && st.Recalled > 100 && st.EvictedUnexported == 0
			})
	})
}

// storeProperty drives a store of cfg through random polls of n
// connections (new, growing, reset, gone) and checks that what it exports
// per connection adds up to the connection's counts, and that the stats
// pass check.
func storeProperty(t *testing.T, cfg StoreConfig, check func(StoreStats) bool) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		const n = 60
		cfg.ActiveTimeout, cfg.IdleTimeout, cfg.StaleTimeout = 3*time.Second, 5*time.Second, time.Hour
		s := NewStore(cfg)
		type model struct {
			cur, lost, carry [2]Counters
			alive            bool
			id               uint32
		}
		var m [n]model
		var lives uint32
		exported := map[int][2]Counters{}
		var want [n][2]Counters // per connection: sum of final counters minus losses over all lives
		emit := func(x *Export) {
			i := int(x.Orig.SrcPort - 1024)
			e := exported[i]
			e[0].Packets += x.DeltaOrig.Packets
			e[0].Bytes += x.DeltaOrig.Bytes
			e[1].Packets += x.DeltaReply.Packets
			e[1].Bytes += x.DeltaReply.Bytes
			exported[i] = e
		}
		endLife := func(i int) {
			for d := range 2 {
				want[i][d].Packets += m[i].carry[d].Packets + m[i].cur[d].Packets - m[i].lost[d].Packets
				want[i][d].Bytes += m[i].carry[d].Bytes + m[i].cur[d].Bytes - m[i].lost[d].Bytes
			}
			m[i] = model{}
		}
		for poll := range 200 {
			now := sec(poll)
			for i := range n {
				if !m[i].alive {
					if r.IntN(4) != 0 {
						continue
					}
					m[i].alive = true
					lives++
					m[i].id = lives
				} else if r.IntN(20) == 0 { // gone before this dump
					endLife(i)
					continue
				}
				for d := range 2 {
					if r.IntN(30) == 0 { // counter reset: the new reading is lost
						v := Counters{uint64(r.IntN(3)), uint64(r.IntN(300))}
						if v.Packets < m[i].cur[d].Packets || v.Bytes < m[i].cur[d].Bytes {
							m[i].lost[d].Packets += v.Packets
							m[i].lost[d].Bytes += v.Bytes
							m[i].carry[d].Packets += m[i].cur[d].Packets
							m[i].carry[d].Bytes += m[i].cur[d].Bytes
							m[i].cur[d] = v
							continue
						}
					}
					if r.IntN(3) == 0 {
						p := uint64(r.IntN(10))
						m[i].cur[d].Packets += p
						m[i].cur[d].Bytes += p * uint64(40+r.IntN(1400))
					}
				}
				c := sconn(i, m[i].cur[0].Packets, m[i].cur[0].Bytes, m[i].cur[1].Packets, m[i].cur[1].Bytes)
				c.ID = m[i].id
				s.Update(c, now)
			}
			s.EndPoll(now)
			if r.IntN(3) == 0 {
				s.Export(now, emit)
			}
		}
		for i := range n {
			if m[i].alive {
				endLife(i)
			}
		}
		s.EndPoll(sec(1000)) // everything gone
		s.Export(sec(1000), emit)
		for i := range n {
			if exported[i] != want[i] {
				t.Fatalf("seed %d conn %d: exported %v, want %v", seed, i, exported[i], want[i])
			}
		}
		if s.Len() != 0 {
			t.Fatalf("seed %d: %d connections left", seed, s.Len())
		}
		if st := s.Stats(); !check(st) {
			t.Fatalf("seed %d: stats %+v", seed, st)
		}
	}
}

// TestStoreUpdateAllocs: a steady-state poll cycle with churn (new,
// gone, exported) allocates nothing.
func TestStoreUpdateAllocs(t *testing.T) {
	const n = 1000
	s := NewStore(StoreConfig{MaxConns: 2 * n, ActiveTimeout: time.Second})
	conns := make([]*Conn, 2*n)
	for i := range conns {
		conns[i] = sconn(i, 1, 100, 1, 100)
	}
	off, poll := 0, 0
	cycle := func() {
		now := sec(poll)
		for i := range n {
			c := conns[(off+i)%len(conns)]
			c.CountersOrig.Packets++
			s.Update(c, now)
		}
		s.EndPoll(now)
		s.Export(now, func(*Export) {})
		off += n / 10
		poll++
	}
	for range 50 {
		cycle()
	}
	if a := testing.AllocsPerRun(50, cycle); a != 0 {
		t.Fatalf("%v allocs per poll cycle, want 0", a)
	}
}
