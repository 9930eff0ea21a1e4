package conntrack

import (
	"cmp"
	"fmt"
	"time"
)

// DefaultPollInterval is how often a Source dumps the table by default,
// as Antrea's flow exporter polls.
const DefaultPollInterval = 5 * time.Second

// SourceConfig configures a Source. The zero value reads the caller's
// namespace, both families, with events, every DefaultPollInterval.
type SourceConfig struct {
	// Netns, if set, runs fn inside the network namespace whose table
	// to read (netdev.InNetns; tests use testhost.Host.Do).
	Netns func(fn func() error) error
	// NetnsName names the namespace in messages when the kernel's
	// namespaces under /run/netns do not (the --netns given).
	NetnsName string
	// PollInterval is the time between two full dumps; records are
	// exported after each (DefaultPollInterval if 0).
	PollInterval time.Duration
	// NoEvents reads dumps only: connections that open and close
	// between two polls are then missed.
	NoEvents bool
	// Family limits the dump to AF_INET (2) or AF_INET6 (10); 0: both.
	Family uint8
	// Store configures the connection store (timeouts, bound, filters).
	Store StoreConfig
	// BufSize is the dump socket's buffer (Config.BufSize); EventBuf the
	// event socket's kernel buffer (EventsConfig.RcvBuf).
	BufSize, EventBuf int
	// Batch is the number of records per emitted batch (256 if 0).
	Batch int
	// Logf reports what the source could not do (accounting off, a
	// failed dump); nil: silent.
	Logf func(format string, args ...any)
}

func (c SourceConfig) withDefaults() SourceConfig {
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.Batch = cmp.Or(c.Batch, 256)
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c
}

// SourceStats are a Source's counters.
type SourceStats struct {
	Polls      uint64        // complete dumps
	PollErrors uint64        // dumps that failed (the socket is reopened; missing entries are not taken as gone)
	Resyncs    uint64        // dumps run early because events were lost
	PollTime   time.Duration // duration of the last dump, updates included
	Records    uint64        // records emitted
	EmitErrors uint64        // batches the sink refused
	Dump       Stats         // dump socket
	Events     EventStats    // event socket
	Store      StoreStats    // connection store
	Rejected   [NumReasons]uint64

	// Untracked: the table stayed empty while TCP/UDP packets crossed
	// the namespace (UntrackedPackets since the start) or TCP connections
	// were established in it (UntrackedEstablished): conntrack has no
	// hook there.
	Untracked                              bool
	UntrackedPackets, UntrackedEstablished uint64
}

// UntrackedHelp says that conntrack tracks nothing in namespace ns and
// what to do about it.
func UntrackedHelp(ns Netns, packets, established uint64) string {
	return fmt.Sprintf("no connections tracked in %s: its conntrack table stays empty while %d TCP/UDP packets crossed it "+
		"and %d TCP connections are established: conntrack has no hook here (no rule uses it). Add one, e.g. "+
		"nft add table inet weir_ct; nft 'add chain inet weir_ct c { type filter hook prerouting priority 0 ; }'; "+
		"nft add rule inet weir_ct c ct state new", ns, packets, established)
}

// EventStats are an event socket's counters.
type EventStats struct {
	Messages  uint64 // events decoded and handed over
	Rejected  uint64 // events the decoder rejected (by reason: Events.Errors)
	Datagrams uint64 // datagrams received
	ENOBUFS   uint64 // receive buffer overruns: events were lost
	EINTR     uint64 // interrupted receives, retried
}
