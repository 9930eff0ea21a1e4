//go:build linux

package ebpf

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/flow"
)

// evict swaps in the empty map, drains the old one and the ring's
// aggregate into the table.
func (s *Source) evict(reason int) error {
	start := time.Now()
	old, next := s.maps[s.cur], s.maps[1-s.cur]
	// Updating a map-in-map slot waits for running programs: after this,
	// no program holds old.
	if err := s.active.Update(uint32(0), next, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("ebpf: swapping the flow map: %w", err)
	}
	s.cur = 1 - s.cur
	swap := time.Since(start)
	s.monoOff = wallMinusMono()
	if err := s.clock.read(); err != nil {
		return err
	}
	n, calls, err := s.drain(old)
	el := time.Since(start)
	s.takeSpill(reason)
	if s.drops.held != nil {
		s.placeDrops()
	}
	s.mu.Lock()
	s.stats.Evictions[SourceHashmap][reason]++
	s.stats.Evicted[SourceHashmap][reason] += uint64(n)
	s.stats.EvictTime += el
	s.stats.EvictLast = el
	s.stats.SwapTime += swap
	s.stats.BatchTime += calls
	b := len(EvictBuckets)
	for i, le := range EvictBuckets {
		if el.Seconds() <= le {
			b = i
			break
		}
	}
	s.stats.EvictHist[b]++
	s.readCounters()
	s.mu.Unlock()
	return err
}

// drainBatch is the entries read per batch lookup-and-delete (two
// buffers of it, 2.75 MB, and the table's aggregates, 0.7 MB). One call
// for all 100k entries is no cheaper for the kernel (its cost is per
// bucket and entry, BenchmarkMapDrain), and the last batch's table work is
// the drain's tail.
const drainBatch = 8192

// drain reads and deletes every entry of m, adding each to the table,
// and returns the entries and the time spent in batch calls. A helper
// goroutine adds one batch to the table while the kernel copies out the
// next (the Run goroutine does not touch the table meanwhile).
func (s *Source) drain(m *ebpf.Map) (int, time.Duration, error) {
	if !s.batchOK {
		n, err := s.drainPerKey(m)
		return n, 0, err
	}
	full := make(chan int)         // buffer index, filled
	free := make(chan struct{}, 2) // buffers the helper is done with
	free <- struct{}{}
	free <- struct{}{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range full {
			s.addBatch(s.keys[i], s.vals[i])
			free <- struct{}{}
		}
	}()
	total, buf := 0, 0
	var cursor ebpf.MapBatchCursor
	var err error
	var calls time.Duration
	for {
		<-free
		k, v := s.keys[buf][:cap(s.keys[buf])], s.vals[buf][:cap(s.vals[buf])]
		var n int
		t0 := time.Now()
		n, err = m.BatchLookupAndDelete(&cursor, k, v, nil)
		calls += time.Since(t0)
		s.keys[buf], s.vals[buf] = k[:n], v[:n]
		total += n
		full <- buf
		buf = 1 - buf
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			err = nil
			break
		}
		if err != nil {
			err = fmt.Errorf("ebpf: draining the flow map: %w", err)
			break
		}
	}
	close(full)
	<-done
	return total, calls, err
}

