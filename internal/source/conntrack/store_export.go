package conntrack

import (
	"math"
	"time"
)

// This file holds the store's exports: the end of a dump, the periodic
// Export, the final Flush and the record they fill.

// EndPoll closes a full dump: every connection not seen since the
// previous EndPoll is gone from the kernel table (destroyed between two
// polls, or on its way out with its destroy event not read yet). Its
// last record goes out at the next Export; with events (StoreConfig.Events)
// it is then kept, silent, until its destroy event.
func (s *Store) EndPoll(now time.Time) {
	for i := range s.entries {
		e := &s.entries[i]
		if !e.used || e.epoch == s.epoch || e.flags&(flagGone|flagAbsent) != 0 {
			continue
		}
		s.stats.Vanished++
		switch {
		case e.flags&flagClosed != 0 && !s.cfg.Events && !e.unexported():
			s.remove(int32(i)) // ended, all exported, and no destroy event to wait for
		case s.cfg.Events:
			e.flags |= flagEnded | flagAbsent
			s.redue(int32(i))
		default:
			e.flags |= flagEnded | flagGone
			s.redue(int32(i))
		}
	}
	s.epoch++
}

// Export emits a record for every connection with new counts whose
// active or idle timeout expired, for every ended, stale or evicted one
// that owes one, and removes the connections the kernel dropped.
//
// Cost: a sequential read of one int64 per slot (the due index: 256 KiB
// for 32k slots) plus a visit of each connection due, not of every
// connection.
func (s *Store) Export(now time.Time, emit func(*Export)) {
	n := now.UnixNano()
	s.emitPending(emit)
	active, idle, stale := int64(s.cfg.ActiveTimeout), int64(s.cfg.IdleTimeout), int64(s.cfg.StaleTimeout)
	for i, d := range s.due {
		if d > n && !s.scanAll {
			continue
		}
		e := &s.entries[i]
		if !e.used {
			continue
		}
		s.exportEntry(int32(i), e, n, active, idle, stale, emit)
		if e.used {
			s.redue(int32(i))
		}
	}
}

// exportEntry is Export's work on live entry i at time n.
func (s *Store) exportEntry(i int32, e *entry, n, active, idle, stale int64, emit func(*Export)) {
	if e.flags&flagClosed != 0 {
		// Silent until the kernel drops it; then the counts it added
		// after the end record, if any, go out.
		if e.flags&flagGone == 0 && n-e.seen < stale {
			return
		}
		if e.unexported() {
			s.emit(e, n, ExportEnd, emit)
		}
		s.remove(i)
		return
	}
	var r ExportReason
	switch {
	case e.flags&flagEnded != 0 && !e.uncounted():
		r = ExportEnd
	case n-e.seen >= stale:
		r = ExportStale
	case e.flags&flagEnded != 0:
		return // known from events only: its counts come with the next dump or its destroy event
	case !e.unexported():
		return
	case n-e.last >= idle:
		r = ExportIdle
	case n-e.exported >= active:
		r = ExportActive
	default:
		return
	}
	if s.owes(e) {
		s.emit(e, n, r, emit)
	}
	switch {
	case r == ExportStale || e.flags&flagGone != 0:
		s.remove(i)
	case r == ExportEnd:
		// Still in the kernel table (TIME_WAIT, dying, destroy event
		// not read yet): keep it silent until it goes, so it is not
		// counted again, and make it the first eviction victim.
		e.flags |= flagClosed
		s.unlink(i)
		s.linkHead(i)
	}
}

// redue sets due[i] from entry i's state, as Export decides: now for an
// end record owed or a connection the kernel dropped, else the earliest
// of its stale, idle and active timeouts that apply.
func (s *Store) redue(i int32) {
	e := &s.entries[i]
	if !e.used {
		s.due[i] = math.MaxInt64
		return
	}
	d := e.seen + int64(s.cfg.StaleTimeout)
	switch {
	case e.flags&flagClosed != 0:
		if e.flags&flagGone != 0 {
			d = math.MinInt64
		}
	case e.flags&flagEnded != 0:
		if !e.uncounted() {
			d = math.MinInt64
		}
	case e.unexported():
		d = min(d, e.last+int64(s.cfg.IdleTimeout), e.exported+int64(s.cfg.ActiveTimeout))
	}
	s.due[i] = d
}

// Flush emits a last record for every connection with counts not yet
// exported (reason shutdown, or end for an ended one) and the pending
// records of evicted ones, then empties the store. It is for a reader
// that stops.
func (s *Store) Flush(now time.Time, emit func(*Export)) {
	n := now.UnixNano()
	s.emitPending(emit)
	for i := range s.entries {
		e := &s.entries[i]
		if !e.used {
			continue
		}
		ended := e.flags&(flagEnded|flagClosed) != 0
		if e.unexported() || ended && s.owes(e) {
			r := ExportShutdown
			if ended {
				r = ExportEnd
			}
			s.emit(e, n, r, emit)
		}
		s.remove(int32(i))
	}
}

// emitPending hands over the records of evicted and replaced connections.
func (s *Store) emitPending(emit func(*Export)) {
	for i := range s.pending {
		s.stats.Exported[s.pending[i].Reason]++
		emit(&s.pending[i])
	}
	clear(s.pending)
	s.pending = s.pending[:0]
}

// emit fills e's record with reason r at time n, counts it and hands it
// to fn.
func (s *Store) emit(e *entry, n int64, r ExportReason, fn func(*Export)) {
	s.fill(&s.ex, e, n, r)
	s.stats.Exported[r]++
	fn(&s.ex)
}

// fill writes e's record with reason r at time n into x and marks e
// exported.
func (s *Store) fill(x *Export, e *entry, n int64, r ExportReason) {
	*x = Export{
		Orig: e.key.orig, Reply: e.reply, Zone: e.key.zone, Mark: e.mark, Status: e.status, ID: e.id,
		Labels: e.labels, LabelLen: e.labelLen, TCPState: e.tcpState,
		DeltaOrig: e.delta(0), DeltaReply: e.delta(1), TotalOrig: e.cur[0], TotalReply: e.cur[1],
		First: time.Unix(0, e.first), Since: time.Unix(0, e.exported), Last: time.Unix(0, max(e.last, e.exported)),
		Exported: time.Unix(0, n), Reason: r,
	}
	e.base, e.owed, e.exported = e.cur, [2]Counters{}, n
	e.flags |= flagExported
}
