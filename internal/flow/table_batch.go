package flow

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// batchChunk is how many packets each stage of UpdateBatch handles at a
// time, and so how far ahead of its use each stage prefetches: enough to
// cover a memory miss (~100-200 ns) with the work of the packets in
// between, few enough that the lines are still cached when used. A power
// of two (ring index by mask).
const batchChunk = 16

// pending is a packet whose key is canonical and hashed, waiting to be
// applied.
type pending struct {
	w   keyWords
	h   uint32
	at  uint32 // its home slot; after scanFPs, the slot to try first
	dir uint8
}

// UpdateBatch is Update for each packet of ps, in order, with the same
// result. It is software-pipelined in three stages a chunk of batchChunk
// packets apart, so a big table's misses (a line of fingerprints and a
// slot per packet, whatever the probe length) overlap with useful work
// instead of stalling it one by one: chunk k+2's keys are made canonical
// and hashed and their home fingerprints prefetched; chunk k+1's
// fingerprints (now cached) are scanned for the slot each probe ends on,
// which is prefetched; chunk k is applied. The scan is a hint: apply
// checks the slot's tag and key, and probes again from home if they are
// not the flow's (a new flow, a probe longer than 8, or flows moved in
// between), so a wrong hint costs at most a miss. It does not allocate.
func (t *Table) UpdateBatch(ps []Packet) { t.batch(ps, nil) }

// lines must match prefetchLines's assembly: 32 addresses.
var (
	_ [len(lines{}) - 32]byte
	_ [32 - len(lines{})]byte
)

// batch is UpdateBatch of ps or UpdateAggregates of as (the other is nil).
func (t *Table) batch(ps []Packet, as []Aggregate) {
	const c = batchChunk
	var ring [4][c]pending // chunk k in ring[k%4]: chunks k..k+2 are live
	var ls lines
	n, stride := len(ps), unsafe.Sizeof(Packet{})
	if as != nil {
		n, stride = len(as), unsafe.Sizeof(Aggregate{})
	}
	scan := t.scanAhead()
	for k := -2; k*c < n; k++ {
		if lo := (k + 2) * c; lo < n { // stage 1: hash, prefetch fingerprints (or home slots)
			rs := ring[(k+2)&3][:min(c, n-lo)]
			if as != nil {
				t.prepAll(unsafe.Pointer(&as[lo].Key), stride, rs)
			} else {
				t.prepAll(unsafe.Pointer(&ps[lo].Key), stride, rs)
			}
			if scan {
				t.fpLines(rs, &ls)
			} else {
				t.homeLines(rs, &ls)
			}
			prefetchLines(&ls)
		}
		if lo := (k + 1) * c; scan && lo >= 0 && lo < n { // stage 2: find slots, prefetch them
			t.slotLines(ring[(k+1)&3][:min(c, n-lo)], &ls)
			prefetchLines(&ls)
		}
		if lo := k * c; lo >= 0 { // stage 3: apply
			rs := ring[k&3][:min(c, n-lo)]
			if as != nil {
				for i := range rs {
					t.applyAggregate(&as[lo+i], &rs[i])
				}
				continue
			}
			ps := ps[lo : lo+len(rs)]
			for i := 0; i < len(rs); i++ {
				i += t.applyPlain(ps[i:], rs[i:])
				if i < len(rs) {
					t.applyHit(&ps[i], &rs[i])
				}
			}
		}
	}
}

// applyPlain applies the leading packets of ps (hashed into rs) that are
// plain hits, and returns how many it applied: a packet that only adds to
// its live flow's counters at the slot its hint names (applyHit's common
// case). It stops at the first other packet, which the caller gives to
// applyHit: no call in this loop, so nothing is spilled around one.
func (t *Table) applyPlain(ps []Packet, rs []pending) int {
	slots := unsafe.Pointer(unsafe.SliceData(t.slots))
	dedup, idle, limit := t.dedup, t.idle, t.pktLimit
	i := 0
	for ; i < len(rs) && i < len(ps); i++ {
		r, p := &rs[i], &ps[i]
		// r.at < t.n (prepAll, slotLines): no bounds check needed.
		s := (*slot)(unsafe.Add(slots, uintptr(r.at)*unsafe.Sizeof(slot{})))
		d := r.dir & 1 // 0 or 1: no bounds checks on the per-direction arrays
		if s.tag != r.h || !s.key.eq(&r.w) || dedup != 0 && s.owner[d] != p.Iface+1 || s.state&stEnding != 0 ||
			p.Time-s.end >= idle || s.pkts[d] >= limit || s.pkts[0]|s.pkts[1] == 0 ||
			p.Time < s.start || p.Role != RoleUnknown && s.state&stRoleFixed == 0 ||
			p.TCPFlags&(TCPFin|TCPRst) != 0 {
			break
		}
		s.end = max(s.end, p.Time)
		s.pkts[d]++
		s.bytes[d] += uint64(p.Length)
		s.flags[d] |= p.TCPFlags
	}
	var pkts, bytes uint64
	for j := range ps[:i] {
		pkts++
		bytes += uint64(ps[j].Length)
	}
	t.stats.Packets += pkts
	t.stats.Bytes += bytes
	return i
}

