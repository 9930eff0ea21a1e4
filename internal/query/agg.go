package query

import (
	"container/heap"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"time"
	"unsafe"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/prefetch"
)

// gkey is a group's compact key: interned address ids, ports, protocol,
// interned label id and time bin packed in 24 bytes, so that the group
// map stays small and hashes fast even with millions of groups.
type gkey struct {
	addrs uint64 // src id << 32 | dst id (0: not grouped)
	rest  uint64 // sport << 48 | dport << 32 | proto << 24 | label id
	t     int64  // time bin start, Unix ns
}

// label is what a key's label id stands for: the interface, drop reason,
// sampling rate, post-NAT addresses and ports, verdict, rule, mark and
// zone of the group (each zero when not grouped by; nat says whether the
// group's records were translated, when grouped by a NAT attribute).
type label struct {
	node               string
	iface, reason      string
	sampling           uint32
	nat                bool
	natSrc, natDst     addrKey
	natSPort, natDPort uint16
	verdict            uint8
	rule               string
	mark               uint32
	zone               uint16
	enr                [numEnrichStrs]string // the enrichment strings, AttrSrcWorkload order
	smatch             uint8
}

// maxLabels bounds the label ids, which have 24 bits in a key (a
// variable for tests).
var maxLabels = 1<<24 - 1

// errTooManyLabels fails a query whose groups need more than maxLabels
// label ids.
func errTooManyLabels() error {
	return fmt.Errorf("query: more than %d distinct (node, iface, drop_reason, sampling, nat_*, verdict, rule, ct_mark, ct_zone, workload and service) groups", maxLabels)
}

// sums are a group's counters in the group table. The drop counters, zero
// for nearly every record, are kept apart (agg.drops) so that a slot stays
// one cache line.
type sums struct {
	Packets, Bytes, RevPackets, RevBytes, Flows uint64
}

// value is the counter a ranking by m (not a drop metric) in direction
// d uses, as Counters.Value.
func (c *sums) value(m Metric, d Direction) uint64 {
	switch m {
	case ByFlows:
		return c.Flows
	case ByPackets:
		return pick(d, c.Packets, c.RevPackets)
	}
	return pick(d, c.Bytes, c.RevBytes)
}

func (c *sums) add(o *sums) {
	c.Packets += o.Packets
	c.Bytes += o.Bytes
	c.RevPackets += o.RevPackets
	c.RevBytes += o.RevBytes
	c.Flows += o.Flows
}

// addrKey is an interned address: IPv4-mapped bytes and the IP version,
// so that an IPv6 row with a mapped-looking address stays apart.
type addrKey struct {
	a   [16]byte
	ver uint8
}

// agg sums counters per group. ids start at 1 so that 0 means "not
// grouped".
type agg struct {
	groups sharded

	addrs    []addrKey // id-1 → address
	v4       v4Table   // IPv4 addresses: a 4-byte key, no 17-byte map key to hash
	v6       v6Table   // IPv6 addresses: two words, no map
	labelID  map[label]uint32
	labels   []label             // id-1 → label
	tooMany  bool                // a label past maxLabels was asked for
	drops    map[gkey]*[2]uint64 // nil until a group has drops
	lastLbl  label               // the label last interned, and its id
	lastLbID uint32
}

func newAgg() *agg {
	a := &agg{labelID: map[label]uint32{}}
	a.groups.init()
	return a
}

// addr interns an address.
func (g *agg) addr(a *[16]byte, ver uint8) uint32 {
	if ver == 4 && v4Mapped(a) { // nearly every address: the 4-byte table
		return g.v4.id(g, binary.BigEndian.Uint32(a[12:]), a)
	}
	// Any other version (6, or a damaged record's 0) is shown as its 16
	// bytes (addrOf), so it is one group with the IPv6 address of those
	// bytes: two groups would print as two rows of the same address.
	return g.v6.id(g, a)
}

// label interns a label; past maxLabels it sets tooMany (the query then
// fails) rather than reuse an id.
func (g *agg) label(l label) uint32 {
	if g.lastLbID != 0 && l == g.lastLbl { // rows of a block mostly share one
		return g.lastLbID
	}
	id := g.labelID[l]
	if id == 0 {
		if len(g.labels) >= maxLabels {
			g.tooMany = true
			return uint32(maxLabels)
		}
		g.labels = append(g.labels, l)
		id = uint32(len(g.labels))
		g.labelID[l] = id
	}
	g.lastLbl, g.lastLbID = l, id
	return id
}

