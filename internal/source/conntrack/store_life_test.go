package conntrack

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/nfnetlink"
)

// This file checks the store against a model of the kernel's table: TCP
// connections (tuple + kernel id) that open, count, reach TIME_WAIT,
// count a little more there, and are dropped, with their new, update and
// destroy events read before or after a dump, late (redelivered), lost
// (an overrun), or never sent (no event extension), and tuples reused by
// new entries. What the store exports per kernel entry must add up to
// what the kernel counted, exactly, with no empty record.

// lifeMsg builds a message about kernel entry id on tuple i (TCP
// 10.1.x.y:i → 192.0.2.9:443).
func lifeMsg(typ MsgType, i int, id uint32) *Conn {
	src := netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}).As16()
	dst := netip.AddrFrom4([4]byte{192, 0, 2, 9}).As16()
	c := &Conn{
		Type: typ, Family: 2,
		Has:    HasOrig | HasReply | HasStatus | HasID | HasTCP,
		Orig:   Tuple{Src: src, Dst: dst, SrcPort: uint16(2000 + i), DstPort: 443, Proto: 6},
		Reply:  Tuple{Src: dst, Dst: src, SrcPort: 443, DstPort: uint16(2000 + i), Proto: 6},
		Status: StatusConfirmed | StatusSeenReply,
		ID:     id, TCPState: TCPEstablished,
	}
	return c
}

// kentry is the model's kernel entry.
type kentry struct {
	id       uint32
	cur      [2]Counters
	timeWait bool
	events   bool // the entry has an event extension (a listener existed when it was made)
	listed   [2]Counters
	wasDump  bool // a dump listed it
}

// kevent is an event waiting to be read: at poll at, before the dump or
// after it (the Source reads the queued events between dump and EndPoll).
type kevent struct {
	at        int
	afterDump bool
	c         *Conn
}

func TestStoreLifeModel(t *testing.T) {
	const n = 40
	cases := []struct {
		name string
		cfg  StoreConfig
		// exact: every entry's records add up; else at most the forgotten
		// and lost ones may differ.
		exact bool
		check func(StoreStats) string
	}{
		{"roomy", StoreConfig{MaxConns: 4 * n}, true, func(st StoreStats) string {
			if st.Vanished == 0 || st.Evicted != 0 {
				return "want vanished entries and no eviction"
			}
			return ""
		}},
		{"evicting", StoreConfig{MaxConns: n / 4, MaxPending: 100 * n, Remember: 250 * n}, true, func(st StoreStats) string {
			if st.Evicted < 100 || st.Recalled < 100 || st.Forgotten+st.ForgottenEnded+st.EvictedUnexported != 0 {
				return "want evictions and recalls, nothing forgotten or lost"
			}
			return ""
		}},
		{"forgetting", StoreConfig{MaxConns: n / 4, MaxPending: 100 * n, Remember: n / 8}, false, func(st StoreStats) string {
			if st.ForgottenEnded == 0 {
				return "want ended connections forgotten past the bound"
			}
			return ""
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range uint64(12) {
				lifeModel(t, seed, n, tc.cfg, tc.exact, tc.check)
			}
		})
	}
}

