//go:build linux

package kflow

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/netdev"
	"github.com/weir-dev/weir/internal/sink"
)

// Counter indexes of the programs' per-CPU counters (COUNT_* in flow.c).
const (
	cntPackets = iota
	cntNotIP
	cntDup
	cntInsertFail
	cntNoMap
	cntMax
)

// ifKey names an interface across namespaces: netns cookie and ifindex.
type ifKey struct {
	netns   uint64
	ifindex uint32
}

// Source is the eBPF source. Create it with New, run it with Run.
type Source struct {
	cfg Config
	out sink.Sink

	coll     *ebpf.Collection
	active   *ebpf.Map    // the one-slot array of maps
	maps     [2]*ebpf.Map // flow maps: maps[cur] is in active
	cur      int
	counters *ebpf.Map
	links    []link.Link
	ifaces   map[ifKey]uint16 // attached interfaces → flow.Ifaces index
	names    flow.Ifaces
	table    *flow.Table
	batch    []flow.Record
	keys     []flowFlowKey // drain buffers, reused
	vals     []flowFlowVal
	batchOK  bool
	monoOff  int64 // wall clock − CLOCK_MONOTONIC, ns

	mu    sync.Mutex
	stats Stats
}

// New loads the programs and creates the maps (it needs CAP_BPF and
// CAP_NET_ADMIN, or root); Run attaches them.
func New(cfg Config, out sink.Sink) (*Source, error) {
	c, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	spec, err := loadFlow()
	if err != nil {
		return nil, err
	}
	flows := spec.Maps["flows"].Copy()
	flows.MaxEntries = uint32(c.MaxFlows)
	delete(spec.Maps, "flows") // only its shape is needed; the two maps are made below
	spec.Maps["active"].InnerMap = flows
	s := &Source{cfg: c, out: out, ifaces: map[ifKey]uint16{}}
	s.coll, err = ebpf.NewCollection(spec)
	if err != nil {
		return nil, fmt.Errorf("kflow: loading the programs: %w", err)
	}
	s.active, s.counters = s.coll.Maps["active"], s.coll.Maps["counters"]
	for i := range s.maps {
		if s.maps[i], err = ebpf.NewMap(flows); err != nil {
			s.Close()
			return nil, fmt.Errorf("kflow: creating a flow map of %d entries: %w", c.MaxFlows, err)
		}
	}
	if err := s.active.Update(uint32(0), s.maps[0], ebpf.UpdateAny); err != nil {
		s.Close()
		return nil, fmt.Errorf("kflow: setting the active map: %w", err)
	}
	tc := c.Table
	tc.Ifaces = &s.names
	s.table, err = flow.NewTable(tc, func(r *flow.Record) {
		s.batch = append(s.batch, *r)
		if len(s.batch) >= c.Batch {
			s.flush()
		}
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	s.keys = make([]flowFlowKey, 4096)
	s.vals = make([]flowFlowVal, 4096)
	s.batchOK = s.probeBatch()
	s.stats.BatchDeletes = s.batchOK
	return s, nil
}

// probeBatch reports whether the kernel drains hash maps in batches.
func (s *Source) probeBatch() bool {
	var cursor ebpf.MapBatchCursor
	_, err := s.maps[1].BatchLookupAndDelete(&cursor, s.keys[:1], s.vals[:1], nil)
	return err == nil || errors.Is(err, ebpf.ErrKeyNotExist)
}

// attach puts the programs on ingress and egress of every interface of
// the namespace that the selector matches.
func (s *Source) attach() error {
	return s.cfg.Netns(func() error {
		links, err := netdev.List()
		if err != nil {
			return err
		}
		netns, err := netnsCookie()
		if err != nil {
			return err
		}
		for _, l := range links {
			if !s.cfg.Select.Match(l) {
				continue
			}
			ing, eg := s.coll.Programs["weir_flow_eth_ingress"], s.coll.Programs["weir_flow_eth_egress"]
			if l.Type != unix.ARPHRD_ETHER {
				ing, eg = s.coll.Programs["weir_flow_ip_ingress"], s.coll.Programs["weir_flow_ip_egress"]
			}
			for _, a := range []struct {
				p *ebpf.Program
				t ebpf.AttachType
			}{{ing, ebpf.AttachTCXIngress}, {eg, ebpf.AttachTCXEgress}} {
				lk, err := link.AttachTCX(link.TCXOptions{Interface: l.Index, Program: a.p, Attach: a.t})
				if err != nil {
					return fmt.Errorf("kflow: attaching to %s: %w", l.Name, err)
				}
				s.links = append(s.links, lk)
			}
			s.ifaces[ifKey{netns, uint32(l.Index)}] = s.names.Index(l.Name)
		}
		return nil
	})
}

// netnsCookie returns the calling thread's network namespace cookie
// (SO_NETNS_COOKIE), which the programs read with bpf_get_netns_cookie.
func netnsCookie() (uint64, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	v, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err != nil {
		return 0, fmt.Errorf("kflow: SO_NETNS_COOKIE: %w", err)
	}
	return v, nil
}

// Run attaches the programs, drains the kernel map every EvictInterval
// and, when ctx ends, drains it a last time, flushes the table and
// detaches everything.
func (s *Source) Run(ctx context.Context) error {
	defer s.Close()
	if err := s.attach(); err != nil {
		return err
	}
	s.mu.Lock()
	s.stats.Ifaces = len(s.ifaces)
	s.mu.Unlock()
	tick := time.NewTicker(s.cfg.EvictInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			for _, l := range s.links { // nothing new arrives while the last drain runs
				l.Close()
			}
			s.links = nil
			err := s.evict()
			s.table.Flush(flow.ReasonShutdown)
			s.flush()
			return err
		case <-tick.C:
			if err := s.evict(); err != nil {
				return err
			}
			s.table.Expire(time.Now().UnixNano())
			s.flush()
		}
	}
}

// evict swaps in the empty map and drains the old one into the table.
func (s *Source) evict() error {
	start := time.Now()
	old, next := s.maps[s.cur], s.maps[1-s.cur]
	// Updating a map-in-map slot waits for running programs: after this,
	// no program holds old.
	if err := s.active.Update(uint32(0), next, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("kflow: swapping the flow map: %w", err)
	}
	s.cur = 1 - s.cur
	s.monoOff = wallMinusMono()
	n, err := s.drain(old)
	el := time.Since(start)
	var cnt [cntMax]uint64
	s.readCounters(&cnt)
	s.mu.Lock()
	s.stats.Evictions++
	s.stats.Evicted += uint64(n)
	s.stats.EvictTime += el
	s.stats.Packets, s.stats.NotIP, s.stats.Duplicates, s.stats.InsertFails = cnt[cntPackets], cnt[cntNotIP], cnt[cntDup], cnt[cntInsertFail]
	s.mu.Unlock()
	return err
}

// drain reads and deletes every entry of m, adding each to the table.
func (s *Source) drain(m *ebpf.Map) (int, error) {
	total := 0
	if s.batchOK {
		var cursor ebpf.MapBatchCursor
		for {
			n, err := m.BatchLookupAndDelete(&cursor, s.keys, s.vals, nil)
			for i := range n {
				s.add(&s.keys[i], &s.vals[i])
			}
			total += n
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				return total, nil
			}
			if err != nil {
				return total, fmt.Errorf("kflow: draining the flow map: %w", err)
			}
		}
	}
	// Per key: iterate, then delete what was read.
	var k flowFlowKey
	var v flowFlowVal
	it := m.Iterate()
	keys := s.keys[:0]
	for it.Next(&k, &v) {
		s.add(&k, &v)
		keys = append(keys, k)
		total++
	}
	for i := range keys {
		m.Delete(&keys[i])
	}
	s.keys = keys[:cap(keys)]
	return total, it.Err()
}

