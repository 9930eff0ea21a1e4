package source

import (
	"context"
	"io"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/sink"
)

// Producer makes flow records: a replay of packets through the meter, a
// live capture, the eBPF maps, conntrack, NFLOG, the IPFIX collector.
// internal/agent runs every one of them the same way.
type Producer interface {
	// Run writes records to out until its input ends or ctx is done,
	// then flushes what it holds (reason shutdown) and returns. out is
	// safe for concurrent use. Run is called at most once.
	Run(ctx context.Context, out sink.Sink) error
	// Collector is the producer's metrics (nil: none).
	Collector() metrics.Collector
	// WriteStats writes the producer's --stats lines, after Run.
	WriteStats(w io.Writer)
	// Close releases what the constructor opened (safe after Run).
	Close() error
}

// Router is a Producer that serves HTTP routes of its own beside
// /metrics (the live capture's /flows/live). pending are the records
// already out of the producer but not yet durable anywhere (the store's
// write buffer).
type Router interface {
	Routes(pending ...func(func(r *flow.Record))) []metrics.Route
}
