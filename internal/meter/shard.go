package meter

import (
	"errors"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/sink"
	"github.com/weir-dev/weir/internal/source"
)

// ShardConfig sets up a Shard.
type ShardConfig struct {
	Table   flow.Config // Table.Ifaces is set by the shard
	Decoder packet.Config
	// Batch is the number of records handed to the sink at once. Default 1024.
	Batch int
	// PacketTick, if positive, makes Take expire flows by packet time,
	// every PacketTick of it (replay). Zero: the owner calls Expire by its
	// own clock (live capture, by the wall clock).
	PacketTick time.Duration
}

// ShardStats are a shard's counters.
type ShardStats struct {
	Decoder packet.Stats // decoder counters
	Table   flow.Stats   // flow table counters
	Flows   int          // flows in the table now
	Records uint64       // records handed to the sink
	// TunnelOverflow counts decapsulated packets whose tunnel endpoints
	// could not be kept (more than flow.MaxTunnels tunnels): their flows'
	// records carry none.
	TunnelOverflow uint64
}

// Shard is the meter's core, owned by one goroutine: frames are decoded
// straight into a batch of packets, the batch goes to the flow table at
// once (UpdateBatch), and evicted records go to the sink in batches. The
// replay Meter and every live capture worker drive one. It is not safe for
// concurrent use.
type Shard struct {
	dec    *packet.Decoder
	table  *flow.Table
	ifaces flow.Ifaces
	out    sink.Sink
	recs   []flow.Record             // evicted records waiting for the sink
	pkts   *[packetBatch]flow.Packet // decoded packets waiting for one UpdateBatch: pkts[:n]
	n      int
	decap  bool
	tick   int64 // PacketTick in ns; 0: no packet clock
	next   int64 // packet time of the next expiry (packet clock)
	last   int64 // latest packet time taken (packet clock)
	nrecs  uint64
	errs   []error
}

// packetBatch is how many decoded packets go to the table at once: enough
// for UpdateBatch's prefetch distance to pay off, few enough to stay in L1.
const packetBatch = 64

// Take indexes the batch with a mask: packetBatch must be a power of two
// (this fails to compile otherwise).
var _ [0]struct{} = [packetBatch & (packetBatch - 1)]struct{}{}

// maxSinkErrs bounds the sink errors a shard keeps (the sink counts all).
const maxSinkErrs = 8

// NewShard builds a shard that writes records to out.
func NewShard(cfg ShardConfig, out sink.Sink) (*Shard, error) {
	if cfg.Batch <= 0 {
		cfg.Batch = 1024
	}
	s := &Shard{out: out, recs: make([]flow.Record, 0, cfg.Batch),
		pkts:  new([packetBatch]flow.Packet),
		decap: cfg.Decoder.Decap != 0,
		tick:  max(int64(cfg.PacketTick), 0),
	}
	cfg.Table.Ifaces = &s.ifaces
	t, err := flow.NewTable(cfg.Table, s.emit)
	if err != nil {
		return nil, err
	}
	s.table = t
	s.dec = packet.NewDecoder(cfg.Decoder)
	return s, nil
}

// SetSink sets where the shard's records go, for owners that build the
// shard before they know the sink (a Producer gets it in Run). Call it
// before the first Take.
func (s *Shard) SetSink(out sink.Sink) { s.out = out }

// Ifaces returns the interface names the shard's records refer to: owners
// intern a source's interface with Ifaces().Index and pass the index to Take.
func (s *Shard) Ifaces() *flow.Ifaces { return &s.ifaces }

// emit copies one evicted record into the batch; the table reuses r.
func (s *Shard) emit(r *flow.Record) {
	s.recs = append(s.recs, *r)
	if len(s.recs) == cap(s.recs) {
		s.Flush()
	}
}

// Flush hands the records evicted so far to the sink. A sink error is kept
// (the first few) for Err.
func (s *Shard) Flush() {
	if len(s.recs) == 0 {
		return
	}
	s.nrecs += uint64(len(s.recs))
	if err := s.out.Write(s.recs); err != nil && len(s.errs) < maxSinkErrs {
		s.errs = append(s.errs, err)
	}
	s.recs = s.recs[:0]
}