// sparse is the inverse load factor below which batch skips the scan
// stage: in a table at most 1/sparse full nearly every flow sits in its
// home slot (256 flows in a 65,536-flow table: all of them), so the home
// slot is the hint and its lines are prefetched in the first stage; the
// scan would only cost (BenchmarkUpdateBatch/flows=256-in-64k).
const sparse = 8

// scanAhead reports whether batch finds each packet's slot by a scan of
// fingerprints (a table more than 1/sparse full) rather than taking its
// home slot as the hint.
func (t *Table) scanAhead() bool { return t.live > int(t.n/sparse) }

// homeLines lists the lines of each of rs's home slots (r.at).
func (t *Table) homeLines(rs []pending, ls *lines) {
	slots := uintptr(unsafe.Pointer(unsafe.SliceData(t.slots)))
	for i := range rs {
		s := slots + uintptr(rs[i].at)*unsafe.Sizeof(slot{})
		ls[2*i&(len(ls)-1)], ls[(2*i+1)&(len(ls)-1)] = s, s+unsafe.Sizeof(slot{})-1
	}
}

// fpLines lists the lines of the 8 fingerprints from each of rs's homes
// (r.at) that slotLines will read.
func (t *Table) fpLines(rs []pending, ls *lines) {
	fps := t.fps
	for i := range rs {
		f := uintptr(unsafe.Pointer(&fps[rs[i].at]))
		ls[2*i&(len(ls)-1)], ls[(2*i+1)&(len(ls)-1)] = f, f+fpPad
	}
}

// slotLines finds where each of rs's probes ends among the 8 fingerprints
// from its home (prefetched by fpLines) and sets r.at to that slot, whose
// two lines it lists. The scan has no branch, so a flow's random distance
// from its home costs no mispredict.
func (t *Table) slotLines(rs []pending, ls *lines) {
	fps, slots, n := unsafe.Pointer(unsafe.SliceData(t.fps)), unsafe.Pointer(unsafe.SliceData(t.slots)), t.n
	for i := range rs {
		r := &rs[i]
		// r.at < n and fps has n+fpPad bytes: the 8 read are in bounds.
		j := r.at + scanFPs((*[fpPad + 1]uint8)(unsafe.Add(fps, r.at)), fingerprint(r.h))
		if j >= n {
			j -= n // a padding byte or none of the 8: the probe wraps (or the hint misses)
		}
		r.at = j
		s := uintptr(slots) + uintptr(j)*unsafe.Sizeof(slot{})
		ls[2*i&(len(ls)-1)], ls[(2*i+1)&(len(ls)-1)] = s, s+unsafe.Sizeof(slot{})-1
	}
}

// scanFPs returns the index (0-7) of the first of fps that is fp, or 8 if
// none is: where a linear probe from fps[0] finds a flow of fingerprint fp
// within 8 slots. SWAR over the 8 bytes as one word: a byte of x is zero
// iff (x-1)&^x has its top bit set, exactly for the lowest zero byte
// (only bytes above a zero one can borrow), which is the one wanted.
func scanFPs(fps *[fpPad + 1]uint8, fp uint8) uint32 {
	const lo, hi = 0x0101_0101_0101_0101, 0x8080_8080_8080_8080
	x := binary.LittleEndian.Uint64(fps[:]) ^ uint64(fp)*lo
	return uint32(bits.TrailingZeros64((x-lo)&^x&hi)) >> 3
}

// applyHit is apply for the batch paths, with the same result: the common
// case, a packet (or aggregate) that only adds to its live flow's counters,
// is counted here instead of in add, which saves a call and add's
// branch-by-branch walk. Every case add treats specially goes to add: a
// copy seen at another interface (dedup), an ending flow, an expired gap,
// a counter about to wrap, an empty record after an active report, time
// going back before the record's start, a Role hint not yet applied, FIN or
// RST. Update keeps apply, the reference the batch cross-checks compare
// against. The flow is looked for at r.at first (a hint: the tag and key
// decide), then by a probe from its home.
func (t *Table) applyHit(p *Packet, r *pending) {
	pk, b, first := t.counts(p)
	t.stats.Packets += uint64(pk)
	t.stats.Bytes += b
	s := &t.slots[r.at]
	if s.tag != r.h || !s.key.eq(&r.w) {
		i, ok := t.probe(&r.w, r.h)
		if !ok {
			t.insert(i, r.h, &r.w, r.dir, p)
			return
		}
		s = &t.slots[i]
	}
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
}
