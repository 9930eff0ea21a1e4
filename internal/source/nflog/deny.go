package nflog

import (
	"encoding/binary"
	"math/rand/v2"
	"unsafe"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/prefetch"
)

// Prefix IDs with a fixed meaning.
const (
	PrefixNone  = 0 // the rule logged no prefix
	PrefixOther = 1 // the prefix table was full (Prefixes.Overflow counts these)
)

// MaxPrefixes bounds the distinct log prefixes interned.
const MaxPrefixes = 4096

// Prefixes interns log prefixes: each distinct prefix is converted to a
// string once, and packets carry a small ID. Not safe for concurrent use.
type Prefixes struct {
	ids      map[string]uint16
	names    []string
	Overflow uint64 // packets whose prefix did not fit (mapped to PrefixOther)
}

// ID returns the ID of prefix b, interning it on first sight. Looking up a
// known prefix does not allocate.
func (p *Prefixes) ID(b []byte) uint16 {
	if len(b) == 0 {
		return PrefixNone
	}
	if p.ids == nil {
		p.ids = make(map[string]uint16)
		p.names = []string{"", "(other)"}
	}
	if id, ok := p.ids[string(b)]; ok {
		return id
	}
	if len(p.names) >= MaxPrefixes {
		p.Overflow++
		return PrefixOther
	}
	s := string(b)
	id := uint16(len(p.names))
	p.names = append(p.names, s)
	p.ids[s] = id
	return id
}

// Name returns the prefix of an ID ("" for PrefixNone or an unknown ID).
func (p *Prefixes) Name(id uint16) string {
	if int(id) < len(p.names) {
		return p.names[id]
	}
	if id == PrefixOther {
		return "(other)"
	}
	return ""
}

// DenyKey identifies a deny flow.
type DenyKey struct {
	Flow   flow.Key // wire orientation: Src sent the dropped packets
	Prefix uint16   // interned log prefix (Prefixes)
	Group  uint16   // NFLOG group
}

// Verdict is what the firewall did with a flow's packets.
type Verdict uint8

// Verdicts.
const (
	VerdictDeny Verdict = 1 // dropped (or rejected) by a rule that logged it
)

// String names the verdict.
func (v Verdict) String() string {
	if v == VerdictDeny {
		return "deny"
	}
	return "unknown"
}

// EndReason says why a deny flow was exported.
type EndReason uint8

// End reasons.
const (
	EndIdle    EndReason = 1 // no packet for the idle timeout
	EndEvicted EndReason = 2 // the table was full; the stalest flow made room
	EndFlush   EndReason = 3 // Flush (shutdown)
	EndActive  EndReason = 4 // the active timeout since the flow's last record: its counts so far, state kept
)

// DenyFlow is one exported deny flow. Mapping it to flow.Record is left to
// the pipeline.
type DenyFlow struct {
	Key         flow.Key
	Prefix      string // the rule's log prefix as the kernel sent it (trailing spaces kept)
	Group       uint16
	Packets     uint64
	Bytes       uint64 // IP bytes (IP total length, not the copied length)
	First, Last int64  // Unix ns of the first and last packet
	InIf, OutIf uint32 // interface indexes of the last packet
	Hook        uint8  // netfilter hook of the last packet
	Mark        uint32 // packet mark of the last packet
	Verdict     Verdict
	End         EndReason
}

// entry is a table slot; prev/next link the slots in last-seen order.
type entry struct {
	key         DenyKey
	hash        uint64
	packets     uint64
	bytes       uint64
	first, last int64
	inIf, outIf uint32
	mark        uint32
	hook        uint8
	prev, next  int32 // last-seen order (idle expiry, eviction)
	since       int64 // start of the current record's period (creation or last active export)
	aprev       int32 // record-start order (active expiry)
	anext       int32
}

const nilSlot = -1

// DenyTable aggregates dropped packets into deny flows: a fixed-size,
// open-addressing hash table (linear probing, backward-shift deletion) over
// preallocated slots kept in last-seen order, so expiry visits only the idle
// flows and a full table evicts the stalest. It allocates only in
// NewDenyTable; not safe for concurrent use.
type DenyTable struct {
	idle       int64
	active     int64 // 0: no active timeout
	ahead      int32 // oldest record start
	atail      int32
	slots      []entry
	index      []ref // hash → slot
	mask       uint64
	free       int32 // free-slot list through next
	head, tail int32 // stalest, freshest
	n          int
	seed       uint64
	prefixes   *Prefixes
	emit       func(*DenyFlow)
	out        DenyFlow

	Evicted  uint64 // flows exported early because the table was full
	Exported uint64 // flows exported in total
}

