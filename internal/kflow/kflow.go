// Package kflow is weir's eBPF source: TCX programs on the ingress and
// egress of the selected interfaces aggregate packets into a kernel hash
// map keyed by 5-tuple (bpf/flow.c), and user space drains that map every
// EvictInterval into a flow.Table, whose records go to the sink like those
// of any other source.
//
// Draining never races the data path: the programs find their map through
// a one-slot array of maps; user space puts an empty map there before it
// reads the old one, and the kernel waits for running programs on that
// update, so a map being drained is written no more. Draining uses batch
// lookup-and-delete where the kernel has it, per-key deletes where not.
package kflow

import (
	"errors"
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
	// to (timeouts, MaxFlows). DedupIfaces is off: the kernel dedups.
	Table flow.Config
	// Netns runs fn in the network namespace whose interfaces are
	// watched; nil: the caller's. Tests use testbed.Host.Do.
	Netns func(fn func() error) error
	// Logf receives problems the source goes on after.
	Logf func(format string, args ...any)
	// Batch is the number of records handed to the sink at once.
	Batch int
}

// ErrConfig wraps configuration errors.
var ErrConfig = errors.New("kflow: bad configuration")

func (cfg Config) normalize() (Config, error) {
	c := cfg
	if c.Select == nil {
		return c, errors.Join(ErrConfig, errors.New("Select is nil"))
	}
	if c.MaxFlows <= 0 {
		c.MaxFlows = DefaultMaxFlows
	}
	if c.EvictInterval <= 0 {
		c.EvictInterval = DefaultEvictInterval
	}
	if c.Table.MaxFlows <= 0 {
		c.Table.MaxFlows = 2 * c.MaxFlows
	}
	if c.Table.IdleTimeout == 0 {
		c.Table.IdleTimeout = flow.DefaultIdleTimeout
	}
	if c.Table.IdleTimeout <= c.EvictInterval {
		return c, errors.Join(ErrConfig, errors.New("the idle timeout must be longer than the evict interval"))
	}
	c.Table.DedupIfaces = false
	if c.Netns == nil {
		c.Netns = func(fn func() error) error { return fn() }
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	if c.Batch <= 0 {
		c.Batch = 1024
	}
	return c, nil
}

// Stats are the source's counters.
type Stats struct {
	Packets      uint64 // packets the programs looked at
	NotIP        uint64 // not IPv4/IPv6 (or too short to key)
	Duplicates   uint64 // copies seen at a second interface: not counted again
	InsertFails  uint64 // packets not counted because the map was full
	Evictions    uint64 // drains of the kernel map
	Evicted      uint64 // entries drained
	EvictTime    time.Duration
	Records      uint64 // records handed to the sink
	Ifaces       int    // interfaces attached (each ingress and egress)
	BatchDeletes bool   // the kernel map supports batch lookup-and-delete
}
