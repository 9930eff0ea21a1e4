//go:build linux

package ebpf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/sink"
)

// Counter indexes of the programs' per-CPU counters (COUNT_* in flow.c).
const (
	cntPackets = iota
	cntNotIP
	cntDup
	cntInsertE2BIG
	cntInsertENOMEM
	cntInsertOther
	cntNoMap
	cntRing
	cntLost
	cntSampledOut
	cntFragFirst
	cntFragFound
	cntFragMissing
	cntInserts
	cntDrops
	cntDropsLost
	cntDropsUnkeyed
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
	out sink.Sink // set by Run

	coll     *ebpf.Collection
	active   *ebpf.Map    // the one-slot array of maps
	maps     [2]*ebpf.Map // flow maps: maps[cur] is in active
	cur      int
	counters *ebpf.Map
	ring     *ringbuf.Reader          // nil when the ring is off
	links    []io.Closer              // the drop tracepoint's link
	tc       bool                     // attach with clsact filters (no TCX here, or Config.Attach)
	nets     []netState               // the watched namespaces, as Config.Netns
	on       map[ifAttach][]io.Closer // attached interfaces: their TCX links or tc filters
	events   chan nsEvent             // link changes from the namespaces' watchers
	gone     []ifKey                  // interfaces deleted since the last drain: forgotten after it
	quit     chan struct{}            // closed by detach: the watchers' goroutines end
	ifaces   map[ifKey]uint16         // attached interfaces → flow.Ifaces index
	names    flow.Ifaces
	table    *flow.Table
	end      ending // end flags of the table's flows, for the final flush
	batch    []flow.Record
	keys     [2][]flowFlowKey // drain buffers, reused: the kernel fills one while the table takes the other
	vals     [2][]flowFlowVal
	aggs     []flow.Aggregate // reused by addBatch and add: entries as the table takes them, a batch or less at a time
	batchOK  bool
	monoOff  int64          // wall clock − CLOCK_MONOTONIC, ns
	clock    jiffyClock     // maps the programs' jiffies to CLOCK_MONOTONIC
	sp       spill          // the overflow ring's aggregate
	drops    dropState      // Config.Drops
	cnt      [cntMax]uint64 // kernel counters, summed over CPUs

	mu        sync.Mutex
	stats     Stats
	closeOnce sync.Once
}

// New loads the programs and creates the maps (it needs CAP_BPF and
// CAP_NET_ADMIN, or root); Run attaches them.
func New(cfg Config) (*Source, error) {
	s, err := load(cfg)
	if err != nil {
		return nil, privilegeHint(err)
	}
	// Loading parsed the kernel's BTF (for CO-RE): tens of MB that are
	// garbage now. Hand them back before the table's pages are touched.
	debug.FreeOSMemory()
	return s, nil
}

