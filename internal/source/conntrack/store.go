package conntrack

import (
	"time"
)

// This file is the connection store: the poller feeds it every Conn of a
// dump (and later every event), and Export turns what changed into export
// records with delta counters and a reason, in the manner of Antrea's
// Flow Exporter connection store, but bounded and without allocating.
//
// Layout: entries live in one slice preallocated to MaxConns; a Go map
// from a fixed-size comparable key (original tuple + zone, 46 bytes, no
// pointers) to an int32 index finds them, and freed slots go on a free
// list. The trick in one line: pointer-free entries in a preallocated
// slice, indexed by a preallocated map of pointer-free keys, make Update
// allocation-free and invisible to the garbage collector's scan.
//
// Memory is bounded: at most MaxConns entries plus MaxPending evicted
// records waiting for the next Export, whatever happens downstream.
//
// A live connection evicted when the store is full is seen again in the
// next dump. So that the counts it had at eviction are not exported
// twice, the store remembers the key, kernel id and counters of the last
// Remember evicted connections (a FIFO ring beside a preallocated map):
// a remembered connection comes back from its counters at eviction, a
// finished one comes back silent. Past Remember evictions between two
// sightings, the oldest are forgotten and come back from zero (counted in
// StoreStats.Forgotten).

// ExportReason says why an Export record was emitted.
type ExportReason uint8

// Export reasons, counted in StoreStats.Exported.
const (
	ExportActive     ExportReason = iota // active timeout since the last export, state kept
	ExportIdle                           // no new counts for the idle timeout, state kept
	ExportEnd                            // TCP TIME_WAIT/CLOSE, dying bit, destroyed, or gone from the dump
	ExportStale                          // held without any update for the stale timeout, removed
	ExportFull                           // evicted because the store was full
	ExportShutdown                       // Flush: the reader stops, state dropped
	NumExportReasons                     // number of reasons (array size)
)

var exportReasonNames = [NumExportReasons]string{"active", "idle", "end", "stale", "full", "shutdown"}

// String returns the reason's label (as for flowEndReason and metrics).
func (r ExportReason) String() string {
	if r < NumExportReasons {
		return exportReasonNames[r]
	}
	return "unknown"
}

// Defaults of StoreConfig.
const (
	DefaultMaxConns      = 65536
	DefaultActiveTimeout = 60 * time.Second
	DefaultIdleTimeout   = 15 * time.Second
	DefaultStaleTimeout  = 5 * time.Minute
)

// StoreConfig configures a Store. Zero fields take the defaults.
type StoreConfig struct {
	// MaxConns bounds the number of connections held (default
	// DefaultMaxConns). A new connection in a full store evicts the one
	// with the oldest activity.
	MaxConns int
	// MaxPending bounds the records of evicted connections waiting for
	// the next Export (default MaxConns). Beyond it an eviction is
	// counted in EvictedUnexported and its remaining counts are lost.
	MaxPending int
	// ActiveTimeout: a connection with new counts is exported when its
	// last export is this old.
	ActiveTimeout time.Duration
	// IdleTimeout: a connection with unexported counts is exported when
	// its counters have not moved for this long.
	IdleTimeout time.Duration
	// StaleTimeout: a connection not updated at all for this long (its
	// poller or event stream stopped) is exported a last time and removed.
	StaleTimeout time.Duration
	// Zones keeps only connections in these conntrack zones (empty: all).
	Zones []uint16
	// Mark and MarkMask keep only connections with Mark&MarkMask == Mark
	// (MarkMask 0: all).
	Mark, MarkMask uint32
	// Remember bounds the evicted connections whose counters are kept so
	// that they resume where they were if seen again (default
	// MaxConns/4; negative: none). About 100 bytes each.
	Remember int
	// Labels, if not all zero, keeps only connections with at least one
	// of these conntrack label bits set (bit i is byte i/8, bit i%8, as
	// the kernel lays out CTA_LABELS).
	Labels [labelsLen]byte
}

// StoreStats are a Store's counters.
type StoreStats struct {
	Conns             int                      // connections held now
	Pending           int                      // evicted records waiting for Export
	New               uint64                   // connections added
	Updated           uint64                   // updates of held connections
	Exported          [NumExportReasons]uint64 // records emitted, by reason
	Evicted           uint64                   // connections evicted because the store was full
	EvictedUnexported uint64                   // records of evicted (or replaced) connections lost: pending list full
	CounterResets     uint64                   // counters that went backwards (clamped to a zero delta)
	Filtered          uint64                   // updates dropped by the zone or mark filter
	Restarted         uint64                   // tuples seen again as a new kernel entry (new id, or alive after its end)
	Recalled          uint64                   // evicted connections seen again and resumed from their counters at eviction
	Forgotten         uint64                   // evicted connections whose counters were dropped from the Remember ring unseen
	StaleEvents       uint64                   // event readings older than the last dump (lower counters), ignored
}

