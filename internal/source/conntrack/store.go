package conntrack

import (
	"math"
	"time"

	"github.com/weir-dev/weir/internal/nfnetlink"
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
// Memory is bounded: at most MaxConns entries, MaxPending evicted
// records waiting for the next Export and Remember memos of evicted or
// replaced connections, whatever happens downstream.
//
// A connection is one kernel entry: its tuple and conntrack id. Its
// records carry deltas of the kernel's counters, so they add up to the
// counters the kernel had when it dropped the entry, and no record is
// empty. After its end record (TIME_WAIT, CLOSE, dying, destroyed, or no
// longer in a dump) the entry stays in the store, silent, until the
// kernel drops it: its destroy event, or its absence from a dump without
// events. Counts the kernel adds after the end record (a retransmission
// in TIME_WAIT, the last packets before an entry vanished from a dump
// ahead of its destroy event) go out in one more end record then.
//
// A connection evicted when the store is full may be seen again: in the
// next dump, or as its destroy event. So that the counts it had at
// eviction are not exported twice, the store remembers the key, kernel
// id and counters of the last Remember evicted connections (a FIFO ring
// beside a preallocated map): a remembered connection resumes from its
// counters at eviction, an ended one stays silent. Ended entries are the
// first evicted. Past Remember evictions between two sightings, the
// oldest are forgotten (counted in StoreStats.Forgotten and
// ForgottenEnded): a forgotten live connection comes back from zero, a
// forgotten ended one still in the kernel's table is counted again.

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
	// MaxConns/4; negative: none). About 200 bytes each.
	Remember int
	// Events says the caller feeds the event stream too: a connection a
	// dump no longer lists is then kept, silent, until its destroy event
	// (or StaleTimeout), which may come later; without events it is
	// removed at once.
	Events bool
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
	Forgotten         uint64                   // evicted live connections whose counters were dropped from the Remember ring unseen
	ForgottenEnded    uint64                   // evicted ended connections dropped from the Remember ring before the kernel dropped them
	Vanished          uint64                   // connections a dump no longer listed before a destroy event was read for them
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
	flagEnded    uint8 = 1 << iota // end record owed
	flagGone                       // destroyed (or, without events, missing from the dump): remove after the last record
	flagAbsent                     // missing from the last dump, destroy event not read yet
	flagClosed                     // end record done, the kernel still has the entry: kept silent
	flagExported                   // exported at least once
	flagCounted                    // a reading carried counters (accounting on)
	flagNoAcct                     // a dump reply or destroy event came without counters (accounting off)
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
	// due[i] is the earliest time at which Export has anything to do
	// with entries[i] (math.MinInt64: at the next Export, math.MaxInt64:
	// never, a free slot): Export reads this 8-byte array and visits only
	// the entries due, not every entry. Every change to an entry sets it
	// again (redue).
	due     []int64
	scanAll bool  // tests: Export visits every entry (the reference the index is checked against)
	free    int32 // free list head (-1: none)
	head    int32 // oldest activity (eviction victim), -1 if empty
	tail    int32 // newest activity
	epoch   uint32
	pending []Export
	ex      Export // reused for every emitted record
	stats   StoreStats

	memo    map[memoKey]memo // evicted and replaced connections' counters (nil: Remember off)
	memoKey []memoKey        // FIFO ring of memo's keys
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
		due:     make([]int64, cfg.MaxConns),
		pending: make([]Export, 0, cfg.MaxPending),
		head:    -1,
		tail:    -1,
		epoch:   1,
	}
	if cfg.Remember > 0 {
		s.memo = make(map[memoKey]memo, cfg.Remember)
		s.memoKey = make([]memoKey, cfg.Remember)
	}
	if len(cfg.Zones) > 0 {
		s.zones = make([]uint64, 1<<16/64)
		for _, z := range cfg.Zones {
			s.zones[z/64] |= 1 << (z % 64)
		}
	}
	for i := range s.entries {
		s.entries[i].next = int32(i + 1)
		s.due[i] = math.MaxInt64
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
	if i := s.update(c, now); i >= 0 {
		s.redue(i)
	}
}

