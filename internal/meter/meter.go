// Package meter is weir's meter: frames are decoded into flow.Packets,
// aggregated in a flow table owned by one goroutine, and the evicted
// records are handed to sinks in batches. A Shard is that core; Meter runs
// one over a packet source to its end (replay), and every live capture
// worker (internal/source/afpacket) drives one of its own.
package meter

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/sink"
	"github.com/weir-dev/weir/internal/source"
)

// TableConfig is the flow table's configuration (flow.Config), for the
// commands that set up a meter, a live capture or the eBPF source.
type TableConfig = flow.Config

// Config sets up a Meter.
type Config struct {
	Table   flow.Config
	Decoder packet.Config
	// Tick is how often, in packet time, the table is asked to expire
	// flows. Default 1s.
	Tick time.Duration
	// Batch is the number of records handed to the sink at once. Default 1024.
	Batch int
}

// Stats are the meter's counters after Run.
type Stats struct {
	Frames  uint64        // frames read from the source
	Decoder packet.Stats  // decoder counters
	Table   flow.Stats    // flow table counters
	Records uint64        // records handed to the sink
	Elapsed time.Duration // wall time of Run
	// TunnelOverflow counts decapsulated packets whose tunnel endpoints
	// could not be kept (more than flow.MaxTunnels tunnels): their flows'
	// records carry none.
	TunnelOverflow uint64
}

// Meter is a Shard fed by one source until it ends (replay), expiring
// flows by packet time. It is not safe for concurrent use.
type Meter struct {
	shard *Shard
	stats Stats
}

// New builds a meter that writes records to out.
func New(cfg Config, out sink.Sink) (*Meter, error) {
	if cfg.Tick <= 0 {
		cfg.Tick = time.Second
	}
	s, err := NewShard(ShardConfig{Table: cfg.Table, Decoder: cfg.Decoder, Batch: cfg.Batch, PacketTick: cfg.Tick}, out)
	if err != nil {
		return nil, err
	}
	return &Meter{shard: s}, nil
}

// checkEvery is how many frames pass between looks at the stop flag.
const checkEvery = 4096

// Run reads src until it ends or ctx is cancelled, then flushes every flow
// (reason eof or shutdown) and returns the counters. A source error other
// than io.EOF still flushes every flow first, then is returned wrapped.
func (p *Meter) Run(ctx context.Context, src source.PacketSource) (Stats, error) {
	start := time.Now()
	var stop atomic.Bool // set by ctx; read every checkEvery frames so the loop never blocks on a channel
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			stop.Store(true)
		case <-done:
		}
	}()

	var (
		f        source.Frame
		lastName string
		srcErr   error
		reason   = flow.ReasonEOF
		sh       = p.shard
		ifaces   = sh.Ifaces()
		lastIdx  = ifaces.Index("")
	)
	for n := 0; ; n++ {
		if n%checkEvery == 0 && stop.Load() {
			reason = flow.ReasonShutdown
			break
		}
		if err := src.Next(&f); err != nil {
			switch {
			case errors.Is(err, io.EOF):
			case errors.Is(err, source.ErrStopped):
				reason = flow.ReasonShutdown
			default:
				srcErr = err
			}
			break
		}
		p.stats.Frames++
		if f.Iface != lastName { // interface names are interned by sources: usually one compare
			lastName, lastIdx = f.Iface, ifaces.Index(f.Iface)
		}
		sh.Take(&f, lastIdx)
	}
	// Flows already idle or ended by the last packet's time leave with
	// that reason, not with eof/shutdown.
	sh.Finish(sh.LastTime(), reason)
	st := sh.Stats()
	p.stats.Decoder = st.Decoder
	p.stats.Table = st.Table
	p.stats.Records = st.Records
	p.stats.TunnelOverflow = st.TunnelOverflow
	p.stats.Elapsed = time.Since(start)
	errs := sh.Errs()
	if srcErr != nil {
		errs = append([]error{&inputError{srcErr}}, errs...)
	}
	return p.stats, errors.Join(errs...)
}

// TableMemory returns the bytes preallocated for the flow table's slots.
func (p *Meter) TableMemory() int { return p.shard.TableMemory() }

// TableCap returns the number of flows the table holds at most.
func (p *Meter) TableCap() int { return p.shard.TableCap() }
