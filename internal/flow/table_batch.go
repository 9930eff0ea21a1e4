package flow

import (
	"unsafe"

	"github.com/weir-dev/weir/internal/prefetch"
)

// prefetchDistance is how many packets ahead each stage of UpdateBatch runs:
// enough to cover a memory miss (~100-200 ns) with the work of the packets
// in between, few enough that the lines are still cached when used. A
// power of two (ring index by mask).
const prefetchDistance = 16

// probeHint bounds the tag scan that picks the slot to prefetch; a longer
// probe just goes unprefetched.
const probeHint = 8

// pending is a packet whose key is canonical and hashed, waiting to be
// applied.
type pending struct {
	w   keyWords
	h   uint32
	dir uint8
}

// UpdateBatch is Update for each packet of ps, in order, with the same
// result. How it probes depends on what the table touches: its live flows'
// tag lines and slots. Up to tens of thousands of live flows (or a table of
// up to 32k slots) mostly sit in L2/L3 and get their home tag line and slot
// prefetched (updateBatchSmall). Beyond, it is software-pipelined in three
// stages: packet i+2D's key is made canonical and hashed and its home tags
// prefetched; packet i+D's tags (now cached) are scanned for the slot it
// will probe to, which is prefetched; packet i is applied. So the misses of a big table (one tag
// line and one slot per packet, whatever the probe length) overlap with
// useful work instead of stalling it one by one. The scan is only a hint:
// apply probes again, so flows created or moved in between cost at most a
// miss. It does not allocate.
func (t *Table) UpdateBatch(ps []Packet) {
	if t.batchPath() == pathSmall {
		t.updateBatchSmall(ps)
	} else {
		t.updateBatchBig(ps)
	}
}

// updateBatchBig is UpdateBatch's three-stage path.
func (t *Table) updateBatchBig(ps []Packet) {
	const d = prefetchDistance
	var ring [4 * d]pending // entries i..i+2D are live
	n := len(ps)
	for i := 0; i < min(n, 2*d); i++ {
		t.hashAhead(&ps[i], &ring[i])
	}
	for i := 0; i < min(n, d); i++ {
		t.slotAhead(&ring[i])
	}
	for i := range ps {
		r := &ring[i&(4*d-1)]
		t.applyHit(&ps[i], r)
		if k := i + 2*d; k < n {
			t.hashAhead(&ps[k], &ring[k&(4*d-1)])
		}
		if k := i + d; k < n {
			t.slotAhead(&ring[k&(4*d-1)])
		}
	}
}

// hashAhead makes p's key canonical and hashes it into r, and prefetches
// the line of tags its probe starts on.
func (t *Table) hashAhead(p *Packet, r *pending) {
	t.prep(&p.Key, r)
	prefetch.Line(uintptr(unsafe.Pointer(&t.tags[fastrange(r.h, t.n)])))
}

// slotAhead scans r's tags (prefetched by hashAhead) for the slot its probe
// ends on, a match or the empty slot a new flow takes, and prefetches it.
func (t *Table) slotAhead(r *pending) {
	tags, n := t.tags, t.n
	i := fastrange(r.h, n)
	for range probeHint {
		if tg := tags[i]; tg == r.h || tg == 0 {
			break
		}
		if i++; i == n {
			i = 0
		}
	}
	prefetchSlot(uintptr(unsafe.Pointer(&t.slots[i])))
}

// smallTable is the slot count up to which UpdateBatch skips the tag scan
// stage: tags and slots of a table this size mostly sit in L2/L3, where the
// scan costs more than the miss it hides (10k flows: 56-65 vs 51 ns).
const smallTable = 1 << 15

// UpdateBatch's ways of probing, by what the table touches.
const (
	pathSmall = iota // two stages: home tag line and slot prefetched
	pathBig          // three stages: tags scanned ahead for the slot to prefetch
)

// batchPath returns how UpdateBatch probes the table as it is now.
func (t *Table) batchPath() int {
	if t.n <= smallTable || t.live <= smallLive {
		return pathSmall
	}
	return pathBig
}

// smallLive is the live flow count up to which a big table is probed like a
// small one: what a table touches is its live flows' tag lines and slots,
// not its size, so a 64k-flow table holding 256 flows (live capture at
// --max-flows 65536) is as cache-resident as a small one, and the tag scan
// stage only costs it (BenchmarkUpdateBatch/flows=256-in-64k).
const smallLive = smallTable * 3 / 4