// Export is one export record. Emit callbacks get a pointer that is only
// valid during the call: copy what must outlive it.
type Export struct {
	Orig, Reply Tuple // original and reply direction: they differ under NAT
	Zone        uint16
	Mark        uint32
	Status      Status
	ID          uint32 // kernel conntrack id (0: not reported)
	Labels      [labelsLen]byte
	LabelLen    uint8
	TCPState    uint8 // TCP* constant, for TCP

	// DeltaOrig and DeltaReply are the counts since the previous export
	// of this connection, per direction.
	DeltaOrig, DeltaReply Counters
	// TotalOrig and TotalReply are the kernel's counters at the last update.
	TotalOrig, TotalReply Counters

	First    time.Time // start of the connection: the kernel's timestamp if it sent one, else first seen by the store
	Since    time.Time // start of this record's deltas: the previous export, or First
	Last     time.Time // when the store last saw the counters change (or first seen): a poll or event time
	Exported time.Time // time of this export
	Reason   ExportReason
}

// entry flags.
const (
	flagEnded    uint8 = 1 << iota // final export owed (end reason)
	flagGone                       // destroyed or missing from the dump: remove after the final export
	flagClosed                     // final export done, still present in the kernel table: kept silent
	flagExported                   // exported at least once
)

// connKey identifies a connection: its original tuple and zone. It is
// comparable and pointer-free, so map hashing is one memhash.
type connKey struct {
	orig Tuple
	zone uint16
}

// entry is one connection. Times are Unix nanoseconds, so the slice holds
// no pointers and the garbage collector never scans it.
type entry struct {
	key      connKey
	reply    Tuple
	status   Status
	mark     uint32
	id       uint32
	labels   [labelsLen]byte
	labelLen uint8
	tcpState uint8
	flags    uint8
	used     bool

	cur  [2]Counters // kernel counters at the last update
	base [2]Counters // counters at the last export (or at a reset)
	owed [2]Counters // unexported counts carried over a counter reset

	first, last, seen, exported int64  // first seen, last change, last update, last export
	epoch                       uint32 // poll in which it was last seen

	prev, next int32 // activity list (oldest first), or free list (next)
}

// Store is the connection store. It is not safe for concurrent use: one
// goroutine polls, updates and exports.
type Store struct {
	cfg     StoreConfig
	zones   []uint64 // zone bitmap (nil: all zones)
	index   map[connKey]int32
	entries []entry
	free    int32 // free list head (-1: none)
	head    int32 // oldest activity (eviction victim), -1 if empty
	tail    int32 // newest activity
	epoch   uint32
	pending []Export
	ex      Export // reused for every emitted record
	stats   StoreStats

	memo    map[connKey]memo // evicted connections' counters (nil: Remember off)
	memoKey []connKey        // FIFO ring of memo's keys
	memoPos int32            // next ring slot to use
}

// NewStore returns a store with every slot preallocated.
func NewStore(cfg StoreConfig) *Store {
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = cfg.MaxConns
	}
	if cfg.ActiveTimeout <= 0 {
		cfg.ActiveTimeout = DefaultActiveTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.StaleTimeout <= 0 {
		cfg.StaleTimeout = DefaultStaleTimeout
	}
	if cfg.Remember == 0 {
		cfg.Remember = max(cfg.MaxConns/4, 1)
	}
	s := &Store{
		cfg:     cfg,
		index:   make(map[connKey]int32, cfg.MaxConns),
		entries: make([]entry, cfg.MaxConns),
		pending: make([]Export, 0, cfg.MaxPending),
		head:    -1,
		tail:    -1,
		epoch:   1,
	}
	if cfg.Remember > 0 {
		s.memo = make(map[connKey]memo, cfg.Remember)
		s.memoKey = make([]connKey, cfg.Remember)
	}
	if len(cfg.Zones) > 0 {
		s.zones = make([]uint64, 1<<16/64)
		for _, z := range cfg.Zones {
			s.zones[z/64] |= 1 << (z % 64)
		}
	}
	for i := range s.entries {
		s.entries[i].next = int32(i + 1)
	}
	s.entries[len(s.entries)-1].next = -1
	s.free = 0
	return s
}

// Stats returns the store's counters.
func (s *Store) Stats() StoreStats {
	st := s.stats
	st.Conns = len(s.index)
	st.Pending = len(s.pending)
	return st
}

