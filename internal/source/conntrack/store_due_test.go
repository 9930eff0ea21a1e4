package conntrack

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/nfnetlink"
)

// The due index must never be late nor change what goes out: a store
// whose Export visits only the entries due emits exactly what a store
// visiting every entry emits, record for record, in the same order, at
// the same Export, through random dumps, events, restarts, dying and
// TIME_WAIT connections, vanishing ones, evictions and timeouts of every
// kind at random times.
func TestDueIndexMatchesFullScan(t *testing.T) {
	for _, events := range []bool{false, true} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("events=%v/seed=%d", events, seed), func(t *testing.T) {
				dueMatchesScan(t, events, seed)
			})
		}
	}
}

func dueMatchesScan(t *testing.T, events bool, seed uint64) {
	cfg := StoreConfig{MaxConns: 24, MaxPending: 8, ActiveTimeout: 7 * time.Second, IdleTimeout: 5 * time.Second,
		StaleTimeout: 20 * time.Second, Events: events}
	idx, ref := NewStore(cfg), NewStore(cfg)
	ref.scanAll = true
	rng := rand.New(rand.NewPCG(seed, 99))

	const tuples = 60
	type state struct {
		id        uint32
		po, pr    uint64
		dying, tw bool
		inTable   bool
	}
	conns := make([]state, tuples)
	nextID := uint32(1)
	for i := range conns {
		conns[i] = state{id: nextID, po: 1, pr: 1, inTable: rng.IntN(2) == 0}
		nextID++
	}
	conn := func(i int) *Conn {
		st := &conns[i]
		c := sconn(i, st.po, 100*st.po, st.pr, 100*st.pr)
		c.ID = st.id
		if st.dying {
			c.Status |= StatusDying
		}
		if st.tw {
			c.Orig.Proto, c.Reply.Proto = 6, 6
			c.Has |= HasTCP
			c.TCPState = TCPTimeWait
		}
		return c
	}
	now := t0
	var exports, records int
	for step := range 4000 {
		now = now.Add(time.Duration(rng.Int64N(int64(1500 * time.Millisecond))))
		if rng.IntN(300) == 0 {
			now = now.Add(cfg.StaleTimeout) // a long quiet spell: no dump saw anything (stale)
		}
		switch op := rng.IntN(100); {
		case op < 4: // a full dump: every connection in the table, then EndPoll
			for i := range conns {
				st := &conns[i]
				if !st.inTable {
					continue
				}
				if rng.IntN(3) == 0 {
					st.po += uint64(rng.IntN(3))
					st.pr += uint64(rng.IntN(2))
				}
				c := conn(i)
				idx.Update(c, now)
				ref.Update(c, now)
			}
			idx.EndPoll(now)
			ref.EndPoll(now)
		case op < 60: // one connection changes and is listed, or an event comes
			i := rng.IntN(tuples)
			st := &conns[i]
			switch rng.IntN(10) {
			case 0:
				st.dying = true
			case 1:
				st.tw = !st.tw
			case 2: // the kernel replaced it: a new entry on the same tuple
				st.id, st.po, st.pr, st.dying, st.tw = nextID, 1, 0, false, false
				nextID++
				st.inTable = true
			case 3:
				st.inTable = !st.inTable
			default:
				st.po += uint64(rng.IntN(4))
				st.pr += uint64(rng.IntN(4))
			}
			c := conn(i)
			switch {
			case events && rng.IntN(4) == 0: // a destroy event
				c.Type, c.Flags = MsgDelete, 0
				st.inTable = false
			case events && rng.IntN(3) == 0: // an update event, counters or not
				c.Flags = 0
				if rng.IntN(2) == 0 {
					c.Has &^= HasCountersOrig | HasCountersReply
				}
			case !st.inTable:
				continue
			default:
				c.Flags = nfnetlink.FlagMulti
			}
			idx.Update(c, now)
			ref.Update(c, now)
		default: // an export
			var a, b []Export
			idx.Export(now, func(x *Export) { a = append(a, *x) })
			ref.Export(now, func(x *Export) { b = append(b, *x) })
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("step %d: the index exported %d records, the full scan %d:\n%+v\n%+v", step, len(a), len(b), a, b)
			}
			exports++
			records += len(a)
		}
		if idx.Len() != ref.Len() {
			t.Fatalf("step %d: %d entries held, the full scan %d", step, idx.Len(), ref.Len())
		}
	}
	if is, rs := idx.Stats(), ref.Stats(); !reflect.DeepEqual(is, rs) {
		t.Fatalf("stats differ:\nindex %+v\nscan  %+v", is, rs)
	}
	// The run must have exercised every kind of export, or it proves little.
	st := idx.Stats()
	for r := ExportActive; r <= ExportFull; r++ {
		if st.Exported[r] == 0 {
			t.Errorf("no %v export in %d exports (%d records): the random run misses a case", r, exports, records)
		}
	}
}
