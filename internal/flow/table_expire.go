package flow

import (
	"math"
	"math/bits"
)

// Expire evicts flows whose time has come at packet (or wall) time now:
// ended flows past End+EndLinger (ReasonEnd), flows idle for IdleTimeout
// (ReasonIdle), and active deltas for flows whose record started at least
// ActiveTimeout ago (ReasonActive, the flow stays). Call it whenever time
// advances by a tick, e.g. every second.
//
// Cost: nothing until the earliest deadline of any live flow has come (a
// lower bound kept by Update); then one sequential pass over all slots
// (O(MaxFlows): MemoryBytes() of memory bandwidth, ~25 ms for 1M flows on a
// 2-core VM) plus the emits. It never allocates.
func (t *Table) Expire(now int64) {
	if t.live == 0 || now < t.due {
		return
	}
	t.due = math.MaxInt64 // recomputed below from every surviving flow
	slots, n := t.slots, t.n
	i := t.firstEmpty()
	for steps := uint32(1); steps < n; {
		if i++; i == n {
			i = 0
		}
		if i%blockSlots == 0 && t.blocks[i/blockSlots] == 0 {
			// An empty block: jump to its last slot. Backward shifts only
			// move flows into the slot being examined, never into a block
			// ahead, so the count is exact when the scan arrives.
			skip := min(blockSlots, n-i) - 1
			i += skip
			steps += skip + 1
			continue
		}
		s := &slots[i]
		for s.tag != 0 {
			r := t.expiry(s, now)
			if r == ReasonNone {
				t.dueBy(t.deadline(s))
				break
			}
			t.stats.Evicted[r]++
			t.report(s, r)
			t.remove(i) // a later slot may shift into i: examine it too
		}
		steps++
	}
}

// expiry decides the fate of live flow s at time now. It emits active
// deltas itself and returns the reason to remove s, or ReasonNone.
func (t *Table) expiry(s *slot, now int64) EndReason {
	if s.state&stEnding != 0 && now-s.end >= t.linger {
		return ReasonEnd
	}
	if now-s.end >= t.idle {
		return ReasonIdle
	}
	if t.active > 0 && s.pkts[0]|s.pkts[1] != 0 && now-s.start >= t.active {
		t.emit(s, ReasonActive)
		reset(s)
	}
	return ReasonNone
}

// deadline is the earliest time live flow s can expire.
func (t *Table) deadline(s *slot) int64 {
	d := s.end + t.idle
	if s.state&stEnding != 0 {
		d = min(d, s.end+t.linger)
	}
	if t.active > 0 && s.pkts[0]|s.pkts[1] != 0 {
		d = min(d, s.start+t.active)
	}
	return d
}

// reset empties the current record of s, keeping its key, orientation, TCP
// end state and last-seen time (s.end, for the idle timeout).
func reset(s *slot) {
	s.pkts = [2]uint32{}
	s.bytes = [2]uint64{}
	s.flags = [2]uint8{}
	s.state |= stEmpty
}

// wrapReport emits the record of s early as ReasonActive because a packet
// counter is about to wrap.
func (t *Table) wrapReport(s *slot) {
	t.stats.WrapReports++
	t.emit(s, ReasonActive)
	reset(s)
}

// Flush emits every flow with reason (ReasonEOF or ReasonShutdown) and
// empties the table. Flows with an empty delta count as skipped.
func (t *Table) Flush(reason EndReason) {
	for i := range t.slots {
		s := &t.slots[i]
		if s.tag == 0 {
			continue
		}
		t.stats.Evicted[reason]++
		t.report(s, reason)
		s.tag, t.tags[i] = 0, 0 // the whole table empties: no backward shift needed
	}
	t.live = 0
	clear(t.blocks)
}

// report emits the record of a flow being removed, unless it is empty.
func (t *Table) report(s *slot, r EndReason) {
	if s.pkts[0]|s.pkts[1] == 0 {
		t.stats.EmptyDeltasSkipped++
		return
	}
	t.emit(s, r)
}

