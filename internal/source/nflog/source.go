package nflog

import (
	"cmp"
	"time"
)

// SourceConfig configures a Source.
type SourceConfig struct {
	// Netns, if set, runs fn inside the network namespace whose firewall
	// logs (NFLOG groups are per namespace).
	Netns func(fn func() error) error
	// Where names the namespace in messages ("" for this one).
	Where string
	// Groups are the NFLOG groups to read (nft "log group N"), one
	// socket each.
	Groups []uint16
	// Socket is the template of each group's socket (Netns and Group are
	// set from the fields above). Its FlushTimeout defaults to 100 ms
	// here, not the kernel's 1 s, so deny flows are timely.
	Socket Config
	// MaxFlows bounds each group's deny flows (DefaultMaxFlows if 0).
	MaxFlows int
	// IdleTimeout and ActiveTimeout export a deny flow after so long
	// without packets, and every ActiveTimeout while packets keep coming
	// (defaults 15 s and 60 s, as for flows; a negative ActiveTimeout
	// turns it off).
	IdleTimeout, ActiveTimeout time.Duration
	// Batch is the number of records per emitted batch (256 if 0).
	Batch int
	// Logf reports trouble (lost messages); nil: silent.
	Logf func(format string, args ...any)
}

func (c SourceConfig) withDefaults() SourceConfig {
	c.IdleTimeout = cmp.Or(c.IdleTimeout, time.Duration(DefaultIdleTimeout))
	c.ActiveTimeout = cmp.Or(c.ActiveTimeout, 60*time.Second)
	c.Socket.FlushTimeout = cmp.Or(c.Socket.FlushTimeout, 100*time.Millisecond)
	c.Socket.ReadTimeout = cmp.Or(c.Socket.ReadTimeout, 200*time.Millisecond)
	c.Batch = cmp.Or(c.Batch, 256)
	c.Where = cmp.Or(c.Where, "this namespace")
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c
}

// GroupStats are one group's counters.
type GroupStats struct {
	Group      uint16
	Socket     Stats
	Aggregator AggregatorStats
	Flows      int    // deny flows held
	Exported   uint64 // records emitted
	Evicted    uint64 // flows exported early because the table was full
	EmitErrors uint64 // batches the sink refused
}
