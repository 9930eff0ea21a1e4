// Package ebpf is weir's eBPF source: TCX programs (clsact filters
// where the kernel has no TCX) on the ingress and egress of the selected
// interfaces, in every watched namespace and on interfaces that appear
// later, aggregate packets into a kernel hash map keyed by 5-tuple
// (bpf/flow.c), and user space drains that map every EvictInterval into a
// flow.Table, whose records go to the sink like those of any other source.
// With Drops, a program on skb:kfree_skb adds the packets the kernel drops
// to their flows, with the reason (drops_linux.go).
//
// Draining never races the data path: the programs find their map through
// a one-slot array of maps; user space puts an empty map there before it
// reads the old one, and the kernel waits for running programs on that
// update, so a map being drained is written no more. Draining uses batch
// lookup-and-delete where the kernel has it, per-key deletes where not.
//
// Dedup: the kernel counts a packet at the first interface that saw its
// flow in the current map and, for up to two other interfaces, keeps what
// they saw beside it. User space hands all of these to a flow.Table with
// DedupIfaces on, so across drains a flow stays counted at the interface
// the table holds it at (a packet in flight between two interfaces when
// the maps are swapped is not counted twice).
//
// Overflow: a packet the map has no room for goes to a ring buffer; user
// space aggregates those packets exactly as the kernel would (same struct,
// same dedup rule) and drains that aggregate with the map. Overflow also
// makes the next drain come early (reason "full"). A packet that finds the
// ring full too is lost, and counted (Stats.Lost).
package ebpf

import (
	"errors"
	"fmt"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/netdev"
)

// Defaults of Config.
const (
	DefaultMaxFlows      = 100_000
	DefaultEvictInterval = 5 * time.Second
)

// Config sets up a Source.
type Config struct {
	// Select chooses the interfaces; required.
	Select *netdev.Selector
	// MaxFlows is the size of each kernel flow map (--ebpf-max-flows).
	MaxFlows int
	// EvictInterval is how often the kernel map is drained
	// (--ebpf-evict-interval). The table's idle timeout must be longer.
	EvictInterval time.Duration
	// Table configures the user-space flow table the drained entries go
	// to (timeouts, MaxFlows, DedupWindow). DedupIfaces is always on
	// (see the package comment).
	Table flow.Config
	// Netns are the network namespaces whose interfaces are watched (the
	// selection applies in each); empty: the caller's.
	Netns []Netns
	// Logf receives problems the source goes on after.
	Logf func(format string, args ...any)
	// Batch is the number of records handed to the sink at once.
	Batch int
	// Sampling counts 1 in Sampling packets (0 or 1: every packet). The
	// choice is a hash of the packet's content, so every interface that
	// sees a packet makes the same choice; with SampleFlows it is a hash of
	// the flow (both directions), and a sampled flow is seen whole.
	Sampling    int
	SampleFlows bool
	// RingSize is the overflow ring's size in bytes (a power of two, at
	// least a page; 0: DefaultRingSize); -1 turns the ring off, so packets
	// the map has no room for are only counted (Stats.Lost).
	RingSize int
	// Drops attaches the weir_drops program to the skb:kfree_skb
	// tracepoint: packets the kernel drops in the watched namespaces are
	// added to their flows' records (DropPackets, DropBytes, DropReason),
	// with per-reason counts in Stats.DropReasons.
	Drops bool
	// Attach chooses how the programs are attached: AttachAuto (TCX,
	// or a clsact qdisc's filters where the kernel has no TCX), AttachTCX
	// or AttachTC.
	Attach AttachMode

	noPrealloc bool  // flow maps with BPF_F_NO_PREALLOC (benchmarks compare)
	carry      carry // the programs' carry points; zero: the defaults (tests lower them)
}

// AttachMode is how the programs are attached to an interface.
type AttachMode string