// NewDenyTable returns a table of at most max flows (≥ 1) that exports a
// flow idle ns after its last packet. emit receives every exported flow;
// the DenyFlow is reused after emit returns. prefixes names the prefix IDs.
func NewDenyTable(max int, idle int64, prefixes *Prefixes, emit func(*DenyFlow)) *DenyTable {
	max = min(maxInt(max, 1), 1<<30)
	size := 1
	for size < 2*max {
		size <<= 1
	}
	t := &DenyTable{idle: idle, slots: make([]entry, max), index: make([]ref, size), mask: uint64(size - 1),
		head: nilSlot, tail: nilSlot, ahead: nilSlot, atail: nilSlot, seed: rand.Uint64() | 1, prefixes: prefixes, emit: emit}
	for i := range t.index {
		t.index[i] = ref{slot: nilSlot}
	}
	for i := range t.slots {
		t.slots[i].next = int32(i + 1)
	}
	t.slots[max-1].next = nilSlot
	return t
}

// SetActive sets the active timeout: a flow with packets is exported
// (EndActive, counts since its last record) when its record started
// active ns ago, and kept. 0 turns it off. Set it before the first Add.
func (t *DenyTable) SetActive(active int64) { t.active = max(active, 0) }

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// Len returns the number of deny flows held.
func (t *DenyTable) Len() int { return t.n }

// ref is an index position: a slot and the low 32 bits of its key's
// hash (the index is at most 2^31 positions: they hold the home
// position), so that probes and deletion shifts rarely read the slots.
type ref struct {
	slot int32 // nilSlot: empty
	tag  uint32
}

// hash mixes the key's words (a multiply-xorshift; the seed varies per table).
func (t *DenyTable) hashKey(k *DenyKey) uint64 {
	h := t.seed
	mix := func(v uint64) { h = (h ^ v) * 0x9e3779b97f4a7c15; h ^= h >> 29 }
	mix(binary.LittleEndian.Uint64(k.Flow.SrcAddr[:8]))
	mix(binary.LittleEndian.Uint64(k.Flow.SrcAddr[8:]))
	mix(binary.LittleEndian.Uint64(k.Flow.DstAddr[:8]))
	mix(binary.LittleEndian.Uint64(k.Flow.DstAddr[8:]))
	mix(uint64(k.Flow.SrcPort) | uint64(k.Flow.DstPort)<<16 | uint64(k.Flow.Proto)<<32 | uint64(k.Flow.ICMPType)<<40 | uint64(k.Flow.ICMPCode)<<48 | uint64(k.Flow.IPVersion)<<56)
	mix(uint64(k.Prefix) | uint64(k.Group)<<16)
	return h
}

// Add counts one dropped packet of ipLen IP bytes at time now (Unix ns).
func (t *DenyTable) Add(k *DenyKey, ipLen uint32, now int64, p *Packet) {
	h := t.hashKey(k)
	i := h & t.mask
	for {
		r := t.index[i]
		if r.slot == nilSlot {
			break
		}
		if e := &t.slots[r.slot]; r.tag == uint32(h) && e.hash == h && e.key == *k {
			s := r.slot
			if e.packets == 0 { // first packet since an active export
				e.first = now
			}
			e.packets++
			e.bytes += uint64(ipLen)
			e.last = max(e.last, now)
			e.inIf, e.outIf, e.mark, e.hook = p.InDev, p.OutDev, p.Mark, p.Hook
			t.unlink(s)
			t.pushTail(s)
			return
		}
		i = (i + 1) & t.mask
	}
	if t.free == nilSlot {
		t.Evicted++
		t.export(t.head, EndEvicted)
		t.Add(k, ipLen, now, p) // the probe path changed; one level of recursion at most
		return
	}
	s := t.free
	e := &t.slots[s]
	t.free = e.next
	*e = entry{key: *k, hash: h, packets: 1, bytes: uint64(ipLen), first: now, last: now,
		inIf: p.InDev, outIf: p.OutDev, mark: p.Mark, hook: p.Hook, since: now}
	t.index[i] = ref{slot: s, tag: uint32(h)}
	t.pushTail(s)
	t.pushActive(s)
	t.n++
}

