package conntrack

// This file holds the store's slots: allocation and eviction of the
// stalest connection, the pending list of evicted connections' records,
// the activity list, and the memo of evicted connections that lets one
// seen again resume from its counters (see the layout note in store.go).

// memo is what the store keeps of an evicted connection.
type memo struct {
	cur, base, owed [2]Counters // as in entry: what was exported is cur-base+owed short of cur
	id              uint32
	slot            int32 // its ring slot, so a stale slot does not delete a newer memo
	closed          bool  // its final record was emitted
}

// recall resumes a connection evicted earlier from its memo, if there is
// one for the same kernel entry: from its counters at eviction, or, when
// its final record was emitted and it is still ending, silent. It reports
// whether Update is done with c.
func (s *Store) recall(i int32, e *entry, c *Conn, n int64) bool {
	m, ok := s.memo[e.key]
	if !ok {
		return false
	}
	delete(s.memo, e.key)
	if c.Has&HasID != 0 && m.id != 0 && c.ID != m.id {
		return false // another entry on the same tuple: a new connection
	}
	s.stats.Recalled++
	s.stats.New--
	// A record that could not be queued at eviction left base behind
	// cur: those counts go out with the next record.
	e.cur, e.base, e.owed, e.id = m.cur, m.base, m.owed, m.id
	e.flags |= flagExported
	if m.closed && (c.Type == MsgDelete || endedState(c)) {
		if c.Type == MsgDelete {
			s.remove(i)
			return true
		}
		e.cur, e.base = [2]Counters{c.CountersOrig, c.CountersReply}, [2]Counters{c.CountersOrig, c.CountersReply}
		e.flags |= flagClosed
		e.seen, e.epoch = n, s.epoch
		s.unlink(i)
		s.linkHead(i)
		return true
	}
	return false
}

// remember keeps an evicted connection's counters in the memo ring,
// forgetting the oldest memo when the ring is full.
func (s *Store) remember(e *entry) {
	p := s.memoPos
	if old := s.memoKey[p]; old != (connKey{}) {
		if m, ok := s.memo[old]; ok && m.slot == p {
			delete(s.memo, old)
			s.stats.Forgotten++
		}
	}
	s.memoKey[p] = e.key
	s.memo[e.key] = memo{cur: e.cur, base: e.base, owed: e.owed, id: e.id, slot: p, closed: e.flags&flagClosed != 0}
	if s.memoPos++; int(s.memoPos) == len(s.memoKey) {
		s.memoPos = 0
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
	if e.flags&flagClosed == 0 && (e.unexported() || e.flags&flagEnded != 0) {
		if s.queue(e, n, ExportFull) && e.flags&flagEnded != 0 {
			e.flags |= flagClosed // its final record is the one just queued
		}
	}
	if s.memo != nil && e.flags&flagGone == 0 {
		s.remember(e) // a record lost above is owed again if it is seen again
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