// Len returns the number of connections held.
func (s *Store) Len() int { return len(s.index) }

// keep applies the zone and mark filters.
func (s *Store) keep(c *Conn) bool {
	if s.zones != nil && s.zones[c.Zone/64]&(1<<(c.Zone%64)) == 0 {
		return false
	}
	if c.Mark&s.cfg.MarkMask != s.cfg.Mark {
		return false
	}
	if s.cfg.Labels != ([labelsLen]byte{}) {
		var any byte
		for i := range c.Labels[:c.LabelLen] {
			any |= c.Labels[i] & s.cfg.Labels[i]
		}
		return any != 0
	}
	return true
}

// endedState reports whether a message says the connection is over: the
// dying bit, or TCP in TIME_WAIT or CLOSE.
func endedState(c *Conn) bool {
	if c.Status.Dying() {
		return true
	}
	return c.Orig.Proto == 6 && c.Has&HasTCP != 0 && (c.TCPState == TCPTimeWait || c.TCPState == TCPClose)
}

// Update feeds one conntrack entry: a dump reply, or an event (MsgNew, or
// MsgDelete for a destroyed entry). now is the time it was read.
func (s *Store) Update(c *Conn, now time.Time) {
	if !s.keep(c) {
		s.stats.Filtered++
		return
	}
	n := now.UnixNano()
	k := connKey{orig: c.Orig, zone: c.Zone}
	i, ok := s.index[k]
	var e *entry
	if ok {
		e = &s.entries[i]
		if e.flags&flagClosed != 0 {
			if c.Type == MsgDelete {
				s.remove(i)
				return
			}
			if endedState(c) && (c.Has&HasID == 0 || c.ID == e.id) {
				// The same finished connection, still in the table.
				e.seen, e.epoch = n, s.epoch
				e.cur, e.base = [2]Counters{c.CountersOrig, c.CountersReply}, [2]Counters{c.CountersOrig, c.CountersReply}
				return
			}
			// The tuple came back to life: a new incarnation.
			s.stats.Restarted++
			s.unlink(i)
			s.init(e, k, n)
			s.linkTail(i)
			s.stats.New++
		} else if c.Has&HasID != 0 && e.id != 0 && c.ID != e.id {
			// The kernel replaced the entry (new id, same tuple): the old
			// connection ended; its final record waits for Export.
			s.queue(e, n, ExportEnd)
			s.stats.Restarted++
			s.unlink(i)
			s.init(e, k, n)
			s.linkTail(i)
			s.stats.New++
		} else {
			s.stats.Updated++
		}
	} else {
		i = s.alloc(n)
		e = &s.entries[i]
		s.init(e, k, n)
		s.index[k] = i
		s.linkTail(i)
		s.stats.New++
		if s.memo != nil && s.recall(i, e, c, n) {
			return
		}
	}
	event := c.Flags&nlmFMulti == 0 // dump replies are multipart; events are not
	changed := s.counters(e, 0, c.CountersOrig, event)
	changed = s.counters(e, 1, c.CountersReply, event) || changed
	if c.Has&HasStatus != 0 && c.Status != e.status {
		e.status, changed = c.Status, true
	}
	if c.Has&HasTCP != 0 && c.TCPState != e.tcpState {
		e.tcpState, changed = c.TCPState, true
	}
	if c.Has&HasReply != 0 {
		e.reply = c.Reply
	}
	if c.Has&HasMark != 0 {
		e.mark = c.Mark
	}
	if c.Has&HasID != 0 {
		e.id = c.ID
	}
	if c.Has&HasLabels != 0 {
		e.labels, e.labelLen = c.Labels, c.LabelLen
	}
	if c.Has&HasTimestampStart != 0 && c.Start != 0 && int64(c.Start) < e.first {
		// The kernel's start stamp (nf_conntrack_timestamp) is exact; a
		// connection first seen by a dump began before it.
		e.first = int64(c.Start)
		if e.flags&flagExported == 0 {
			e.exported = e.first // the first record's deltas start with the connection
		}
	}
	e.seen, e.epoch = n, s.epoch
	if changed {
		e.last = n
		if s.tail != i {
			s.unlink(i)
			s.linkTail(i)
		}
	}
	switch {
	case c.Type == MsgDelete:
		e.flags |= flagEnded | flagGone
	case endedState(c):
		e.flags = e.flags&^flagGone | flagEnded
	default:
		// Back in the table after missing from a dump: not gone after all.
		e.flags &^= flagEnded | flagGone
	}
}

