package conntrack

import "math"

// This file holds the store's slots: allocation and eviction of the
// stalest connection, the pending list of evicted connections' records,
// the activity list, and the memo of evicted connections that lets one
// seen again resume from its counters (see the layout note in store.go).

// memoKey identifies a remembered connection: its tuple and zone, and
// its kernel id, so that a replaced entry's late destroy event is told
// from the entry that holds its tuple now.
type memoKey struct {
	connKey
	id uint32
}

// memo is what the store keeps of an evicted or replaced connection.
type memo struct {
	cur, base, owed [2]Counters // as in entry: what was exported is cur-base+owed short of cur
	first, exported int64       // as in entry
	seen            int64       // last update
	slot            int32       // its ring slot, so a stale slot does not delete a newer memo
	flags           uint8       // entry flags: ended, closed (its end record went out), absent, counted, exported
}

// recall resumes a connection evicted earlier from its memo, if there is
// one for the same kernel entry (same id; without ids, not a live state
// after its end): its counters, times and flags, so that Update goes on
// as if it had never been evicted. It reports whether it did.
func (s *Store) recall(e *entry, c *Conn) bool {
	if s.memo == nil {
		return false
	}
	mk := memoKey{e.key, 0}
	if c.Has&HasID != 0 {
		mk.id = c.ID
	}
	m, ok := s.memo[mk]
	if !ok {
		return false
	}
	delete(s.memo, mk)
	e.id, e.flags = mk.id, m.flags
	if s.another(e, c) {
		e.id, e.flags = 0, 0
		return false // without ids: a live state after the end, a new connection
	}
	s.stats.Recalled++
	// A record that could not be queued at eviction left base behind
	// cur: those counts go out with the next record.
	e.cur, e.base, e.owed = m.cur, m.base, m.owed
	e.first, e.exported = m.first, m.exported
	return true
}

// remember keeps an evicted or replaced connection's counters in the
// memo ring, forgetting the oldest memo when the ring is full. A
// forgotten memo of an ended connection whose entry was last seen a
// stale timeout ago is not counted: the kernel dropped it long since.
func (s *Store) remember(e *entry, n int64) {
	p := s.memoPos
	if old := s.memoKey[p]; old != (memoKey{}) {
		if m, ok := s.memo[old]; ok && m.slot == p {
			delete(s.memo, old)
			switch {
			case m.flags&flagClosed == 0:
				s.stats.Forgotten++
			case n-m.seen < int64(s.cfg.StaleTimeout):
				s.stats.ForgottenEnded++
			}
		}
	}
	mk := memoKey{e.key, e.id}
	s.memoKey[p] = mk
	s.memo[mk] = memo{cur: e.cur, base: e.base, owed: e.owed, first: e.first, exported: e.exported, seen: e.seen,
		slot: p, flags: e.flags}
	if s.memoPos++; int(s.memoPos) == len(s.memoKey) {
		s.memoPos = 0
	}
}

// retire ends held entry e because another kernel entry took its tuple:
// its record goes on the pending list if it owes one, and, with events,
// it is remembered as ended, so that its destroy event, which may come
// later, adds only what the kernel counted after that record.
func (s *Store) retire(e *entry, n int64) {
	if s.owes(e) {
		s.queue(e, n, ExportEnd) // if the list is full, the memo keeps the counts owed
	}
	if s.memo != nil && s.cfg.Events && e.flags&flagGone == 0 && e.id != 0 {
		e.flags |= flagEnded | flagClosed | flagAbsent
		s.remember(e, n)
	}
}