// add adds c to group k.
func (g *agg) add(k gkey, c *Counters) {
	g.groups.find(k).add(&sums{c.Packets, c.Bytes, c.RevPackets, c.RevBytes, c.Flows})
	g.addDrops(k, c.DropPackets, c.DropBytes)
}

// addDrops adds drop counters to group k, which has a slot.
func (g *agg) addDrops(k gkey, pkts, bytes uint64) {
	if pkts|bytes == 0 {
		return
	}
	d := g.drops[k]
	if d == nil {
		if g.drops == nil {
			g.drops = map[gkey]*[2]uint64{}
		}
		d = new([2]uint64)
		g.drops[k] = d
	}
	d[0] += pkts
	d[1] += bytes
}

// counters are slot s's sums with its drops.
func (g *agg) counters(s *slot) Counters {
	c := Counters{Packets: s.c.Packets, Bytes: s.c.Bytes, RevPackets: s.c.RevPackets, RevBytes: s.c.RevBytes, Flows: s.c.Flows}
	if len(g.drops) > 0 {
		if d := g.drops[s.k]; d != nil {
			c.DropPackets, c.DropBytes = d[0], d[1]
		}
	}
	return c
}

// merge adds o's groups into g, translating o's interned ids to g's; it
// returns the translations (o's address id → g's, o's label id → g's).
func (g *agg) merge(o *agg) (addrT, lblT []uint32) {
	addrT = make([]uint32, len(o.addrs)+1)
	for i := range o.addrs {
		addrT[i+1] = g.addr(&o.addrs[i].a, o.addrs[i].ver)
	}
	lblT = make([]uint32, len(o.labels)+1)
	for i, l := range o.labels {
		lblT[i+1] = g.label(l)
	}
	o.groups.each(func(sl *slot) {
		c := o.counters(sl)
		k := sl.k
		k.addrs = uint64(addrT[k.addrs>>32])<<32 | uint64(addrT[uint32(k.addrs)])
		k.rest = k.rest&^0xffffff | uint64(lblT[min(k.rest&0xffffff, uint64(len(o.labels)))])
		g.add(k, &c)
	})
	o.groups.release()
	return addrT, lblT
}

// public expands a compact key.
func (g *agg) public(k gkey) Key {
	p := Key{SrcPort: uint16(k.rest >> 48), DstPort: uint16(k.rest >> 32), Proto: uint8(k.rest >> 24)}
	if id := k.rest & 0xffffff; id != 0 && id <= uint64(len(g.labels)) {
		l := &g.labels[id-1]
		p.Node, p.Iface, p.DropReason, p.Sampling = l.node, l.iface, l.reason, l.sampling
		p.NATed, p.NATSrcPort, p.NATDstPort = l.nat, l.natSPort, l.natDPort
		if l.natSrc.ver != 0 {
			p.NATSrcIP = addrOf(&l.natSrc.a, l.natSrc.ver)
		}
		if l.natDst.ver != 0 {
			p.NATDstIP = addrOf(&l.natDst.a, l.natDst.ver)
		}
		p.Verdict, p.Rule, p.Mark, p.Zone = flow.Verdict(l.verdict), l.rule, l.mark, l.zone
		p.SrcWorkload, p.SrcNamespace, p.SrcNode = l.enr[0], l.enr[1], l.enr[2]
		p.DstWorkload, p.DstNamespace, p.DstNode = l.enr[3], l.enr[4], l.enr[5]
		p.Service, p.ServiceBackends, p.ServiceGroup = l.enr[6], l.enr[7], l.enr[8]
		p.ServiceMatch = flow.ServiceMatch(l.smatch)
	}
	if k.t != 0 {
		p.Time = time.Unix(0, k.t).UTC()
	}
	p.SrcIP, p.DstIP = g.ip(uint32(k.addrs>>32)), g.ip(uint32(k.addrs))
	return p
}

func (g *agg) ip(id uint32) netip.Addr {
	if id == 0 {
		return netip.Addr{}
	}
	a := g.addrs[id-1]
	return addrOf(&a.a, a.ver)
}