// drainPerKey drains m where the kernel has no batch operations: iterate,
// then delete what was read.
func (s *Source) drainPerKey(m *ebpf.Map) (int, error) {
	var k flowFlowKey
	var v flowFlowVal
	it := m.Iterate()
	keys := s.keys[0][:0]
	total := 0
	for it.Next(&k, &v) {
		s.add(&k, &v)
		keys = append(keys, k)
		total++
	}
	// An entry that stays would be counted again at the next drain: a
	// failed delete is an error, not silence (one already gone is fine).
	var derr error
	for i := range keys {
		if err := m.Delete(&keys[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) && derr == nil {
			derr = fmt.Errorf("deleting a drained entry: %w", err)
		}
	}
	s.keys[0] = keys[:0]
	return total, errors.Join(it.Err(), derr)
}

// aggsPerEntry is the most aggregates one entry makes: its own and
// len(flowFlowVal.Other).
const aggsPerEntry = 1 + len(flowFlowVal{}.Other)

// addBatch hands the entries of one drained batch to the table, in
// order, in one pipelined call (its misses overlap).
func (s *Source) addBatch(ks []flowFlowKey, vs []flowFlowVal) {
	as := s.aggs[:0]
	var c ifCache
	for j := range ks {
		if len(as)+aggsPerEntry > cap(as) {
			s.table.UpdateAggregates(as)
			as = as[:0]
		}
		as = s.appendAggs(as, &ks[j], &vs[j], &c)
	}
	s.table.UpdateAggregates(as)
	s.aggs = as[:0]
}

// add hands one entry to the table (the per-key drain and the ring's
// aggregate).
func (s *Source) add(k *flowFlowKey, v *flowFlowVal) {
	var c ifCache
	s.aggs = s.appendAggs(s.aggs[:0], k, v, &c)
	s.table.UpdateAggregates(s.aggs)
	s.aggs = s.aggs[:0]
}

// appendAggs appends what one entry adds to the table: its counts at the
// interface that counted it, then what each other interface saw. The
// table (DedupIfaces) keeps counting a flow at the interface it first
// counted it at, so only one of these adds; the rest are duplicates.
func (s *Source) appendAggs(as []flow.Aggregate, k *flowFlowKey, v *flowFlowVal, c *ifCache) []flow.Aggregate {
	var a flow.Aggregate
	setKey(&a.Key, k)
	a.First = int64(v.FirstNs) + s.monoOff
	a.Time = max(s.clock.mono(v.LastJ), int64(v.FirstNs)) + s.monoOff // last is a tick count: it may lag
	a.TCPFlags = uint8(v.Marks)
	switch {
	case v.Marks&(1<<8) != 0:
		a.Role = flow.RoleInitiator
	case v.Marks&(2<<8) != 0:
		a.Role = flow.RoleResponder
	}
	if v.DropPackets > 0 {
		s.noteDrops(&a, v)
	}
	packets, bytes := s.cfg.carry.counts(v)
	a.Packets, a.Bytes = uint32(min(packets, 1<<32-1)), bytes
	if a.Packets > 0 { // an entry the drop program made may have none
		a.Iface = s.ifaceCached(c, v.Netns, v.Ifindex)
		as = append(as, a)
	}
	for i := range v.Other {
		o := &v.Other[i]
		if o.Ifindex == 0 || o.Packets == 0 {
			continue
		}
		a.Packets, a.Bytes = uint32(min(o.Packets, 1<<32-1)), o.Bytes
		a.Iface = s.ifaceCached(c, o.Netns, o.Ifindex)
		as = append(as, a)
	}
	return as
}

// ifCache remembers the last interface iface looked up: a drain's entries
// mostly come from one or a few interfaces, and the map lookup is not free.
// It lives for one batch (attaching, which changes s.ifaces, does not run
// during one).
type ifCache struct {
	k  ifKey
	i  uint16
	ok bool
}

// ifaceCached is iface through c.
func (s *Source) ifaceCached(c *ifCache, netns uint64, ifindex uint32) uint16 {
	if k := (ifKey{netns, ifindex}); !c.ok || c.k != k {
		c.k, c.i, c.ok = k, s.iface(netns, ifindex), true
	}
	return c.i
}

// iface is the flow.Ifaces index of an interface the programs saw.
func (s *Source) iface(netns uint64, ifindex uint32) uint16 {
	k := ifKey{netns, ifindex}
	if i, ok := s.ifaces[k]; ok {
		return i
	}
	i := s.names.Index(fmt.Sprintf("if%d", ifindex)) // not attached by us (a race with a new interface)
	s.ifaces[k] = i
	return i
}

// setKey sets fk to the kernel's key k.
func setKey(fk *flow.Key, k *flowFlowKey) {
	fk.SrcAddr, fk.DstAddr = k.Src, k.Dst
	fk.IPVersion = 6
	if isMapped(&k.Src) {
		fk.IPVersion = 4
	}
	fk.Proto = k.Proto
	fk.SrcPort, fk.DstPort = k.Sport, k.Dport
	fk.ICMPType, fk.ICMPCode = k.IcmpType, k.IcmpCode
}

func isMapped(a *[16]byte) bool {
	return a[0]|a[1]|a[2]|a[3]|a[4]|a[5]|a[6]|a[7]|a[8]|a[9] == 0 && a[10] == 0xff && a[11] == 0xff
}

// wallMinusMono is the offset from CLOCK_MONOTONIC (bpf_ktime_get_ns) to
// the wall clock.
func wallMinusMono() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) // CLOCK_MONOTONIC always exists on Linux
	return time.Now().UnixNano() - ts.Nano()
}

// readCounters sums the per-CPU counters into s.stats; s.mu is held.
func (s *Source) readCounters() {
	var per []uint64
	for i := range uint32(cntMax) {
		if err := s.counters.Lookup(i, &per); err != nil {
			continue
		}
		var sum uint64
		for _, v := range per {
			sum += v
		}
		s.cnt[i] = sum
	}
	c, st := &s.cnt, &s.stats
	st.Packets, st.NotIP, st.Duplicates, st.SampledOut = c[cntPackets], c[cntNotIP], c[cntDup], c[cntSampledOut]
	st.MapInserts = c[cntInserts]
	st.InsertE2BIG, st.InsertENOMEM, st.InsertOther = c[cntInsertE2BIG], c[cntInsertENOMEM], c[cntInsertOther]
	st.Ring, st.Lost = c[cntRing], c[cntLost]
	st.FragFirst, st.FragFound, st.FragMissing = c[cntFragFirst], c[cntFragFound], c[cntFragMissing]
	st.Drops, st.DropsLost, st.DropsUnkeyed = c[cntDrops], c[cntDropsLost], c[cntDropsUnkeyed]
	if s.drops.names != nil {
		s.readDropReasons()
	}
}

// readDropReasons sums the per-CPU per-reason drop counts into
// s.stats.DropReasons (a new map: callers keep the old); s.mu is held.
func (s *Source) readDropReasons() {
	m := s.coll.Maps["drop_reasons"]
	out := map[string]uint64{}
	var per []uint64
	for i := range uint32(dropReasons) {
		if err := m.Lookup(i, &per); err != nil {
			continue
		}
		var sum uint64
		for _, v := range per {
			sum += v
		}
		if sum > 0 {
			name := s.drops.reasonName(uint16(i))
			if i == dropReasons-1 {
				name = "OTHER" // reasons past 254, subsystems' included
			}
			out[name] += sum
		}
	}
	s.stats.DropReasons = out
}
