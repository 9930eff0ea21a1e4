package source

import (
	"context"
	"errors"
	"io"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/rusage"
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

// All runs several producers as one (conntrack with NFLOG groups): Run
// runs them at once into the same sink, and when one fails stops the
// others (they flush) and returns its error. WriteStats ends with the
// process's memory.
func All(ps ...Producer) Producer { return all(ps) }

type all []Producer

func (a all) Run(ctx context.Context, out sink.Sink) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(a))
	for _, p := range a {
		go func() { errs <- p.Run(ctx, out) }()
	}
	var first error
	for range a {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel() // one failed: stop the others, flushing them
		}
	}
	return first
}

func (a all) Collector() metrics.Collector {
	var cs multiCollector
	for _, p := range a {
		if c := p.Collector(); c != nil {
			cs = append(cs, c)
		}
	}
	return &cs
}

func (a all) WriteStats(w io.Writer) {
	for _, p := range a {
		p.WriteStats(w)
	}
	rusage.WriteMemory(w, format.Bytes)
}

func (a all) Close() error {
	var errs []error
	for _, p := range a {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// multiCollector is several collectors as one.
type multiCollector []metrics.Collector

func (m *multiCollector) Describe() []*metrics.Desc {
	var d []*metrics.Desc
	for _, c := range *m {
		d = append(d, c.Describe()...)
	}
	return d
}

func (m *multiCollector) Collect(w *metrics.Writer) {
	for _, c := range *m {
		c.Collect(w)
	}
}