// init resets e for a new connection first seen at n.
func (s *Store) init(e *entry, k connKey, n int64) {
	prev, next := e.prev, e.next
	*e = entry{key: k, used: true, first: n, last: n, seen: n, exported: n, prev: prev, next: next}
}

// counters takes a new reading of direction d. A counter below the
// previous reading (the kernel reused or reset the entry) is clamped:
// the counts not yet exported are carried, the base restarts at the new
// reading, and the reset is counted. An event's lower reading is not a
// reset but an old event read after a newer dump: it is ignored (and
// counted), since the kernel's counters of one entry only grow.
func (s *Store) counters(e *entry, d int, v Counters, event bool) bool {
	cur := e.cur[d]
	if v == cur {
		return false
	}
	if v.Packets < cur.Packets || v.Bytes < cur.Bytes {
		if event {
			s.stats.StaleEvents++
			return false
		}
		s.stats.CounterResets++
		e.owed[d].Packets += cur.Packets - e.base[d].Packets
		e.owed[d].Bytes += cur.Bytes - e.base[d].Bytes
		e.base[d] = v
	}
	e.cur[d] = v
	return true
}

// delta returns direction d's counts since the last export.
func (e *entry) delta(d int) Counters {
	return Counters{
		Packets: e.owed[d].Packets + e.cur[d].Packets - e.base[d].Packets,
		Bytes:   e.owed[d].Bytes + e.cur[d].Bytes - e.base[d].Bytes,
	}
}

// unexported reports whether e has counts not yet exported.
func (e *entry) unexported() bool {
	return e.cur != e.base || e.owed != [2]Counters{}
}

// EndPoll closes a full dump: every connection not seen since the
// previous EndPoll is gone from the kernel table (destroyed between two
// polls) and gets its final export at the next Export.
func (s *Store) EndPoll(now time.Time) {
	for i := range s.entries {
		e := &s.entries[i]
		if !e.used || e.epoch == s.epoch {
			continue
		}
		if e.flags&flagClosed != 0 {
			s.remove(int32(i))
			continue
		}
		e.flags |= flagEnded | flagGone
	}
	s.epoch++
}

// Export emits a record for every connection with new counts whose
// active or idle timeout expired, for every ended, stale or evicted one,
// and removes the connections whose final record it emitted.
func (s *Store) Export(now time.Time, emit func(*Export)) {
	n := now.UnixNano()
	for i := range s.pending {
		s.stats.Exported[s.pending[i].Reason]++
		emit(&s.pending[i])
	}
	clear(s.pending)
	s.pending = s.pending[:0]
	active, idle, stale := int64(s.cfg.ActiveTimeout), int64(s.cfg.IdleTimeout), int64(s.cfg.StaleTimeout)
	for i := range s.entries {
		e := &s.entries[i]
		if !e.used {
			continue
		}
		if e.flags&flagClosed != 0 {
			if n-e.seen >= stale {
				s.remove(int32(i))
			}
			continue
		}
		var r ExportReason
		switch {
		case e.flags&flagEnded != 0:
			r = ExportEnd
		case n-e.seen >= stale:
			r = ExportStale
		case !e.unexported():
			continue
		case n-e.last >= idle:
			r = ExportIdle
		case n-e.exported >= active:
			r = ExportActive
		default:
			continue
		}
		s.fill(&s.ex, e, n, r)
		s.stats.Exported[r]++
		emit(&s.ex)
		switch {
		case r == ExportStale || e.flags&flagGone != 0:
			s.remove(int32(i))
		case r == ExportEnd:
			// Still in the kernel table (TIME_WAIT, dying): keep it
			// silent until it goes, so it is not counted again, and
			// make it the first eviction victim.
			e.flags |= flagClosed
			s.unlink(int32(i))
			s.linkHead(int32(i))
		}
	}
}

// Flush emits a last record, reason ExportShutdown, for every connection
// with counts not yet exported (and the pending records of evicted ones),
// then empties the store. It is for a reader that stops.
func (s *Store) Flush(now time.Time, emit func(*Export)) {
	n := now.UnixNano()
	for i := range s.pending {
		s.stats.Exported[s.pending[i].Reason]++
		emit(&s.pending[i])
	}
	clear(s.pending)
	s.pending = s.pending[:0]
	for i := range s.entries {
		e := &s.entries[i]
		if !e.used {
			continue
		}
		if e.flags&flagClosed == 0 && (e.unexported() || e.flags&flagEnded != 0) {
			r := ExportShutdown
			if e.flags&flagEnded != 0 {
				r = ExportEnd
			}
			s.fill(&s.ex, e, n, r)
			s.stats.Exported[r]++
			emit(&s.ex)
		}
		s.remove(int32(i))
	}
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