func lifeModel(t *testing.T, seed uint64, n int, cfg StoreConfig, exact bool, check func(StoreStats) string) {
	r := rand.New(rand.NewPCG(seed, 22))
	cfg.Events = true
	cfg.ActiveTimeout, cfg.IdleTimeout, cfg.StaleTimeout = 3*time.Second, 5*time.Second, time.Hour
	s := NewStore(cfg)
	type life struct {
		tuple int
		id    uint32
	}
	table := make([]*kentry, n)
	want := map[life][2]Counters{} // what the store can know of each entry
	got := map[life][2]Counters{}
	var queue []kevent
	ids := uint32(seed) * 1_000_003
	empty := 0
	emit := func(x *Export) {
		l := life{int(x.Orig.SrcPort) - 2000, x.ID}
		if x.DeltaOrig == (Counters{}) && x.DeltaReply == (Counters{}) {
			empty++
		}
		g := got[l]
		g[0].Packets += x.DeltaOrig.Packets
		g[0].Bytes += x.DeltaOrig.Bytes
		g[1].Packets += x.DeltaReply.Packets
		g[1].Bytes += x.DeltaReply.Bytes
		got[l] = g
	}
	send := func(k *kentry, c *Conn, at int, lossy bool) {
		if !k.events || lossy && r.IntN(10) == 0 { // no extension, or lost in an overrun
			return
		}
		queue = append(queue, kevent{at: at, afterDump: r.IntN(3) == 0, c: c})
	}
	grow := func(k *kentry, max int) {
		for d := range 2 {
			p := uint64(r.IntN(max + 1))
			k.cur[d].Packets += p
			k.cur[d].Bytes += p * uint64(40+r.IntN(1400))
		}
	}
	destroy := func(i int, poll int) {
		k := table[i]
		table[i] = nil
		// The store can know the final counters if the destroy event
		// comes; else what the last dump showed.
		l := life{i, k.id}
		switch {
		case k.events:
			want[l] = k.cur
		case k.wasDump:
			want[l] = k.listed
		}
		c := lifeMsg(MsgDelete, i, k.id)
		c.Has |= HasCountersOrig | HasCountersReply
		c.CountersOrig, c.CountersReply = k.cur[0], k.cur[1]
		if k.timeWait {
			c.TCPState = TCPTimeWait
		}
		// A destroy event is redelivered until read: late, never lost.
		send(k, c, poll+r.IntN(4), false)
	}
	read := func(poll int, afterDump bool) {
		rest := queue[:0]
		for _, ev := range queue {
			if ev.at <= poll && (afterDump || !ev.afterDump) {
				s.Update(ev.c, sec(poll))
			} else {
				rest = append(rest, ev)
			}
		}
		queue = rest
	}
	const polls = 200
	for poll := range polls {
		for i := range n {
			k := table[i]
			switch {
			case k == nil:
				if r.IntN(5) != 0 {
					continue
				}
				ids++
				k = &kentry{id: ids*7919 + 1, events: r.IntN(10) != 0}
				table[i] = k
				grow(k, 5)
				c := lifeMsg(MsgNew, i, k.id)
				c.Flags = nfnetlink.FlagCreate
				c.TCPState = TCPSynSent
				send(k, c, poll, true)
			case r.IntN(10) == 0:
				grow(k, 2) // the last packets, after the last dump
				destroy(i, poll)
			case k.timeWait:
				if r.IntN(6) == 0 {
					grow(k, 1) // a retransmission in TIME_WAIT
				}
			default:
				grow(k, 10)
				if r.IntN(6) == 0 {
					k.timeWait = true
					c := lifeMsg(MsgNew, i, k.id)
					c.TCPState = TCPTimeWait
					send(k, c, poll, true)
				}
			}
		}
		read(poll, false)
		for i, k := range table {
			if k == nil {
				continue
			}
			c := lifeMsg(MsgNew, i, k.id)
			c.Flags = nfnetlink.FlagMulti
			c.Has |= HasCountersOrig | HasCountersReply
			c.CountersOrig, c.CountersReply = k.cur[0], k.cur[1]
			if k.timeWait {
				c.TCPState = TCPTimeWait
			}
			k.listed, k.wasDump = k.cur, true
			s.Update(c, sec(poll))
		}
		read(poll, true)
		s.EndPoll(sec(poll))
		if r.IntN(2) == 0 {
			s.Export(sec(poll), emit)
		}
	}
	for i := range table {
		if table[i] != nil {
			destroy(i, polls)
		}
	}
	for poll := polls; poll < polls+5; poll++ {
		read(poll, true)
		s.EndPoll(sec(poll))
		s.Export(sec(poll), emit)
	}
	s.Export(sec(polls).Add(2*time.Hour), emit) // entries whose destroy event never comes go stale
	st := s.Stats()
	if len(queue) != 0 || s.Len() != 0 {
		t.Fatalf("seed %d: %d events unread, %d connections held", seed, len(queue), s.Len())
	}
	if empty != 0 {
		t.Errorf("seed %d: %d empty records", seed, empty)
	}
	var bad []string
	for l, w := range want {
		if got[l] != w {
			bad = append(bad, fmt.Sprintf("tuple %d id %d: exported %v, kernel %v", l.tuple, l.id, got[l], w))
		}
	}
	for l, g := range got {
		if _, ok := want[l]; !ok {
			bad = append(bad, fmt.Sprintf("tuple %d id %d: exported %v for an entry the store cannot know", l.tuple, l.id, g))
		}
	}
	if exact && len(bad) > 0 || uint64(len(bad)) > st.Forgotten+st.ForgottenEnded+st.EvictedUnexported {
		t.Fatalf("seed %d: %d of %d entries wrong (stats %+v): %v", seed, len(bad), len(want), st, bad[:min(len(bad), 5)])
	}
	if msg := check(st); msg != "" {
		t.Fatalf("seed %d: %s; stats %+v", seed, msg, st)
	}
}