// deleteOther handles the destroy event c of an entry on tuple k other
// than the one the store holds: a replaced or evicted entry remembered
// in the memo gets one more end record if the kernel counted more since
// its last one; an entry never seen (its new event lost) gets its whole
// counts in one end record.
func (s *Store) deleteOther(k connKey, c *Conn, n int64) {
	e := entry{key: k, used: true, first: n, last: n, seen: n, exported: n, prev: -1, next: -1}
	mk := memoKey{k, c.ID}
	if m, ok := s.memo[mk]; ok {
		delete(s.memo, mk)
		s.stats.Recalled++
		e.cur, e.base, e.owed, e.first, e.exported, e.flags = m.cur, m.base, m.owed, m.first, m.exported, m.flags
	} else {
		s.stats.New++
	}
	e.id, e.reply, e.status, e.mark, e.tcpState = c.ID, c.Reply, c.Status, c.Mark, c.TCPState
	if c.Has&HasCountersOrig != 0 {
		s.counters(&e, 0, c.CountersOrig, true)
	}
	if c.Has&HasCountersReply != 0 {
		s.counters(&e, 1, c.CountersReply, true)
	}
	if c.Has&(HasCountersOrig|HasCountersReply) != 0 {
		e.flags |= flagCounted
	}
	if s.owes(&e) {
		s.queue(&e, n, ExportEnd)
	}
}

// alloc returns a free slot, evicting the connection with the oldest
// activity if the store is full.
func (s *Store) alloc(n int64) int32 {
	if s.free < 0 {
		s.evict(n)
	}
	i := s.free
	s.free = s.entries[i].next
	return i
}

// evict frees the slot at the head of the activity list. If the victim
// has counts not yet exported (or a final record owed), its record goes
// on the pending list, or is counted as lost when that list is full.
func (s *Store) evict(n int64) {
	i := s.head
	if i < 0 {
		return
	}
	e := &s.entries[i]
	s.stats.Evicted++
	ended := e.flags&(flagEnded|flagClosed) == flagEnded && !e.uncounted() // end record owed
	if e.unexported() || ended && s.owes(e) {
		if s.queue(e, n, ExportFull) && ended {
			e.flags |= flagClosed // its end record is the one just queued
		}
	} else if ended {
		e.flags |= flagClosed // all its counts went out: its end needs no record
	}
	if s.memo != nil && e.flags&flagGone == 0 {
		s.remember(e, n) // a record lost above is owed again if it is seen again
	}
	s.remove(i)
}

// queue puts e's record with reason r on the pending list for the next
// Export, or counts it as lost when the list is full; it reports whether
// the record was queued.
func (s *Store) queue(e *entry, n int64, r ExportReason) bool {
	if len(s.pending) == cap(s.pending) {
		s.stats.EvictedUnexported++
		return false
	}
	s.pending = s.pending[:len(s.pending)+1]
	s.fill(&s.pending[len(s.pending)-1], e, n, r)
	return true
}

// remove deletes entry i from the index and the activity list and puts
// its slot on the free list.
func (s *Store) remove(i int32) {
	e := &s.entries[i]
	delete(s.index, e.key)
	s.unlink(i)
	*e = entry{next: s.free}
	s.due[i] = math.MaxInt64
	s.free = i
}

// unlink takes entry i out of the activity list.
func (s *Store) unlink(i int32) {
	e := &s.entries[i]
	if e.prev >= 0 {
		s.entries[e.prev].next = e.next
	} else {
		s.head = e.next
	}
	if e.next >= 0 {
		s.entries[e.next].prev = e.prev
	} else {
		s.tail = e.prev
	}
	e.prev, e.next = -1, -1
}

// linkTail appends entry i to the activity list as the newest.
func (s *Store) linkTail(i int32) {
	e := &s.entries[i]
	e.prev, e.next = s.tail, -1
	if s.tail >= 0 {
		s.entries[s.tail].next = i
	} else {
		s.head = i
	}
	s.tail = i
}

// linkHead puts entry i first in the activity list (next to be evicted).
func (s *Store) linkHead(i int32) {
	e := &s.entries[i]
	e.prev, e.next = -1, s.head
	if s.head >= 0 {
		s.entries[s.head].prev = i
	} else {
		s.tail = i
	}
	s.head = i
}