// addrOf is a stored address as a netip.Addr (unmapped for IPv4).
func addrOf(a *[16]byte, ver uint8) netip.Addr {
	if ver == 4 {
		return netip.AddrFrom16(*a).Unmap()
	}
	return netip.AddrFrom16(*a)
}

// rank sums the totals and returns the rows q asks for: all groups sorted,
// or the top Limit per time bin picked with a bounded heap (sorting
// millions of groups to show ten would dominate the query).
func (g *agg) rank(q *Query) ([]Row, Counters) {
	rows, tot, _ := g.rankKeys(q)
	return rows, tot
}

// rankKeys is rank that also returns the compact keys of the rows.
func (g *agg) rankKeys(q *Query) ([]Row, Counters, []gkey) {
	var tot sums
	value := func(s *slot) uint64 {
		if q.Sort == ByDropPackets || q.Sort == ByDropBytes {
			c := g.counters(s)
			return c.Value(q.Sort, q.Dir)
		}
		return s.c.value(q.Sort, q.Dir)
	}
	better := func(a, b *slot) bool { // a ranks before b within a bin
		va, vb := value(a), value(b)
		if va != vb {
			return (va > vb) != q.Ascending
		}
		ka, kb := g.public(a.k), g.public(b.k)
		return ka.compare(&kb) < 0
	}
	var pick []*slot
	bins := map[int64]*topN{}
	g.groups.each(func(s *slot) {
		tot.add(&s.c)
		if q.Limit <= 0 {
			pick = append(pick, s)
			return
		}
		h := bins[s.k.t]
		if h == nil {
			h = &topN{less: better}
			bins[s.k.t] = h
		}
		h.offer(s, q.Limit)
	})
	for _, h := range bins {
		pick = append(pick, h.s...)
	}
	slices.SortFunc(pick, func(a, b *slot) int {
		if a.k.t != b.k.t {
			if a.k.t < b.k.t {
				return -1
			}
			return 1
		}
		if better(a, b) {
			return -1
		}
		if better(b, a) {
			return 1
		}
		return 0
	})
	rows := make([]Row, len(pick))
	keys := make([]gkey, len(pick))
	for n, s := range pick {
		rows[n] = Row{Key: g.public(s.k), Counters: g.counters(s)}
		keys[n] = s.k
	}
	total := Counters{Packets: tot.Packets, Bytes: tot.Bytes, RevPackets: tot.RevPackets, RevBytes: tot.RevBytes, Flows: tot.Flows}
	for _, d := range g.drops { // every key there has a slot: its drops are in the groups
		total.DropPackets += d[0]
		total.DropBytes += d[1]
	}
	return rows, total, keys
}

// topN keeps the best n slots offered: a heap whose root is the worst
// kept, replaced when a better one comes.
type topN struct {
	s    []*slot
	less func(a, b *slot) bool // a ranks before b
}

func (h *topN) Len() int           { return len(h.s) }
func (h *topN) Less(a, b int) bool { return h.less(h.s[b], h.s[a]) } // worst at the root
func (h *topN) Swap(a, b int)      { h.s[a], h.s[b] = h.s[b], h.s[a] }
func (h *topN) Push(x any)         { h.s = append(h.s, x.(*slot)) }
func (h *topN) Pop() any {
	x := h.s[len(h.s)-1]
	h.s = h.s[:len(h.s)-1]
	return x
}

func (h *topN) offer(s *slot, n int) {
	if len(h.s) < n {
		heap.Push(h, s)
		return
	}
	if h.less(s, h.s[0]) {
		h.s[0] = s
		heap.Fix(h, 0)
	}
}

// shards is the number of tables a group set is split into by the high
// bits of the hash, each growing on its own. It was 16 so that a copying
// resize never held two copies of all groups at once; now that a mapped
// table doubles in place (grow), one table per set faults in the fewest
// fresh pages (the step to a huge page once, not once per shard) and had
// the least kernel time: on the gendb week, alternating with 16, 8 rounds
// of sip,dip where dport = 443 took 0.95 of the CPU, sip,dip 0.97, and 5
// of the four columns sys 0.27 s against 1.02 (medians), RSS the same. A
// table that cannot grow in place (mmap refused, other systems) still
// copies, with old and new at once. At 64 tables the 1.3M groups of the
// dport = 443 shape sat in 128 tables of 1 MiB, none on a huge page.
const shards = 1