// load is New without the hint.
func load(cfg Config) (*Source, error) {
	c, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	spec, err := loadFlow()
	if err != nil {
		return nil, err
	}
	for name, v := range map[string]uint32{"sampling": uint32(c.Sampling), "sample_flows": b2u(c.SampleFlows), "overflow_ring": b2u(c.RingSize > 0)} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("ebpf: setting %s: %w", name, err)
		}
	}
	if c.carry == (carry{}) {
		c.carry = defaultCarry
	}
	for name, v := range map[string]uint64{"carry_packets": c.carry.packets, "carry_bytes": c.carry.bytes} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("ebpf: setting %s: %w", name, err)
		}
	}
	if c.RingSize > 0 {
		spec.Maps["overflow"].MaxEntries = uint32(c.RingSize)
	} else {
		spec.Maps["overflow"].MaxEntries = uint32(os.Getpagesize()) // unused, but must exist
	}
	delete(spec.Programs, "weir_noop") // for benchmarks only
	s := &Source{cfg: c, ifaces: map[ifKey]uint16{}, tc: c.Attach == AttachTC,
		on: map[ifAttach][]io.Closer{}, events: make(chan nsEvent, 64), quit: make(chan struct{})}
	if c.Drops {
		names, consumed, err := dropReasonNames()
		if err != nil {
			return nil, err
		}
		if err := spec.Variables["drop_skip"].Set(consumed); err != nil {
			return nil, fmt.Errorf("ebpf: setting drop_skip: %w", err)
		}
		s.drops.names, s.drops.held = names, map[flow.Key]*heldDrop{}
	} else {
		delete(spec.Programs, "weir_drops")
	}
	flows := spec.Maps["flows"].Copy()
	flows.MaxEntries = uint32(c.MaxFlows)
	if c.noPrealloc {
		flows.Flags |= unix.BPF_F_NO_PREALLOC
	}
	delete(spec.Maps, "flows") // only its shape is needed; the two maps are made below
	spec.Maps["active"].InnerMap = flows
	s.sp.init(min(c.MaxFlows, maxSpill), c.carry)
	s.coll, err = ebpf.NewCollection(spec)
	if err != nil {
		return nil, fmt.Errorf("ebpf: loading the programs: %w", err)
	}
	s.active, s.counters = s.coll.Maps["active"], s.coll.Maps["counters"]
	for i := range s.maps {
		if s.maps[i], err = ebpf.NewMap(flows); err != nil {
			s.Close()
			return nil, fmt.Errorf("ebpf: creating a flow map of %d entries: %w", c.MaxFlows, err)
		}
	}
	if err := s.active.Update(uint32(0), s.maps[0], ebpf.UpdateAny); err != nil {
		s.Close()
		return nil, fmt.Errorf("ebpf: setting the active map: %w", err)
	}
	if c.RingSize > 0 {
		if s.ring, err = ringbuf.NewReader(s.coll.Maps["overflow"]); err != nil {
			s.Close()
			return nil, fmt.Errorf("ebpf: opening the overflow ring: %w", err)
		}
	}
	tc := c.Table
	tc.Ifaces = &s.names
	s.table, err = flow.NewTable(tc, func(r *flow.Record) {
		s.end.note(r) // the final flush's ended connections: end, not shutdown
		s.emit(r, false)
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	s.aggs = make([]flow.Aggregate, 0, drainBatch)
	for i := range s.keys {
		s.keys[i], s.vals[i] = make([]flowFlowKey, drainBatch), make([]flowFlowVal, drainBatch)
	}
	s.batchOK = s.probeBatch()
	s.stats.BatchDeletes = s.batchOK
	s.stats.Capacity = c.MaxFlows
	s.monoOff = wallMinusMono()
	if err := s.clock.init(s.coll.Programs["weir_clock"], s.coll.Variables["clock_j"], s.coll.Variables["clock_ns"]); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// probeBatch reports whether the kernel drains hash maps in batches.
func (s *Source) probeBatch() bool {
	var cursor ebpf.MapBatchCursor
	_, err := s.maps[1].BatchLookupAndDelete(&cursor, s.keys[0][:1], s.vals[0][:1], nil)
	return err == nil || errors.Is(err, ebpf.ErrKeyNotExist)
}

// detach stops watching for interfaces and closes every link and filter.
func (s *Source) detach() {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	for i := range s.nets {
		if w := s.nets[i].watcher; w != nil {
			w.Close()
			s.nets[i].watcher = nil
		}
	}
	for k := range s.on {
		s.detachIface(k)
	}
	closeAll(s.cfg.Logf, s.links)
	s.links = nil
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
		return 0, fmt.Errorf("ebpf: SO_NETNS_COOKIE: %w", err)
	}
	return v, nil
}

// Run attaches the programs, drains the kernel map every EvictInterval
// (sooner when it overflows) and, when ctx ends, detaches everything,
// drains a last time and flushes the table. The overflow ring is read by
// a goroutine of its own, so that a drain (which waits for an RCU grace
// period) never keeps it from being read.
//
// Records go to out.
func (s *Source) Run(ctx context.Context, out sink.Sink) error {
	s.out = out
	defer s.Close()
	if err := s.attach(); err != nil {
		return privilegeHint(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.sayAttached(sctx)
	readErr := make(chan error, 1)
	if s.ring != nil {
		go func() { readErr <- s.readRing() }()
	}
	// An overflow drain comes at most this often: the swap waits for an
	// RCU grace period, and a flood must not turn into back-to-back drains.
	minGap := max(s.cfg.EvictInterval/10, 10*time.Millisecond)
	last := time.Now()
	reason := ReasonTimer
	timer := time.NewTimer(s.cfg.EvictInterval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return s.shutdown(readErr)
		case err := <-readErr:
			_ = s.stopRing(nil) // nil: the reader has returned; nothing to wait for
			return err
		case ev := <-s.events:
			s.linkEvent(ev)
			continue
		case <-s.sp.pressure:
			if s.sp.full() {
				s.takeSpill(ReasonFull) // the aggregate is full: into the table now
				s.flush()
			}
			if reason == ReasonTimer {
				// The map is full: drain it early, but not before minGap since the last drain.
				reason = ReasonFull
				timer.Reset(time.Until(last.Add(minGap)))
			}
			continue
		case <-timer.C:
		}
		if err := s.evict(reason); err != nil {
			_ = s.stopRing(readErr) // the eviction error is the one to report
			return err
		}
		s.forgetGone()
		s.table.Expire(time.Now().UnixNano())
		s.end.prune(s.table)
		s.flush()
		last, reason = time.Now(), ReasonTimer
		timer.Reset(s.cfg.EvictInterval)
	}
}

// shutdown detaches the programs, reads what is left in the ring, drains
// the map a last time and flushes the table.
func (s *Source) shutdown(readErr chan error) error {
	s.detach() // nothing new arrives from here on
	err := s.stopRing(readErr)
	if e := s.evict(ReasonShutdown); err == nil {
		err = e
	}
	s.table.Flush(flow.ReasonShutdown)
	s.flushDrops()
	s.flush()
	return err
}

// stopRing makes the ring reader read what is in the ring and return, and
// waits for it (readErr nil: it has returned already).
func (s *Source) stopRing(readErr chan error) error {
	if s.ring == nil || readErr == nil {
		return nil
	}
	s.sp.stopping.Store(true)
	_ = s.ring.Flush() // wakes the reader; it reports its own errors on readErr
	for {
		select {
		case err := <-readErr:
			return err
		case <-s.sp.pressure:
			if s.sp.full() {
				s.takeSpill(ReasonShutdown)
			}
		}
	}
}

// emit queues a record for the sink; a record from the table (own false)
// takes the drops held for its flow.
func (s *Source) emit(r *flow.Record, own bool) {
	s.batch = append(s.batch, *r)
	if s.cfg.Sampling > 1 {
		s.batch[len(s.batch)-1].Sampling = uint32(s.cfg.Sampling)
	}
	if !own && len(s.drops.held) > 0 {
		s.attachHeld(&s.batch[len(s.batch)-1])
	}
	if len(s.batch) >= s.cfg.Batch {
		s.flush()
	}
}

// flush hands the pending records to the sink.
func (s *Source) flush() {
	if len(s.batch) == 0 {
		return
	}
	if err := s.out.Write(s.batch); err != nil {
		s.cfg.Logf("ebpf: sink: %v", err)
	}
	s.mu.Lock()
	s.stats.Records += uint64(len(s.batch))
	s.mu.Unlock()
	s.batch = s.batch[:0]
}

// Stats returns the counters: the kernel's as of now, the rest as of the
// last drain. It is safe to call while Run runs.
func (s *Source) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counters != nil {
		s.readCounters()
	}
	return s.stats
}

// Close detaches the programs and frees the maps; Run calls it. The
// kernel counters are read a last time first: Stats keeps them.
func (s *Source) Close() error {
	s.closeOnce.Do(s.close)
	return nil
}

func (s *Source) close() {
	s.detach()
	if s.ring != nil {
		s.ring.Close()
	}
	s.mu.Lock()
	if s.counters != nil {
		s.readCounters()
		s.counters = nil
	}
	s.mu.Unlock()
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
}

// sayAttached says once when the programs are on their first interfaces.
func (s *Source) sayAttached(ctx context.Context) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if n := s.Stats().Ifaces; n > 0 {
			s.cfg.Logf("eBPF programs on %d interfaces matching %s; kernel maps of %s flows, drained every %s",
				n, s.cfg.Select, format.Count(uint64(s.cfg.MaxFlows)), s.cfg.EvictInterval)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