// Expire exports every flow idle since now-idle, and with an active
// timeout every flow whose record started that long ago, and returns how
// many records it emitted. Both lists are in time order, so it visits
// only the flows it exports.
func (t *DenyTable) Expire(now int64) int {
	n := 0
	for t.head != nilSlot && now-t.slots[t.head].last >= t.idle {
		if nx := t.slots[t.head].next; nx != nilSlot {
			// The next flow's index position, which its removal reads:
			// fetched while this one is exported.
			prefetch.Line(uintptr(unsafe.Pointer(&t.index[t.slots[nx].hash&t.mask])))
		}
		if t.slots[t.head].packets > 0 {
			n++
		}
		t.export(t.head, EndIdle)
	}
	for t.active > 0 && t.ahead != nilSlot && now-t.slots[t.ahead].since >= t.active {
		s := t.ahead
		e := &t.slots[s]
		if e.packets > 0 {
			t.emitSlot(s, EndActive)
			n++
		}
		e.packets, e.bytes, e.since = 0, 0, now
		t.unlinkActive(s)
		t.pushActive(s)
	}
	return n
}

// Flush exports every flow.
func (t *DenyTable) Flush() {
	for t.head != nilSlot {
		t.export(t.head, EndFlush)
	}
}

// export emits slot s (unless it has no packets since an active export)
// and removes it.
func (t *DenyTable) export(s int32, why EndReason) {
	if t.slots[s].packets > 0 {
		t.emitSlot(s, why)
	}
	t.remove(s)
}

// emitSlot emits slot s's record.
func (t *DenyTable) emitSlot(s int32, why EndReason) {
	e := &t.slots[s]
	o := &t.out
	*o = DenyFlow{Key: e.key.Flow, Group: e.key.Group, Packets: e.packets, Bytes: e.bytes, First: e.first, Last: e.last,
		InIf: e.inIf, OutIf: e.outIf, Hook: e.hook, Mark: e.mark, Verdict: VerdictDeny, End: why}
	if t.prefixes != nil {
		o.Prefix = t.prefixes.Name(e.key.Prefix)
	}
	t.Exported++
	if t.emit != nil {
		t.emit(o)
	}
}

// remove deletes slot s from the index (backward shift) and the list.
func (t *DenyTable) remove(s int32) {
	i := t.slots[s].hash & t.mask
	for t.index[i].slot != s {
		i = (i + 1) & t.mask
	}
	for j := i; ; {
		j = (j + 1) & t.mask
		o := t.index[j]
		if o.slot == nilSlot {
			break
		}
		home := uint64(o.tag) & t.mask
		// o may move to i if its home is not in the cyclic range (i, j].
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.index[i] = o
			i = j
		}
	}
	t.index[i] = ref{slot: nilSlot}
	t.unlink(s)
	t.unlinkActive(s)
	t.slots[s] = entry{next: t.free}
	t.free = s
	t.n--
}

func (t *DenyTable) unlink(s int32) {
	e := &t.slots[s]
	if e.prev != nilSlot {
		t.slots[e.prev].next = e.next
	} else {
		t.head = e.next
	}
	if e.next != nilSlot {
		t.slots[e.next].prev = e.prev
	} else {
		t.tail = e.prev
	}
	e.prev, e.next = nilSlot, nilSlot
}

func (t *DenyTable) pushTail(s int32) {
	e := &t.slots[s]
	e.prev, e.next = t.tail, nilSlot
	if t.tail != nilSlot {
		t.slots[t.tail].next = s
	} else {
		t.head = s
	}
	t.tail = s
}

func (t *DenyTable) unlinkActive(s int32) {
	e := &t.slots[s]
	if e.aprev != nilSlot {
		t.slots[e.aprev].anext = e.anext
	} else {
		t.ahead = e.anext
	}
	if e.anext != nilSlot {
		t.slots[e.anext].aprev = e.aprev
	} else {
		t.atail = e.aprev
	}
	e.aprev, e.anext = nilSlot, nilSlot
}

func (t *DenyTable) pushActive(s int32) {
	e := &t.slots[s]
	e.aprev, e.anext = t.atail, nilSlot
	if t.atail != nilSlot {
		t.slots[t.atail].anext = s
	} else {
		t.ahead = s
	}
	t.atail = s
}
