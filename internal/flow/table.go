package flow

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
	"unsafe"
)

// Defaults applied by NewTable and DefaultConfig.
const (
	DefaultIdleTimeout   = 15 * time.Second
	DefaultActiveTimeout = 60 * time.Second
	DefaultEndLinger     = 2 * time.Second
	DefaultDedupWindow   = time.Second

	// MaxMaxFlows bounds Config.MaxFlows so that slot indexes fit in 32 bits.
	MaxMaxFlows = 1 << 30
)

// Config sizes a Table and sets its eviction timeouts. All times are packet
// time (the Unix nanoseconds in Packet.Time and the now passed to Expire).
type Config struct {
	// MaxFlows is the number of live flows allowed. The slot array is
	// preallocated for it: about MaxFlows/0.75 slots of SlotSize() bytes
	// (2·MaxFlows up to 16,384, at least 32,768 slots up to 24,576: see
	// slotsFor), so memory is linear in MaxFlows and flat in traffic.
	// 1..MaxMaxFlows.
	MaxFlows int
	// IdleTimeout evicts a flow with no packet for this long (ReasonIdle).
	// 0 means DefaultIdleTimeout (15s).
	IdleTimeout time.Duration
	// ActiveTimeout reports a flow whose current record started at least
	// this long ago (ReasonActive, a delta; the flow stays). 0 disables it:
	// use DefaultConfig for the 60s default.
	ActiveTimeout time.Duration
	// EndLinger is how long an ended TCP flow (FIN both ways, or RST) stays
	// after its last packet to catch the final ACK. 0 means
	// DefaultEndLinger (2s).
	EndLinger time.Duration
	// Ifaces names Packet.Iface indexes for Record.Iface; may be nil.
	Ifaces *Ifaces
	// DedupIfaces counts a packet once when several interfaces of the host
	// see it (both ends of a veth, a bridge and its port, a packet routed in
	// one interface and out another): each direction of a flow is counted
	// only at the interface that first brought the table a packet in that
	// direction, its owner; copies seen on other interfaces are counted in
	// Stats.Duplicates and otherwise ignored. After the flow has been quiet
	// for DedupWindow, a packet from another interface takes the direction
	// over (a route change), so real traffic is never ignored for longer.
	// Off for file replay, where each packet was captured once.
	DedupIfaces bool
	// DedupWindow is how long a direction's owner interface holds it after
	// the flow's last packet. 0 means DefaultDedupWindow (1s).
	DedupWindow time.Duration
	// HashSeed seeds the key hash; 0 (the normal case) draws a random seed
	// per table so hostile traffic cannot aim at one probe chain. Set it
	// only for reproducible tests and benchmarks.
	HashSeed uint64
}

// DefaultConfig returns a Config with MaxFlows set and every timeout at its
// default (idle 15s, active 60s, linger 2s).
func DefaultConfig(maxFlows int) Config {
	return Config{
		MaxFlows:      maxFlows,
		IdleTimeout:   DefaultIdleTimeout,
		ActiveTimeout: DefaultActiveTimeout,
		EndLinger:     DefaultEndLinger,
	}
}

// Stats are a Table's cumulative counters. Records and Evicted are indexed
// by EndReason.
type Stats struct {
	Packets      uint64 // packets passed to Update
	Bytes        uint64 // sum of their Packet.Length
	FlowsCreated uint64 // flows started (new conversations and port reuses)
	// Records counts records emitted per reason, including active deltas
	// and counter-wrap reports (both ReasonActive).
	Records [NumReasons]uint64
	// Evicted counts flows removed from the table per reason, whether or not
	// a record was emitted for them (see EmptyDeltasSkipped).
	Evicted [NumReasons]uint64
	// FullPasses counts full-table eviction passes; Evicted[ReasonFull]
	// counts the flows they removed.
	FullPasses uint64
	// EmptyDeltasSkipped counts removed flows that had no packet since their
	// last active report, so no (empty) record was emitted.
	EmptyDeltasSkipped uint64
	// WrapReports counts early ReasonActive records emitted because a 32-bit
	// per-direction packet counter was about to wrap.
	WrapReports uint64
	// PortReuses counts ending TCP flows closed early by a new SYN.
	PortReuses uint64
	// RoleFlips counts flows whose orientation a Role hint reversed.
	RoleFlips uint64
	// Duplicates counts packets ignored as copies of a packet already
	// counted at another interface (Config.DedupIfaces). They are included
	// in Packets and Bytes, which count what Update was given.
	Duplicates uint64
}

