// Package agent is weir's one lifecycle of a record producer (a capture,
// a replay, the collector): it opens the sinks, puts a queue in front of
// each, serves the metrics, runs the producer until its input ends, a
// signal or the duration, closes the sinks within a bound, prints the
// counters and says how it went. The commands only turn flags into a
// Config.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/sink"
	"github.com/weir-dev/weir/internal/source"
)

// Producer is what the agent runs (source.Producer).
type Producer = source.Producer

// All runs several producers as one (source.All).
var All = source.All

// Of turns a source's constructor result into the agent's Producer (a
// nil *T is no Producer).
func Of[P Producer](p P, err error) (Producer, error) {
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Wrap wraps a sink (tests: Sinks.WrapStore).
type Wrap = func(sink.Sink) sink.Sink

// Queue depths, in batches of queueBatch records.
const (
	// DefaultQueueDepth is a live producer's queue per sink: a slow sink
	// drops (and counts) beyond it.
	DefaultQueueDepth = 256
	// ReplayQueueDepth is a replay's: its queues wait, so a few batches
	// keep every sink busy.
	ReplayQueueDepth = 16
	queueBatch       = 1024
)

// Config is one run.
type Config struct {
	// Open builds the producer: it opens its files, sockets or rings.
	// It is called after the HTTP listener is open and before any sink
	// is, so that a producer that cannot start leaves nothing behind (no
	// data directory, no empty table).
	Open func() (Producer, error)
	// Sinks are where the records go.
	Sinks Sinks
	// Live says the producer does not wait: each sink's queue drops (and
	// counts) what it cannot take. Otherwise (file replay) the queues
	// wait for a healthy sink, but not for one whose last write failed.
	Live bool
	// QueueDepth is the batches queued per sink (0: DefaultQueueDepth
	// live, ReplayQueueDepth otherwise).
	QueueDepth int
	// Duration stops the run after this long, as SIGTERM does (0: never).
	Duration time.Duration
	// HTTP is the metrics listener.
	HTTP HTTP
	// API serves queries over the store and the live flows while the
	// agent runs (with HTTP's token and TLS).
	API API
	// Stats receives the counters at exit (--stats); nil: none.
	Stats io.Writer
	// Log receives messages (nil: os.Stderr).
	Log io.Writer
	// CPUProfile, when set, is the file a Go CPU profile of the run is
	// written to (go tool pprof).
	CPUProfile string
	// Ready is called once everything is open, just before the producer
	// runs: where the command gives up the privileges it needed to open
	// them.
	Ready func()
}

// ErrUsage marks a mistake in the configuration (exit status 2) among
// run failures (1).
var ErrUsage = errors.New("usage")

type usageError struct{ msg string }

func (e usageError) Error() string        { return e.msg }
func (e usageError) Is(target error) bool { return target == ErrUsage }

// Usagef returns a configuration mistake: errors.Is(err, ErrUsage).
func Usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

var usagef = Usagef

// Exit statuses of ExitCode.
const (
	ExitOK      = 0 // success
	ExitFailure = 1 // the run failed (damaged input, a sink error, no permission)
	ExitUsage   = 2 // the configuration is wrong
)

// ExitCode maps Run's error to an exit status.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrUsage):
		return ExitUsage
	}
	return ExitFailure
}