// Attach modes.
const (
	AttachAuto AttachMode = ""    // TCX where the kernel has it (6.6+), else AttachTC
	AttachTCX  AttachMode = "tcx" // TCX links (they go when weir goes, even if it is killed)
	AttachTC   AttachMode = "tc"  // direct-action filters on a clsact qdisc (created if missing, removed if weir created it)
)

// Netns is a network namespace a Source watches.
type Netns struct {
	// Name, if set, prefixes the names of its interfaces in records
	// ("name/eth0"), so that interfaces of several namespaces stay apart.
	Name string
	// Do runs fn on a thread in the namespace (netdev.InNetns; tests use
	// testhost.Host.Do).
	Do func(fn func() error) error
}

// DefaultRingSize is the overflow ring's default size: about 13,000
// packets of 80 bytes.
const DefaultRingSize = 1 << 20

// ErrConfig wraps configuration errors.
var ErrConfig = errors.New("ebpf: bad configuration")

func (cfg Config) normalize() (Config, error) {
	c := cfg
	if c.Select == nil {
		return c, errors.Join(ErrConfig, errors.New("no Select function in the Config"))
	}
	if c.MaxFlows <= 0 {
		c.MaxFlows = DefaultMaxFlows
	}
	if c.EvictInterval <= 0 {
		c.EvictInterval = DefaultEvictInterval
	}
	if c.Table.MaxFlows <= 0 {
		c.Table.MaxFlows = c.MaxFlows
	}
	if c.Table.IdleTimeout == 0 {
		c.Table.IdleTimeout = flow.DefaultIdleTimeout
	}
	if c.Table.IdleTimeout <= c.EvictInterval {
		return c, errors.Join(ErrConfig, errors.New("the idle timeout must be longer than the evict interval"))
	}
	c.Table.DedupIfaces = true
	if len(c.Netns) == 0 {
		c.Netns = []Netns{{Do: func(fn func() error) error { return fn() }}}
	}
	for _, n := range c.Netns {
		if n.Do == nil {
			return c, errors.Join(ErrConfig, errors.New("a Netns without Do"))
		}
	}
	switch c.Attach {
	case AttachAuto, AttachTCX, AttachTC:
	default:
		return c, errors.Join(ErrConfig, fmt.Errorf("attach mode %q: want tcx or tc", c.Attach))
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	if c.Batch <= 0 {
		c.Batch = 1024
	}
	if c.Sampling < 0 || c.Sampling > 1<<24 {
		return c, errors.Join(ErrConfig, errors.New("sampling must be 1..16777216"))
	}
	if c.Sampling == 0 {
		c.Sampling = 1
	}
	switch {
	case c.RingSize == 0:
		c.RingSize = DefaultRingSize
	case c.RingSize == -1:
	case c.RingSize < 4096 || c.RingSize&(c.RingSize-1) != 0 || c.RingSize > 1<<30:
		return c, errors.Join(ErrConfig, errors.New("the ring size must be a power of two from 4KiB to 1GiB"))
	}
	return c, nil
}

// Eviction sources and reasons: the indexes of Stats.Evictions and
// Stats.Evicted.
const (
	SourceHashmap = iota // the kernel flow map
	SourceRingbuf        // packets from the overflow ring, aggregated in user space
	NumSources
)

// Reasons a drain runs.
const (
	ReasonTimer    = iota // every EvictInterval
	ReasonFull            // early: the map overflowed (or the ring aggregate filled)
	ReasonShutdown        // the source is stopping
	NumReasons
)

// SourceNames and ReasonNames are the metric label values.
var (
	SourceNames = [NumSources]string{"hashmap", "ringbuf"}
	ReasonNames = [NumReasons]string{"timer", "full", "shutdown"}
)

// EvictBuckets are the upper bounds, in seconds, of the drain-duration
// histogram (Stats.EvictHist has one more bucket: +Inf).
var EvictBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}

