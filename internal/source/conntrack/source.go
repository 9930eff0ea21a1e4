package conntrack

import (
	"cmp"
	"time"
)

// DefaultPollInterval is how often a Source dumps the table by default,
// as Antrea's flow exporter polls.
const DefaultPollInterval = 5 * time.Second

// SourceConfig configures a Source. The zero value reads the caller's
// namespace, both families, with events, every DefaultPollInterval.
type SourceConfig struct {
	// Netns, if set, runs fn inside the network namespace whose table
	// to read (netdev.InNetns; tests use testbed.Host.Do).
	Netns func(fn func() error) error
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
