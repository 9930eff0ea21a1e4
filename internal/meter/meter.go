// Package meter runs weir's meter for one packet source: frames are
// decoded into flow.Packets, aggregated in one flow table owned by the
// calling goroutine, and the evicted records are handed to sinks in batches.
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

// Meter is a decoder and a flow table fed by one source.
// It is not safe for concurrent use.
type Meter struct {
	cfg    Config
	dec    *packet.Decoder
	table  *flow.Table
	ifaces flow.Ifaces
	out    sink.Sink
	batch  []flow.Record
	pkts   []flow.Packet // decoded packets waiting for one UpdateBatch
	stats  Stats
	errs   []error
}

// New builds a meter that writes records to out.
func New(cfg Config, out sink.Sink) (*Meter, error) {
	if cfg.Tick <= 0 {
		cfg.Tick = time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 1024
	}
	p := &Meter{cfg: cfg, out: out, batch: make([]flow.Record, 0, cfg.Batch),
		pkts: make([]flow.Packet, 0, packetBatch)}
	cfg.Table.Ifaces = &p.ifaces
	t, err := flow.NewTable(cfg.Table, p.emit)
	if err != nil {
		return nil, err
	}
	p.table = t
	p.dec = packet.NewDecoder(cfg.Decoder)
	return p, nil
}

// emit copies one evicted record into the batch; the table reuses r.
func (p *Meter) emit(r *flow.Record) {
	p.batch = append(p.batch, *r)
	if len(p.batch) == cap(p.batch) {
		p.flush()
	}
}

func (p *Meter) flush() {
	if len(p.batch) == 0 {
		return
	}
	p.stats.Records += uint64(len(p.batch))
	if err := p.out.Write(p.batch); err != nil && len(p.errs) < 8 {
		p.errs = append(p.errs, err)
	}
	p.batch = p.batch[:0]
}

// packetBatch is how many decoded packets go to the table at once: enough
// for UpdateBatch's prefetch distance to pay off, few enough to stay in L1.
const packetBatch = 64

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
		lastIdx  uint16
		nextTick int64
		lastTime int64
		srcErr   error
		reason   = flow.ReasonEOF
		tick     = int64(p.cfg.Tick)
		pkts     = p.pkts[:0]
		decap    = p.cfg.Decoder.Decap != 0
	)
	// apply hands the decoded batch to the table: UpdateBatch prefetches
	// the slots of packets ahead, so a big table's cache misses overlap.
	apply := func() {
		p.table.UpdateBatch(pkts)
		pkts = pkts[:0]
	}
	lastIdx = p.ifaces.Index("")
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
			lastName, lastIdx = f.Iface, p.ifaces.Index(f.Iface)
		}
		pkts = pkts[:len(pkts)+1] // decode straight into the batch: no copy
		pkt := &pkts[len(pkts)-1]
		pkt.Time, pkt.Iface = f.Time, lastIdx
		if !p.dec.Decode(f.Link, f.Data, f.WireLen, pkt) {
			pkts = pkts[:len(pkts)-1]
			continue
		}
		if decap {
			if o := p.dec.Outer(); o != nil { // keyed by the packet inside a tunnel: keep the endpoints
				pkt.Iface = p.ifaces.IndexTunnel(lastIdx, &pkt.Key, &o.SrcAddr, &o.DstAddr, o.IPVersion)
			}
		}
		if pkt.Time > lastTime {
			lastTime = pkt.Time
		}
		if pkt.Time >= nextTick {
			// Expire sees time move before this packet is counted: apply
			// the batch without it, expire, then keep it as the first of
			// the next batch.
			last := *pkt
			pkts = pkts[:len(pkts)-1]
			apply()
			p.table.Expire(pkt.Time)
			nextTick = pkt.Time + tick
			pkts = append(pkts, last)
		}
		if len(pkts) == cap(pkts) {
			apply()
		}
	}
	apply()
	if lastTime != 0 {
		// Flows already idle or ended by the last packet's time leave with
		// that reason, not with eof/shutdown.
		p.table.Expire(lastTime)
	}
	p.table.Flush(reason)
	p.flush()
	p.stats.Decoder = *p.dec.Stats()
	p.stats.Table = p.table.Stats()
	p.stats.TunnelOverflow = p.ifaces.TunnelOverflow()
	p.stats.Elapsed = time.Since(start)
	if srcErr != nil {
		p.errs = append([]error{&inputError{srcErr}}, p.errs...)
	}
	return p.stats, errors.Join(p.errs...)
}

// TableMemory returns the bytes preallocated for the flow table's slots.
func (p *Meter) TableMemory() int { return p.table.MemoryBytes() }

// TableCap returns the number of flows the table holds at most.
func (p *Meter) TableCap() int { return p.table.Cap() }