// sharded is a set of groups in shards tables.
type sharded struct {
	t [shards]table
	n int
}

func (s *sharded) init() {
	for i := range s.t {
		s.t[i].init(16)
	}
	s.n = 0
}

func (s *sharded) shard(h uint64) *table { return &s.t[h>>57&(shards-1)] }

// find returns the sums of group k, adding it if new.
func (s *sharded) find(k gkey) *sums { return s.findH(k, k.hash()) }

// findH is find with k's hash already computed.
func (s *sharded) findH(k gkey, h uint64) *sums {
	t := s.shard(h)
	n := t.n
	c := t.findH(k, h)
	s.n += t.n - n
	return c
}

// slotAddr is the address of the slot hash h starts probing at.
func (s *sharded) slotAddr(h uint64) uintptr { return s.shard(h).slotAddr(h) }

// reserve sizes the shards for n more groups spread by hash, so that
// adding them does not grow each table step by step (a copy and, past
// hugeMin, a fresh mapping per doubling).
func (s *sharded) reserve(n int) {
	per := (s.n+n)/shards + (s.n+n)/shards/8 + 16 // a margin for the hash's spread
	for i := range s.t {
		t := &s.t[i]
		size := max(len(t.slots), 16)
		for per >= size*7/10 {
			size *= 2
		}
		if size > len(t.slots) {
			t.resize(size)
		}
	}
}

// each calls fn for every group.
func (s *sharded) each(fn func(*slot)) {
	for i := range s.t {
		sl := s.t[i].slots
		for j := range sl {
			if sl[j].c.Flows != 0 {
				fn(&sl[j])
			}
		}
	}
}

// release frees every shard's memory at once.
func (s *sharded) release() {
	for i := range s.t {
		s.t[i].release()
	}
	s.n = 0
}

// table is an open-addressing hash table of groups with linear probing. A
// slot holds the key and the sums together (64 bytes: one cache line), so
// adding a row to an existing group costs one miss; a slot is empty while
// its Flows is 0, as every group holds at least one record.
type table struct {
	slots []slot
	mask  uint64
	n     int
	mem   []byte // the mapping slots live in, outside the Go heap, or nil
}

type slot struct {
	k gkey
	c sums
}

func (t *table) init(size int) {
	t.slots, t.mem = allocSlots(size)
	t.mask = uint64(size - 1)
	t.n = 0
}

// release gives the table's memory back at once (the next use must init).
func (t *table) release() {
	freeSlots(t.mem)
	t.slots, t.mem, t.n = nil, nil, 0
}

// slotAddr is the address of the slot hash h starts probing at, for
// prefetching.
func (t *table) slotAddr(h uint64) uintptr {
	return uintptr(unsafe.Pointer(&t.slots[h&t.mask]))
}

func (k *gkey) hash() uint64 {
	h := k.addrs*0x9e3779b97f4a7c15 ^ k.rest*0xc2b2ae3d27d4eb4f ^ uint64(k.t)*0x165667b19e3779f9
	h ^= h >> 29
	h *= 0xbf58476d1ce4e5b9
	return h ^ h>>32
}

// find returns the sums of group k, adding the group if it is new.
func (t *table) find(k gkey) *sums { return t.findH(k, k.hash()) }

// findH is find with k's hash already computed.
func (t *table) findH(k gkey, h uint64) *sums {
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.c.Flows == 0 {
			if t.n >= len(t.slots)*7/10 {
				t.grow()
				return t.findH(k, h)
			}
			t.n++
			s.k = k
			return &s.c
		}
		if s.k == k {
			return &s.c
		}
	}
}

// resize moves the table's groups to a table of size slots (a power of
// two, above its load limit).
func (t *table) resize(size int) {
	old, mem := t.slots, t.mem
	t.init(size)
	for i := range old {
		// Rehashing lands every group at a random slot of the new table:
		// prefetch the one aheadRows slots on, as the row loop does.
		if j := i + aheadRows; j < len(old) && old[j].c.Flows != 0 {
			prefetch.Line(t.slotAddr(old[j].k.hash()))
		}
		if old[i].c.Flows != 0 {
			*t.find(old[i].k) = old[i].c
		}
	}
	freeSlots(mem) // at once: peak memory is old + new, not old + new + garbage
}