// Table aggregates packets into bidirectional flows and emits Records when
// flows are evicted. It is owned by one goroutine: no method is safe for
// concurrent use, and the emit callback must not call back into the Table.
//
// Semantics:
//
//   - One slot per conversation. Each packet's key is made canonical once:
//     the two endpoints (address, port) are ordered (Key.srcLess) and a
//     direction bit says which of them sent the packet. Both directions of
//     a conversation therefore find the same slot.
//   - Per direction a flow keeps packets, bytes (sum of Packet.Length) and the
//     OR of TCP flags; Start/End are the min/max packet time of the current
//     record (timestamps may go backwards a little); Iface is the interface of
//     the flow's first packet.
//   - Orientation: the first packet's sender is the initiator until a Role
//     hint says otherwise. The first Role-bearing packet wins and fixes the
//     orientation for the rest of the flow: RoleInitiator makes its sender
//     the initiator, RoleResponder makes the other side the initiator; later
//     hints are ignored (except a SYN ending a flow, below). Counters are
//     kept per canonical sender, so a flip needs no counter swap: the
//     emitted Record maps them to initiator/responder, Key in initiator
//     orientation.
//   - idle: no packet for IdleTimeout → ReasonIdle, slot freed.
//   - active: the current record started ≥ ActiveTimeout ago → a ReasonActive
//     record with the counters since the last report (a delta), counters
//     reset, orientation and TCP end state kept. A flow's records sum exactly
//     to its totals. A flow removed with an empty delta (no packet since
//     its last report) emits nothing and counts in Stats.EmptyDeltasSkipped.
//   - end: a FIN seen from both sides, or an RST from either, marks the flow
//     ending. Packets keep counting into it; once End+EndLinger has passed
//     (End = its last packet, so a late ACK pushes the deadline back) Expire
//     emits ReasonEnd. A RoleInitiator packet (a new SYN) for an ending flow
//     is port reuse: the old flow is emitted at once with ReasonEnd and the
//     packet starts a new flow in the same slot.
//   - full: a new flow arriving when MaxFlows flows are live first evicts the
//     stalest 1/16 of the table (by last packet time) with ReasonFull; the
//     new flow is always admitted. See evictStalest for the cost.
//   - Flush emits every flow with the given reason and empties the table.
//   - Counters never wrap: packets are 32-bit per direction, and a flow
//     about to exceed that emits an early ReasonActive record
//     (Stats.WrapReports). Bytes are 64-bit and cannot wrap before packets
//     do (2³² packets × 2³² bytes < 2⁶⁴).
type Table struct {
	agg   *Aggregate // set during UpdateAggregate: the counts of the packet being applied
	slots []slot     // open addressing, linear probing, no tombstones
	// tags[i] is slots[i].tag, kept beside the slots so that a probe reads
	// 16 tags per cache line and touches only the slot whose tag matches.
	tags []uint32
	// blocks counts the live flows in each run of blockSlots slots, kept on
	// insert and remove only (never on a hit), so scans skip empty blocks:
	// a mostly empty table costs a scan 1/6144 of its memory.
	blocks []uint8
	n      uint32 // len(slots)
	live   int
	max    int
	seed   [6]uint64
	idle   int64
	active int64 // 0: disabled
	linger int64
	dedup  int64 // DedupWindow in ns; 0: dedup off
	ifaces *Ifaces
	emitFn func(*Record)
	rec    Record // reused for every emit: zero allocation
	stats  Stats
	// pktLimit is the per-direction packet count at which a wrap report is
	// emitted (math.MaxUint32; tests lower it).
	pktLimit uint32
	// due is a lower bound on the earliest time any live flow can expire
	// (idle, end linger or active deadline): Expire returns at once before
	// it, so its cost follows evictions, not table size. Updates only lower
	// it where a deadline can move earlier; each scan recomputes it exactly.
	due int64
	// minTimeout is the shorter of idle and (if on) active: the earliest a
	// new flow can expire unless it ends, which tcpEnd bounds itself.
	minTimeout int64
}

