package meter

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/sink"
	"github.com/weir-dev/weir/internal/source"
)

// ReplayConfig is a replay: the meter over one packet source.
type ReplayConfig struct {
	Meter  Config
	Source source.PacketSource
	// Logf says what the replay warns about (files out of time order);
	// nil: silent.
	Logf func(format string, args ...any)
}

// Replay is a source.Producer of a packet source's flows: capture files,
// synthetic traffic. If the source has the methods, Stop ends a blocked
// read when ctx is done (a pipe), WriteStats says what was read, and
// Warning what went wrong without failing.
type Replay struct {
	cfg ReplayConfig
	p   *Meter
	st  Stats
}

// NewReplay builds the meter (its table preallocated).
func NewReplay(cfg ReplayConfig) (*Replay, error) {
	if cfg.Source == nil {
		return nil, errors.New("meter: no source")
	}
	p, err := New(cfg.Meter, nil)
	if err != nil {
		return nil, err
	}
	return &Replay{cfg: cfg, p: p}, nil
}

// Run meters the source into out until it ends or ctx is done, then
// flushes every flow. A source's error is returned after the flush.
func (r *Replay) Run(ctx context.Context, out sink.Sink) error {
	r.p.shard.SetSink(out)
	if s, ok := r.cfg.Source.(interface{ Stop() }); ok {
		// A read blocked on a pipe (tcpdump -w - | weir ...) must not
		// keep SIGTERM from flushing the flows.
		stop := context.AfterFunc(ctx, s.Stop)
		defer stop()
	}
	st, err := r.p.Run(ctx, r.cfg.Source)
	r.st = st
	if w, ok := r.cfg.Source.(interface{ Warning() string }); ok && r.cfg.Logf != nil {
		if msg := w.Warning(); msg != "" {
			r.cfg.Logf("warning: %s", msg)
		}
	}
	var in *inputError
	if errors.As(err, &in) {
		err = fmt.Errorf("%w; the input was cut short there: the %d records before the cut were reported", err, st.Records)
	}
	return err
}

// Stats returns the counters after Run.
func (r *Replay) Stats() Stats { return r.st }

// Collector returns nil: a replay serves no metrics.
func (r *Replay) Collector() metrics.Collector { return nil }

// WriteStats writes the --stats lines: what the source read, the meter's
// counters and its memory.
func (r *Replay) WriteStats(w io.Writer) {
	if s, ok := r.cfg.Source.(interface{ WriteStats(io.Writer) }); ok {
		s.WriteStats(w)
	}
	writeStats(w, &r.st, r.p)
}

// Close releases the source if it holds anything.
func (r *Replay) Close() error {
	if c, ok := r.cfg.Source.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// inputError is the source's error in Run's.
type inputError struct{ err error }

func (e *inputError) Error() string { return "reading input: " + e.err.Error() }
func (e *inputError) Unwrap() error { return e.err }