// Stats are the source's counters. Kernel counters are as of the last
// drain or Stats call, whichever is later.
type Stats struct {
	Packets     uint64 // packets the programs looked at
	NotIP       uint64 // not IPv4/IPv6 (or too short to key)
	Duplicates  uint64 // copies seen at a second interface: not counted again
	SampledOut  uint64 // packets sampling skipped
	MapInserts  uint64 // entries the programs created in the flow maps
	InsertE2BIG uint64 // packets the map had no room for (it was full)
	// InsertENOMEM and InsertOther are packets whose entry could not be
	// created for other reasons (no kernel memory, any other errno).
	InsertENOMEM, InsertOther uint64
	Ring                      uint64 // packets sent through the overflow ring
	RingRead                  uint64 // ring records read by user space
	Lost                      uint64 // packets neither in the map nor in the ring: should stay 0
	// FragFirst, FragFound and FragMissing count IP fragments: firsts
	// (ports remembered), later ones given those ports, later ones whose
	// first was not seen (keyed without ports).
	FragFirst, FragFound, FragMissing uint64

	// Evictions counts drains and Evicted the flows they removed, by
	// source (SourceHashmap, SourceRingbuf) and reason (ReasonTimer …).
	Evictions [NumSources][NumReasons]uint64
	Evicted   [NumSources][NumReasons]uint64
	// EvictTime is the total time spent draining the kernel map (swap
	// and lookup-and-delete); EvictHist its distribution over
	// EvictBuckets (+Inf last); EvictLast the last drain's.
	EvictTime time.Duration
	EvictHist [11]uint64
	EvictLast time.Duration
	// SwapTime is the part of EvictTime spent swapping the maps: the
	// kernel waits for an RCU grace period there (latency, not CPU).
	SwapTime time.Duration
	// BatchTime is the part of EvictTime spent in the kernel's batch
	// lookup-and-delete calls; the rest of a drain is what weir adds
	// (the table keeps up with the kernel on another goroutine).
	BatchTime time.Duration
	Capacity  int    // entries per kernel flow map (MaxFlows)
	Records   uint64 // records handed to the sink
	Ifaces    int    // interfaces attached (each ingress and egress)
	// BatchDeletes reports that the kernel map supports batch
	// lookup-and-delete.
	BatchDeletes bool
	// Drops counts dropped packets attributed to flows (Config.Drops);
	// DropsLost those whose flow got no map entry (the map was full), and
	// DropsUnkeyed those weir could not key (not IP, no network header).
	// DropReasons counts every dropped packet of a watched namespace by
	// the kernel's reason name.
	Drops, DropsLost, DropsUnkeyed uint64
	DropReasons                    map[string]uint64
}

// Occupancy is the number of entries in the active kernel map: entries
// created minus entries drained.
func (s *Stats) Occupancy() uint64 {
	var out uint64
	for _, n := range s.Evicted[SourceHashmap] {
		out += n
	}
	if s.MapInserts < out {
		return 0
	}
	return s.MapInserts - out
}

// carry holds the points at which the programs move a flow's packet and
// byte counts out of their shared word (see count_packet in bpf/flow.c).
type carry struct{ packets, bytes uint64 }

// pbShift is the bit at which a flow value's word pb holds packets.
const pbShift = 40

// defaultCarry is half of each field of pb: 24 bits of packets, 40 of bytes.
var defaultCarry = carry{packets: 1 << 23, bytes: 1 << 39}

// counts returns the packets and bytes of a flow value.
func (c carry) counts(v *flowFlowVal) (packets, bytes uint64) {
	return v.Pb>>pbShift + (v.Carry>>32)*c.packets, v.Pb&(1<<pbShift-1) + (v.Carry&(1<<32-1))*c.bytes
}

// add counts one packet of n bytes in v as the kernel's count_packet does.
func (c carry) add(v *flowFlowVal, n uint32) {
	v.Pb += 1<<pbShift | uint64(n)
	if v.Pb>>pbShift >= c.packets {
		v.Pb -= c.packets << pbShift
		v.Carry += 1 << 32
	}
	if v.Pb&(1<<pbShift-1) >= c.bytes {
		v.Pb -= c.bytes
		v.Carry++
	}
}