// NewTable returns an empty Table for cfg. emit receives every Record; the
// *Record is only valid during the call (it is reused), and emit must not
// call the Table.
func NewTable(cfg Config, emit func(*Record)) (*Table, error) {
	if emit == nil {
		return nil, errors.New("flow: NewTable needs an emit function")
	}
	if cfg.MaxFlows < 1 || cfg.MaxFlows > MaxMaxFlows {
		return nil, fmt.Errorf("flow: MaxFlows %d out of range 1..%d", cfg.MaxFlows, MaxMaxFlows)
	}
	if cfg.IdleTimeout < 0 || cfg.ActiveTimeout < 0 || cfg.EndLinger < 0 {
		return nil, errors.New("flow: negative timeout")
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.EndLinger == 0 {
		cfg.EndLinger = DefaultEndLinger
	}
	if cfg.DedupWindow <= 0 {
		cfg.DedupWindow = DefaultDedupWindow
	}
	n := slotsFor(cfg.MaxFlows)
	t := &Table{
		n:        uint32(n),
		max:      cfg.MaxFlows,
		idle:     int64(cfg.IdleTimeout),
		active:   int64(cfg.ActiveTimeout),
		linger:   int64(cfg.EndLinger),
		ifaces:   cfg.Ifaces,
		emitFn:   emit,
		pktLimit: math.MaxUint32,
	}
	t.slots, t.tags = allocSlots(n, t)
	t.blocks = make([]uint8, (n+blockSlots-1)/blockSlots)
	t.minTimeout = t.idle // the linger is bounded by tcpEnd when a flow starts ending
	if t.active > 0 {
		t.minTimeout = min(t.minTimeout, t.active)
	}
	t.due = math.MaxInt64
	if cfg.DedupIfaces {
		t.dedup = int64(cfg.DedupWindow)
	}
	t.setSeed(cfg.HashSeed)
	return t, nil
}

// slotsFor returns the slot count of a table for maxFlows live flows: at
// load factor ≤ 0.75 (maxFlows·4/3), with at least one slot always empty so
// every probe loop terminates. Small tables get more: 2 slots per flow (load
// ≤ 0.5) up to 16,384 flows, and at least smallTable slots up to 24,576.
// A flow then sits ~0.5 slots past its home instead of ~1.5: at 10k flows
// UpdateBatch mispredicts 0.55 times per packet instead of 0.87 and runs 10
// fewer instructions (docs/benchmarks.md, "Fifth pass"), for at most 1.1 MB
// more memory (16,384 flows: 32,768 slots instead of 21,846).
func slotsFor(maxFlows int) int {
	return max(maxFlows+maxFlows/3+1, min(2*maxFlows+1, smallTable))
}

func (t *Table) setSeed(s uint64) {
	var r *rand.Rand
	if s != 0 {
		r = rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
	}
	for i := range t.seed {
		if r != nil {
			t.seed[i] = r.Uint64()
		} else {
			t.seed[i] = rand.Uint64() // runtime-seeded ChaCha8: unpredictable per table
		}
	}
}

// Update adds one packet to its flow, creating the flow if new (evicting
// the stalest flows first if the table is full). It does not allocate.
func (t *Table) Update(p *Packet) {
	var r pending
	t.prep(&p.Key, &r)
	t.apply(p, &r.w, r.dir, r.h)
}

// Contains reports whether k's flow (either direction) is live in the
// table: it has a slot, whether or not it has counted packets since its
// last record.
func (t *Table) Contains(k *Key) bool { return t.lookup(k) != nil }

// Aggregate is a run of packets of one flow direction counted elsewhere
// (in the kernel, by weir's eBPF program). Packet describes them: Key and
// Iface as for each packet, Time the last packet's time, TCPFlags the OR
// of their flags, Role a hint any of them gave; Length is not used.
type Aggregate struct {
	Packet
	Packets uint32 // at least 1
	Bytes   uint64 // IP-layer bytes of them all
	First   int64  // the first packet's time, Unix nanoseconds
}

// UpdateAggregate adds a to its flow as Update would add each of its
// packets, in one step (timeouts judged from a.First, the record's end
// from a.Time). An aggregate of no packets is ignored.
func (t *Table) UpdateAggregate(a *Aggregate) {
	if a.Packets == 0 {
		return
	}
	t.agg = a
	var r pending
	t.prep(&a.Key, &r)
	t.apply(&a.Packet, &r.w, r.dir, r.h)
	t.agg = nil
}

// counts returns the packets, bytes and first time p stands for: itself,
// or the aggregate being applied.
func (t *Table) counts(p *Packet) (uint32, uint64, int64) {
	if a := t.agg; a != nil {
		return a.Packets, a.Bytes, a.First
	}
	return 1, uint64(p.Length), p.Time
}

// apply is Update after the key is canonical and hashed.
func (t *Table) apply(p *Packet, w *keyWords, dir uint8, h uint32) {
	pk, b, _ := t.counts(p)
	t.stats.Packets += uint64(pk)
	t.stats.Bytes += b
	slots, tags := t.slots, t.tags
	n := t.n
	i := fastrange(h, n)
	for {
		if tg := tags[i]; tg == h { // tag first: rejects a mismatch without touching its slot
			if s := &slots[i]; s.key.eq(w) {
				t.add(s, p, dir)
				return
			}
		} else if tg == 0 {
			break
		}
		if i++; i == n {
			i = 0
		}
	}
	t.insert(i, h, w, dir, p)
}

// add counts p into the live flow s; dir is the canonical sender.
func (t *Table) add(s *slot, p *Packet, dir uint8) {
	n, b, first := t.counts(p)
	if t.dedup != 0 && s.owner[dir] != p.Iface+1 {
		if s.owner[dir] != 0 && first-s.end < t.dedup {
			t.stats.Duplicates += uint64(n) // a copy: this direction is counted at its owner
			return
		}
		s.owner[dir] = p.Iface + 1 // first packet this way, or the owner went quiet
	}
	if p.Role == RoleInitiator && s.state&stEnding != 0 {
		// Port reuse: a new SYN for a closing connection starts a new flow.
		t.stats.PortReuses++
		t.stats.Evicted[ReasonEnd]++
		t.report(s, ReasonEnd)
		t.stats.FlowsCreated++
		k := s.key // copy: initSlot overwrites *s
		t.initSlot(s, s.tag, &k, dir, p)
		return
	}
	if gap := first - s.end; gap >= t.idle || s.state&stEnding != 0 && gap >= t.linger {
		// The flow expired before this packet, whether or not an Expire
		// tick has run since: emit it as it stood and start afresh, so a
		// record's reason never depends on when Expire was called.
		r := ReasonIdle
		if s.state&stEnding != 0 && gap >= t.linger {
			r = ReasonEnd
		}
		t.stats.Evicted[r]++
		t.report(s, r)
		t.stats.FlowsCreated++
		k := s.key
		t.initSlot(s, s.tag, &k, dir, p)
		return
	}
	if s.pkts[dir] > t.pktLimit-n {
		t.wrapReport(s)
	}
	if s.pkts[0]|s.pkts[1] == 0 { // empty record (after an active report)
		s.state &^= stEmpty
		s.start, s.end = first, p.Time
		t.dueBy(first + t.active) // a new active deadline
	} else {
		if p.Time > s.end {
			s.end = p.Time
		}
		if first < s.start {
			s.start = first
			t.dueBy(first + t.active) // time went backwards: the active deadline too
		}
	}
	s.pkts[dir] += n
	s.bytes[dir] += b
	s.flags[dir] |= p.TCPFlags
	if p.Role == RoleInitiator || p.Role == RoleResponder {
		t.orient(s, p.Role, dir)
	}
	if p.TCPFlags&(TCPFin|TCPRst) != 0 {
		t.tcpEnd(s, p.TCPFlags, dir)
	}
}

// insert starts a new flow at empty slot i (re-probing if a full-table
// eviction ran first).
func (t *Table) insert(i, h uint32, w *keyWords, dir uint8, p *Packet) {
	if t.live >= t.max {
		t.evictStalest()
		i = t.emptyFor(h)
	}
	t.live++
	t.blocks[i/blockSlots]++
	t.stats.FlowsCreated++
	t.tags[i] = h
	t.initSlot(&t.slots[i], h, w, dir, p)
}

// initSlot writes a fresh flow holding only p into s.
func (t *Table) initSlot(s *slot, h uint32, w *keyWords, dir uint8, p *Packet) {
	n, b, first := t.counts(p)
	*s = slot{key: *w, tag: h, iface: p.Iface, vlan: p.VLAN, start: first, end: p.Time}
	s.owner[dir] = p.Iface + 1
	t.dueBy(first + t.minTimeout)
	s.pkts[dir] = n
	s.bytes[dir] = b
	s.flags[dir] = p.TCPFlags
	s.state = dir // stInitHi == 1: the first packet's sender is the initiator
	if p.Role == RoleInitiator || p.Role == RoleResponder {
		t.orient(s, p.Role, dir)
	}
	if p.TCPFlags&(TCPFin|TCPRst) != 0 {
		t.tcpEnd(s, p.TCPFlags, dir)
	}
}

// orient applies the first Role hint of a flow; later hints are ignored.
func (t *Table) orient(s *slot, r Role, dir uint8) {
	if s.state&stRoleFixed != 0 {
		return
	}
	initHi := dir // RoleInitiator: the sender opened the flow
	if r == RoleResponder {
		initHi ^= 1
	}
	if initHi != s.state&stInitHi {
		t.stats.RoleFlips++
	}
	s.state = s.state&^stInitHi | initHi | stRoleFixed
}

// tcpEnd records FIN/RST from canonical sender dir and marks the flow
// ending on FIN from both sides or any RST.
func (t *Table) tcpEnd(s *slot, flags, dir uint8) {
	if flags&TCPFin != 0 {
		s.state |= stFinLo << dir
	}
	if flags&TCPRst != 0 || s.state&(stFinLo|stFinHi) == stFinLo|stFinHi {
		s.state |= stEnding
		t.dueBy(s.end + t.linger)
	}
}

// dueBy lowers the next-expiry bound to d.
func (t *Table) dueBy(d int64) {
	if d < t.due {
		t.due = d
	}
}

// Len returns the number of live flows.
func (t *Table) Len() int { return t.live }

// Cap returns MaxFlows, the number of live flows allowed.
func (t *Table) Cap() int { return t.max }

// Stats returns a copy of the table's counters.
func (t *Table) Stats() Stats { return t.stats }

// SlotSize returns the bytes per slot: the slot struct and its tag.
func SlotSize() uintptr { return unsafe.Sizeof(slot{}) + unsafe.Sizeof(uint32(0)) }

// MemoryBytes returns the bytes preallocated for slots and their tags.
// Bytes per flow is MemoryBytes()/Cap().
func (t *Table) MemoryBytes() int { return len(t.slots) * int(SlotSize()) }

// Add adds o's counters to s (to sum the shards of several workers).
func (s *Stats) Add(o *Stats) {
	s.Packets += o.Packets
	s.Bytes += o.Bytes
	s.FlowsCreated += o.FlowsCreated
	for i := range s.Records {
		s.Records[i] += o.Records[i]
		s.Evicted[i] += o.Evicted[i]
	}
	s.FullPasses += o.FullPasses
	s.EmptyDeltasSkipped += o.EmptyDeltasSkipped
	s.WrapReports += o.WrapReports
	s.PortReuses += o.PortReuses
	s.RoleFlips += o.RoleFlips
	s.Duplicates += o.Duplicates
}