// add converts one kernel entry to an aggregate for the table.
func (s *Source) add(k *flowFlowKey, v *flowFlowVal) {
	var a flow.Aggregate
	a.Key.SrcAddr, a.Key.DstAddr = k.Src, k.Dst
	a.Key.IPVersion = 6
	if isMapped(&k.Src) {
		a.Key.IPVersion = 4
	}
	a.Key.Proto = k.Proto
	a.Key.SrcPort, a.Key.DstPort = k.Sport, k.Dport
	a.Key.ICMPType, a.Key.ICMPCode = k.IcmpType, k.IcmpCode
	a.Packets, a.Bytes = uint32(min(v.Packets, 1<<32-1)), v.Bytes
	a.First = int64(v.FirstNs) + s.monoOff
	a.Time = int64(v.LastNs) + s.monoOff
	a.TCPFlags = uint8(v.Marks)
	switch {
	case v.Marks&(1<<8) != 0:
		a.Role = flow.RoleInitiator
	case v.Marks&(2<<8) != 0:
		a.Role = flow.RoleResponder
	}
	if i, ok := s.ifaces[ifKey{v.Netns, v.Ifindex}]; ok {
		a.Iface = i
	} else {
		a.Iface = s.names.Index(fmt.Sprintf("if%d", v.Ifindex))
	}
	s.table.UpdateAggregate(&a)
}

func isMapped(a *[16]byte) bool {
	return a[0]|a[1]|a[2]|a[3]|a[4]|a[5]|a[6]|a[7]|a[8]|a[9] == 0 && a[10] == 0xff && a[11] == 0xff
}

// wallMinusMono is the offset from CLOCK_MONOTONIC (bpf_ktime_get_ns) to
// the wall clock.
func wallMinusMono() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Now().UnixNano() - ts.Nano()
}

// readCounters sums the per-CPU counters.
func (s *Source) readCounters(out *[cntMax]uint64) {
	var per []uint64
	for i := range uint32(cntMax) {
		if err := s.counters.Lookup(i, &per); err != nil {
			continue
		}
		for _, v := range per {
			out[i] += v
		}
	}
}

// flush hands the pending records to the sink.
func (s *Source) flush() {
	if len(s.batch) == 0 {
		return
	}
	if err := s.out.Write(s.batch); err != nil {
		s.cfg.Logf("kflow: sink: %v", err)
	}
	s.mu.Lock()
	s.stats.Records += uint64(len(s.batch))
	s.mu.Unlock()
	s.batch = s.batch[:0]
}

// Stats returns the counters as of the last drain.
func (s *Source) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Close detaches the programs and frees the maps; Run calls it.
func (s *Source) Close() error {
	for _, l := range s.links {
		l.Close()
	}
	s.links = nil
	for i, m := range s.maps {
		if m != nil {
			m.Close()
			s.maps[i] = nil
		}
	}
	if s.coll != nil {
		s.coll.Close()
		s.coll = nil
	}
	return nil
}