// update is Update; it returns the index of the entry it changed (-1:
// none).
func (s *Store) update(c *Conn, now time.Time) int32 {
	if !s.keep(c) {
		s.stats.Filtered++
		return -1
	}
	n := now.UnixNano()
	k := connKey{orig: c.Orig, zone: c.Zone}
	i, ok := s.index[k]
	var e *entry
	if ok {
		e = &s.entries[i]
		if s.another(e, c) {
			if c.Type == MsgDelete {
				// The destroy event of another entry on this tuple than
				// the one held: an earlier one, or one never seen.
				s.deleteOther(k, c, n)
				return -1
			}
			// The kernel's entry on this tuple is another one: the old
			// connection left the table; what it owes goes out with the
			// next Export, and its destroy event may still come.
			s.retire(e, n)
			s.stats.Restarted++
			s.unlink(i)
			s.init(e, k, n)
			s.linkTail(i)
			s.resume(i, e, c)
		} else {
			s.stats.Updated++
		}
	} else {
		i = s.alloc(n)
		e = &s.entries[i]
		s.init(e, k, n)
		s.index[k] = i
		s.linkTail(i)
		s.resume(i, e, c)
	}
	e.seen, e.epoch = n, s.epoch
	if e.flags&flagGone != 0 && c.Type != MsgDelete {
		// Destroyed: the destroy event's counters were final; a dump that
		// met the entry on its way out adds nothing.
		return i
	}
	event := c.Flags&nfnetlink.FlagMulti == 0 // dump replies are multipart; events are not
	changed := false
	if c.Has&HasCountersOrig != 0 {
		changed = s.counters(e, 0, c.CountersOrig, event)
	}
	if c.Has&HasCountersReply != 0 {
		changed = s.counters(e, 1, c.CountersReply, event) || changed
	}
	if c.Has&(HasCountersOrig|HasCountersReply) != 0 {
		e.flags |= flagCounted
	} else if !event || c.Type == MsgDelete {
		e.flags |= flagNoAcct // new and update events never carry counters; these would
	}
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
	closed := e.flags&flagClosed != 0
	if changed {
		e.last = n
		if !closed && s.tail != i {
			s.unlink(i)
			s.linkTail(i)
		}
	}
	switch {
	case c.Type == MsgDelete:
		e.flags = e.flags&^flagAbsent | flagEnded | flagGone
	case endedState(c):
		e.flags |= flagEnded
		if !event {
			e.flags &^= flagAbsent // listed: still in the table
		}
	case event:
		// An update event may be older than the last dump: it says
		// nothing of whether the entry is still in the table.
	case closed:
		e.flags &^= flagAbsent // listed again: the same ended entry
	default:
		// Back in the table after missing from a dump: not gone after all.
		e.flags &^= flagEnded | flagAbsent
	}
	return i
}

// resume gives new entry i the state of c's connection if the memo
// remembers it, else counts a new connection.
func (s *Store) resume(i int32, e *entry, c *Conn) {
	if !s.recall(e, c) {
		s.stats.New++
		return
	}
	if e.flags&flagClosed != 0 {
		s.unlink(i)
		s.linkHead(i) // ended: the first eviction victim again
	}
}

// another reports whether c is another kernel entry than e on the same
// tuple: a new conntrack id, or, where the kernel reports no ids, a
// live state after e's end record.
func (s *Store) another(e *entry, c *Conn) bool {
	if c.Has&HasID != 0 && e.id != 0 {
		return c.ID != e.id
	}
	return e.flags&flagClosed != 0 && c.Type != MsgDelete && !endedState(c)
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

// owes reports whether e's last record must still be emitted: it has
// counts not yet exported, or it was never exported and the kernel
// keeps no counters for it (accounting off), so that its one record says
// it existed. A connection whose counts all went out ends without an
// empty record.
func (s *Store) owes(e *entry) bool {
	return e.unexported() || e.flags&(flagExported|flagNoAcct) == flagNoAcct
}

// uncounted reports whether no dump reply or destroy event told e's
// counters yet: it is known from new and update events only.
func (e *entry) uncounted() bool { return e.flags&(flagCounted|flagNoAcct) == 0 }