// Run runs cfg's producer into its sinks until the input ends, ctx is
// done, SIGINT or SIGTERM arrives, or the duration passes. After a signal
// the sinks get StopGrace (a second signal: none) to take what is queued;
// what they never took is counted as lost. Every sink is closed before
// Run returns; the error joins the producer's and the sinks'.
func Run(ctx context.Context, cfg Config) error {
	if cfg.CPUProfile != "" {
		stop, err := startCPUProfile(cfg.CPUProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if cfg.Log == nil {
		cfg.Log = os.Stderr
	}
	if cfg.Sinks.Log == nil {
		cfg.Sinks.Log = cfg.Log
	}
	if err := cfg.Sinks.check(); err != nil {
		return err
	}
	// Signals are ours from the start: one while the producer opens (a
	// pipe, a large synthetic run) ends its run at once, still flushed.
	life := newLifecycle(ctx, cfg.Duration)
	defer life.Close()
	ln, err := cfg.HTTP.listen()
	if err != nil {
		return err
	}
	apiLn, err := cfg.listenAPI()
	if err != nil {
		closeListener(ln)
		return err
	}
	defer apiLn.close()
	p, err := cfg.Open()
	if err != nil {
		closeListener(ln)
		return err
	}
	defer p.Close()
	sinks, err := cfg.Sinks.open()
	if err != nil {
		closeListener(ln)
		return err
	}
	if apiLn != nil {
		if err := apiLn.serve(sinks, p, cfg.API.Version); err != nil {
			closeListener(ln)
			sinks.close()
			return err
		}
	}
	out, queues := cfg.fanOut(sinks, life.stop)
	if ln != nil {
		srv, err := serveMetrics(ln, p, sinks, queues, cfg.Sinks.Enrich, apiLn.collector())
		if err != nil {
			closeListener(ln)
			out.Close()
			return err
		}
		defer srv.Close()
	}
	if cfg.Ready != nil {
		cfg.Ready()
	}
	runErr := p.Run(life.ctx, out)
	apiLn.close() // no query of a store being closed
	if runErr != nil && sinks.fmt != nil {
		sinks.fmt.failed.Store(true)
	}
	closeErr := out.Close()
	if cfg.Stats != nil {
		p.WriteStats(cfg.Stats)
		writeQueueStats(cfg.Stats, queues)
		for _, o := range sinks.outs {
			if o.WriteStats != nil {
				o.WriteStats(cfg.Stats)
			}
		}
	}
	return errors.Join(runErr, closeErr)
}

func closeListener(l *listener) {
	if l != nil {
		l.ln.Close()
	}
}

// fanOut puts a bounded queue, and a goroutine, in front of each sink, so
// that a slow or failing sink holds up none of the others, and the node
// name and enrichment in front of them all.
func (cfg *Config) fanOut(o *opened, stop <-chan struct{}) (sink.Sink, []*sink.Queue) {
	depth := cfg.QueueDepth
	if depth <= 0 {
		depth = ReplayQueueDepth
		if cfg.Live {
			depth = DefaultQueueDepth
		}
	}
	opts := sink.QueueOptions{Block: !cfg.Live, Stop: stop}
	queues := make([]*sink.Queue, len(o.outs))
	all := make(sink.Multi, len(o.outs))
	for i, out := range o.outs {
		queues[i] = sink.NewQueueOpts(out.Name, out.Sink, depth, queueBatch, opts)
		if out.OnQueue != nil {
			out.OnQueue(queues[i])
		}
		all[i] = queues[i]
	}
	var s sink.Sink = all
	if e := cfg.Sinks.Enrich; e != nil {
		s = e.wrap(s)
	}
	if cfg.Sinks.Node != "" {
		s = nodeSink{Sink: s, node: cfg.Sinks.Node}
	}
	return s, queues
}

// serveMetrics registers every collector and serves them, with the
// producer's routes.
func serveMetrics(ln *listener, p source.Producer, o *opened, queues []*sink.Queue, e *Enrich, apiCol metrics.Collector) (*metrics.Server, error) {
	reg := metrics.NewRegistry()
	cols := []metrics.Collector{metrics.NewGoCollector(), metrics.NewProcessCollector(), p.Collector(), sink.QueueCollector(queues...), apiCol}
	for _, out := range o.outs {
		cols = append(cols, out.Collector)
	}
	if e != nil {
		cols = append(cols, e.Watched.E.Collector())
	}
	for _, c := range cols {
		if c == nil {
			continue
		}
		if err := reg.Register(c); err != nil {
			return nil, usagef("metrics: %v", err)
		}
	}
	var routes []metrics.Route
	if r, ok := p.(source.Router); ok {
		routes = r.Routes(o.pending()...)
	}
	return ln.serve(reg, routes...)
}
