package afpacket

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/netdev"
	"github.com/weir-dev/weir/internal/packet"
)

// Config sets up a Capture.
type Config struct {
	// Select chooses the interfaces; required.
	Select *netdev.Selector
	// Workers is the number of capture goroutines, each with its own ring
	// per interface and its own table shard. Default 1.
	Workers int
	// Ring sizes every ring (Iface, Fanout and Filter are set per socket).
	Ring RingConfig
	// Filter returns the classic BPF program to attach to the sockets of
	// link (programs depend on the link type: Ethernet or raw IP); nil
	// Filter or a nil program: no filter. An error keeps the link closed
	// and is counted as an open failure.
	Filter func(link netdev.Link) ([]Instruction, error)
	// Table configures the flow table; MaxFlows is the total, split evenly
	// across the workers (rounded up). DedupIfaces is always on.
	Table flow.Config
	// Decoder configures each worker's decoder.
	Decoder packet.Config
	// Tick is how often (wall clock) each worker expires flows and
	// publishes its counters. Default 1s.
	Tick time.Duration
	// Batch is the number of records a worker hands the sink at once.
	// Default 1024.
	Batch int
	// Logf, if set, receives problems capture goes on after (an interface
	// that matched but could not be opened, one that vanished).
	Logf func(format string, args ...any)
	// Ready, if set, is called once the interfaces present at start are
	// open and the workers are reading, with their names.
	Ready func(ifaces []string)
	// Netns runs fn in the network namespace to capture in, on a thread
	// that stays there for the call; every socket is created through it.
	// Nil: the caller's namespace. Tests use testhost.Host.Do.
	Netns func(fn func() error) error
	// Views, if set, receives the top ViewTop flows (20 if 0) every
	// ViewInterval while Run runs: the live table of weir capture -i.
	// ViewRedraw says Views is a terminal: each view replaces the last
	// in place, like top (format.LiveView); else views are appended.
	Views        io.Writer
	ViewTop      int
	ViewInterval time.Duration
	ViewRedraw   bool
}

// Limits of Config.
const (
	MaxWorkers = 64
)

// ErrNoInterface is returned by Run when an interface named explicitly in
// the selector does not exist when capture starts.
var ErrNoInterface = errors.New("afpacket: no such interface")

func (cfg Config) normalize() (Config, error) {
	c := cfg
	if c.Select == nil {
		return c, errors.New("afpacket: Config.Select is nil")
	}
	if c.Workers == 0 {
		c.Workers = 1
	}
	if c.Workers < 1 || c.Workers > MaxWorkers {
		return c, fmt.Errorf("afpacket: Workers %d out of range 1..%d", c.Workers, MaxWorkers)
	}
	if c.Tick <= 0 {
		c.Tick = time.Second
	}
	if c.Batch <= 0 {
		c.Batch = 1024
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	if c.Netns == nil {
		c.Netns = func(fn func() error) error { return fn() }
	}
	if c.Table.MaxFlows < 1 {
		return c, fmt.Errorf("afpacket: Table.MaxFlows %d must be at least 1", c.Table.MaxFlows)
	}
	c.Table.MaxFlows = (c.Table.MaxFlows + c.Workers - 1) / c.Workers
	c.Table.DedupIfaces = true
	return c, nil
}

// IfaceStats are one interface's counters, summed over its sockets.
type IfaceStats struct {
	Name    string
	Packets uint64 // frames read from the rings
	Bytes   uint64 // their link-layer lengths on the wire (Frame.WireLen)
	Kernel  RingStats
	Open    bool // the interface is being captured now
}

// Stats are a Capture's counters, summed over its workers as of their last
// publication (every Tick) — or exact after Run returns.
type Stats struct {
	Ifaces    []IfaceStats // sorted by name; interfaces released earlier are kept
	Decoder   packet.Stats
	Table     flow.Stats
	Flows     int // flows in the tables now
	TableCap  int // flows the tables hold at most (sum over shards)
	TableMem  int // bytes preallocated for the tables
	Records   uint64
	Workers   int
	Opened    uint64 // interfaces opened since start (reopenings count)
	Released  uint64 // interfaces released
	OpenFails uint64 // interfaces that matched but could not be opened
}