// updateBatchSmall is UpdateBatch for small tables, in chunks of D
// packets: the next chunk is hashed with each home tag line and home slot
// prefetched (one assembly call, stagePackets), then this chunk applied,
// so every packet is hashed D to 2D-1 packets before it is applied.
func (t *Table) updateBatchSmall(ps []Packet) {
	const d = prefetchDistance
	var ring [2 * d]pending // chunk c in half c&1
	n := len(ps)
	t.stagePackets(ps[:min(n, d)], &ring[0])
	for c := 0; c < n; c += d {
		if k := c + d; k < n {
			t.stagePackets(ps[k:min(n, k+d)], &ring[k&d])
		}
		t.applyPackets(ps[c:min(n, c+d)], ring[c&d:])
	}
}

// applyPackets is applyHit for each packet of ps (ps[j] hashed into rs[j]) with applyHit's hit path written out in the loop:
// no call per packet, so the loop keeps its values in registers (Go saves
// them all around a call).
func (t *Table) applyPackets(ps []Packet, rs []pending) {
	rs = rs[:len(ps)]
	t.stats.Packets += uint64(len(ps))
	tags, slots := unsafe.Pointer(unsafe.SliceData(t.tags)), unsafe.Pointer(unsafe.SliceData(t.slots))
	for j := range ps {
		p, r := &ps[j], &rs[j]
		t.stats.Bytes += uint64(p.Length)
		n, h := t.n, r.h
		i := fastrange(h, n)
	probe:
		for {
			if tg := *(*uint32)(unsafe.Add(tags, uintptr(i)*4)); tg == h {
				if s := (*slot)(unsafe.Add(slots, uintptr(i)*unsafe.Sizeof(slot{}))); s.key.eq(&r.w) {
					d := r.dir & 1
					if (t.dedup == 0 || s.owner[d] == p.Iface+1) && s.state&(stEnding|stEmpty) == 0 &&
						p.Time-s.end < t.idle && s.pkts[d] < t.pktLimit && p.Time >= s.start && plain(p, s) {
						s.end = max(s.end, p.Time)
						s.pkts[d]++
						s.bytes[d] += uint64(p.Length)
						s.flags[d] |= p.TCPFlags
					} else {
						t.add(s, p, d)
					}
					break probe
				}
			} else if tg == 0 {
				t.insert(i, h, &r.w, r.dir, p)
				break probe
			}
			if i++; i == n {
				i = 0
			}
		}
	}
}

// applyHit is apply for the batch paths, with the same result: the common
// case, a packet (or aggregate) that only adds to its live flow's counters,
// is counted here instead of in add, which saves a call and add's
// branch-by-branch walk. Every case add treats specially goes to add: a
// copy seen at another interface (dedup), an ending flow, an expired gap,
// a counter about to wrap, an empty record after an active report, time
// going back before the record's start, a Role hint not yet applied, FIN or
// RST. Update keeps apply, the reference the batch cross-checks compare
// against.
func (t *Table) applyHit(p *Packet, r *pending) {
	pk, b, first := t.counts(p)
	t.stats.Packets += uint64(pk)
	t.stats.Bytes += b
	// The probe indexes tags and slots through their base pointers: i < n =
	// len(tags) = len(slots) always, and the two bounds checks per step held
	// two registers the loop needs (their values spilled to the stack).
	tags, slots := unsafe.Pointer(unsafe.SliceData(t.tags)), unsafe.Pointer(unsafe.SliceData(t.slots))
	n, h := t.n, r.h
	i := fastrange(h, n)
	for {
		if tg := *(*uint32)(unsafe.Add(tags, uintptr(i)*4)); tg == h { // tag first: rejects a mismatch without touching its slot
			if s := (*slot)(unsafe.Add(slots, uintptr(i)*unsafe.Sizeof(slot{}))); s.key.eq(&r.w) {
				d := r.dir & 1 // 0 or 1: no bounds checks on the per-direction arrays
				if (t.dedup == 0 || s.owner[d] == p.Iface+1) && s.state&stEnding == 0 &&
					first-s.end < t.idle && s.pkts[d] <= t.pktLimit-pk && s.pkts[0]|s.pkts[1] != 0 &&
					first >= s.start && (p.Role == RoleUnknown || s.state&stRoleFixed != 0) &&
					p.TCPFlags&(TCPFin|TCPRst) == 0 {
					s.end = max(s.end, p.Time)
					s.pkts[d] += pk
					s.bytes[d] += b
					s.flags[d] |= p.TCPFlags
					return
				}
				t.add(s, p, d)
				return
			}
		} else if tg == 0 {
			break
		}
		if i++; i == n {
			i = 0
		}
	}
	t.insert(i, h, &r.w, r.dir, p)
}

// plain reports whether p has no FIN or RST and no Role hint that s still
// needs: most packets carry neither, so both bytes are tested at once first.
func plain(p *Packet, s *slot) bool {
	fr := uint16(p.TCPFlags) | uint16(p.Role)<<8
	return fr&(0xff00|TCPFin|TCPRst) == 0 || fr&(TCPFin|TCPRst) == 0 && s.state&stRoleFixed != 0
}