// Take decodes frame f, seen on interface iface (an index from Ifaces),
// straight into the next packet of the batch (no copy) and hands the batch
// to the table when it is full; it reports whether it did (owners that
// poll a clock do so then). A frame that does not decode is dropped (the
// decoder counts why). f.Data is not kept.
func (s *Shard) Take(f *source.Frame, iface uint16) (applied bool) {
	p := &s.pkts[s.n&(packetBatch-1)] // n < packetBatch always; the mask spares a bounds check
	p.Time, p.Iface = f.Time, iface
	if !s.dec.Decode(f.Link, f.Data, f.WireLen, p) {
		return false
	}
	if f.HasVLAN {
		// The capture stripped the outer tag (AF_PACKET's auxiliary
		// data); a tag the decoder found in the frame is an inner one.
		p.VLAN = f.VLAN & 0x0fff
	}
	if s.decap {
		if o := s.dec.Outer(); o != nil { // keyed by the packet inside a tunnel: keep the endpoints
			p.Iface = s.ifaces.IndexTunnel(iface, &p.Key, &o.SrcAddr, &o.DstAddr, o.IPVersion)
		}
	}
	s.n++
	if s.tick != 0 { // packet clock (replay)
		if p.Time > s.last {
			s.last = p.Time
		}
		if p.Time >= s.next {
			s.tickAt(p)
		}
	}
	if s.n == packetBatch {
		s.Apply()
		return true
	}
	return false
}

// tickAt expires the table by the time of p, the packet just taken, which
// reached the packet clock's next tick. Expire must see time move before p
// is counted: the batch goes to the table without p, then p becomes the
// first packet of the next batch.
func (s *Shard) tickAt(p *flow.Packet) {
	now := p.Time
	first := *p
	s.n--
	s.Apply()
	s.table.Expire(now)
	s.next = now + s.tick
	s.pkts[0] = first
	s.n = 1
}

// Apply hands the packets taken so far to the table: UpdateBatch
// prefetches the slots of packets ahead, so a big table's misses overlap.
func (s *Shard) Apply() {
	if s.n != 0 {
		s.table.UpdateBatch(s.pkts[:s.n])
		s.n = 0
	}
}

// Expire applies the packets taken so far and evicts the flows idle or
// active too long at time now (Unix ns).
func (s *Shard) Expire(now int64) {
	s.Apply()
	s.table.Expire(now)
}

// LastTime returns the latest packet time taken (Unix ns) by a shard with
// a packet clock (PacketTick), 0 before any or without one.
func (s *Shard) LastTime() int64 { return s.last }

// Finish applies the packets taken so far, expires by time now (Unix ns;
// 0: no expiry, so flows idle or ended by then leave with that reason),
// evicts every remaining flow with reason and hands all records to the
// sink.
func (s *Shard) Finish(now int64, reason flow.EndReason) {
	s.Apply()
	if now != 0 {
		s.table.Expire(now)
	}
	s.table.Flush(reason)
	s.Flush()
}

// Peek calls fn with each live flow (pending packets not applied yet are
// not in them); fn must not keep r.
func (s *Shard) Peek(fn func(r *flow.Record)) { s.table.Peek(fn) }

// Stats returns the shard's counters.
func (s *Shard) Stats() ShardStats {
	return ShardStats{Decoder: *s.dec.Stats(), Table: s.table.Stats(), Flows: s.table.Len(),
		Records: s.nrecs, TunnelOverflow: s.ifaces.TunnelOverflow()}
}

// Err returns the sink errors met (the first few), nil if none.
func (s *Shard) Err() error { return errors.Join(s.errs...) }

// Errs returns the sink errors met (the first few).
func (s *Shard) Errs() []error { return s.errs }

// TableMemory returns the bytes preallocated for the flow table's slots.
func (s *Shard) TableMemory() int { return s.table.MemoryBytes() }

// TableCap returns the number of flows the table holds at most.
func (s *Shard) TableCap() int { return s.table.Cap() }