// emit fills the reused Record from s in initiator orientation and hands it
// to the callback.
func (t *Table) emit(s *slot, r EndReason) {
	t.fill(s, &t.rec, r)
	t.stats.Records[r]++
	t.emitFn(&t.rec)
}

// Peek calls fn with the current record of every live flow (reason
// ReasonNone; counters since the flow started or since its last active
// report). The *Record is reused and only valid during the call; fn must
// not call the Table. Peek changes nothing: it is for live views.
func (t *Table) Peek(fn func(*Record)) {
	var rec Record
	for b, c := range t.blocks {
		if c == 0 {
			continue // an empty run of blockSlots slots
		}
		end := min(uint32(b+1)*blockSlots, t.n)
		for i := uint32(b) * blockSlots; i < end; i++ {
			if s := &t.slots[i]; s.tag != 0 && s.pkts[0]|s.pkts[1] != 0 {
				t.fill(s, &rec, ReasonNone)
				fn(&rec)
			}
		}
	}
}

// fill writes s into rec in initiator orientation.
func (t *Table) fill(s *slot, rec *Record, r EndReason) {
	rec.Key = s.key.key()
	ini := s.state & stInitHi // canonical index of the initiator's counters
	if ini != 0 {
		rec.Key = rec.Key.Reverse()
	}
	res := ini ^ 1
	rec.Packets, rec.Bytes, rec.TCPFlags = uint64(s.pkts[ini]), s.bytes[ini], s.flags[ini]
	rec.RevPackets, rec.RevBytes, rec.RevTCPFlags = uint64(s.pkts[res]), s.bytes[res], s.flags[res]
	rec.EndReason = r
	rec.Start, rec.End = s.start, s.end
	rec.Iface = t.ifaces.Name(s.iface)
	rec.TunnelSrc, rec.TunnelDst = t.ifaces.tunnel(s.iface, &rec.Key)
	rec.VLAN = s.vlan
}

// histBuckets is the resolution of the last-seen histogram of evictStalest.
const histBuckets = 256

// evictStalest removes the stalest 1/16 of MaxFlows (at least one flow)
// with ReasonFull, so that a new flow can be admitted.
//
// Three sequential passes over the slots: (1) min and max last-seen time;
// (2) a 256-bucket histogram of last-seen times over that range, which
// gives the cutoff bucket; (3) evict every flow in older buckets and, from
// the cutoff bucket, just enough to reach the target. The evicted set is the
// stalest up to one bucket's width ((max-min)/128 at worst). Under
// sustained overload this costs 3 × slots / (MaxFlows/16) ≈ 64 slot reads
// per admitted flow, sequential and prefetch-friendly; no allocation.
func (t *Table) evictStalest() {
	t.stats.FullPasses++
	target := t.max / 16
	if target < 1 {
		target = 1
	}
	slots := t.slots
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for i := range slots {
		if slots[i].tag != 0 {
			lo = min(lo, slots[i].end)
			hi = max(hi, slots[i].end)
		}
	}
	// Power-of-two bucket width: a shift instead of a divide per slot.
	shift := uint(0)
	if l := bits.Len64(uint64(hi) - uint64(lo)); l > 8 {
		shift = uint(l - 8)
	}
	var hist [histBuckets]uint32
	for i := range slots {
		if slots[i].tag != 0 {
			hist[(uint64(slots[i].end)-uint64(lo))>>shift]++
		}
	}
	cut, older := 0, 0
	for ; cut < histBuckets-1 && older+int(hist[cut]) < target; cut++ {
		older += int(hist[cut])
	}
	quota := target - older // how many to take from the cutoff bucket

	n := t.n
	i := t.firstEmpty()
	for steps := uint32(1); steps < n; steps++ {
		if i++; i == n {
			i = 0
		}
		for s := &slots[i]; s.tag != 0; {
			b := int((uint64(s.end) - uint64(lo)) >> shift)
			if b > cut || b == cut && quota == 0 {
				break
			}
			if b == cut {
				quota--
			}
			t.stats.Evicted[ReasonFull]++
			t.report(s, ReasonFull)
			t.remove(i) // a later slot may shift into i: examine it too
		}
	}
}
