//go:build linux

package afpacket

import (
	"errors"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/sink"
	"github.com/weir-dev/weir/internal/source"
)

// packetBatch is how many decoded packets go to the table at once (see
// pipeline): UpdateBatch's prefetching overlaps the slots' cache misses.
const packetBatch = 64

// ctlKind says what a control message asks of a worker.
type ctlKind int

const (
	ctlAdd    ctlKind = iota // take src into the set
	ctlRemove                // close src and drop it
	ctlPeek                  // send the top n live flows on reply
)

type ctlMsg struct {
	kind  ctlKind
	src   *Source
	n     int
	reply chan []flow.Record
}

// ring is a worker's view of one of its sockets.
type ring struct {
	src   *Source
	iface uint16 // index in the worker's flow.Ifaces
	name  string
	pkts  uint64
	bytes uint64
	dying int64 // Unix ns after which the ring is dropped (retire); 0 while alive
}

// worker owns a set of rings (its share of every interface), a decoder and
// a table shard. Only its own goroutine touches them; others talk to it
// through ctl (and Set.Wake) and read its published snapshot.
type worker struct {
	id     int
	cfg    *Config
	set    *Set
	dec    *packet.Decoder
	table  *flow.Table
	ifaces flow.Ifaces
	out    sink.Sink // set by Capture.Run
	recs   []flow.Record
	pkts   []flow.Packet
	rings  map[*Source]*ring
	ctl    chan ctlMsg
	dead   chan<- *Source // sockets whose interface failed, for the manager
	nrecs  uint64
	errs   []error
	// nextDeath is the earliest dying deadline of a retired ring, 0 if none.
	nextDeath int64

	mu   sync.Mutex // guards snap
	snap workerSnap
}

// workerSnap is what a worker publishes every tick.
type workerSnap struct {
	dec     packet.Stats
	table   flow.Stats
	flows   int
	records uint64
	ifaces  map[string][2]uint64 // name → packets, bytes (cumulative, also for closed rings)
}

func newWorker(id int, cfg *Config, dead chan<- *Source) (*worker, error) {
	set, err := NewSet()
	if err != nil {
		return nil, err
	}
	w := &worker{id: id, cfg: cfg, set: set, dead: dead,
		dec:   packet.NewDecoder(cfg.Decoder),
		recs:  make([]flow.Record, 0, cfg.Batch),
		pkts:  make([]flow.Packet, 0, packetBatch),
		rings: map[*Source]*ring{},
		ctl:   make(chan ctlMsg, 64),
	}
	w.snap.ifaces = map[string][2]uint64{}
	tc := cfg.Table
	tc.Ifaces = &w.ifaces
	if w.table, err = flow.NewTable(tc, w.emit); err != nil {
		set.Close()
		return nil, err
	}
	return w, nil
}

// send queues a control message and wakes the worker.
func (w *worker) send(m ctlMsg) {
	w.ctl <- m
	w.set.Wake()
}

func (w *worker) emit(r *flow.Record) {
	w.recs = append(w.recs, *r)
	if len(w.recs) == cap(w.recs) {
		w.flush()
	}
}

func (w *worker) flush() {
	if len(w.recs) == 0 {
		return
	}
	w.nrecs += uint64(len(w.recs))
	if err := w.out.Write(w.recs); err != nil && len(w.errs) < 8 {
		w.errs = append(w.errs, err)
	}
	w.recs = w.recs[:0]
}

// expireLag is how far the expiry clock trails the wall clock: a packet in
// a partly filled ring block reaches user space only when the kernel's
// retire timer (a jiffies timer, late under load) hands the block over, so
// expiring by the wall clock could end a flow whose last packets (a TCP
// close's final ACK) are still in the ring and split it into two records.
func expireLag(retire time.Duration) time.Duration {
	if retire <= 0 {
		retire = DefaultTimeout
	}
	return 4 * retire
}

// run reads until stop is closed, then flushes every flow with reason
// shutdown and closes its rings.
func (w *worker) run(stop <-chan struct{}) error {
	var (
		f        source.Frame
		last     *ring
		lastSrc  *Source
		tick     = int64(w.cfg.Tick)
		nextTick = time.Now().UnixNano() + tick
		lag      = int64(expireLag(w.cfg.Ring.Timeout))
		pkts     = w.pkts[:0]
		fatal    error
	)
	apply := func() {
		w.table.UpdateBatch(pkts)
		pkts = pkts[:0]
	}
	for fatal == nil {
		src, err := w.set.Next(&f, w.cfg.Tick/4)
		switch {
		case err == nil:
			if src != lastSrc { // frames come a block at a time: usually the same ring
				lastSrc, last = src, w.rings[src]
			}
			if pkts = w.take(last, &f, pkts); len(pkts) < cap(pkts) {
				continue
			}
		case errors.Is(err, ErrWoken):
			apply()
			if w.control(stop) {
				w.drain()
				w.finish()
				return errors.Join(w.errs...)
			}
		case errors.Is(err, os.ErrDeadlineExceeded):
		default:
			var re *RingError
			if errors.As(err, &re) {
				w.retire(re.Source)
				select {
				case w.dead <- re.Source:
				default: // the manager also hears of it from netlink
				}
			} else {
				fatal = err
			}
		}
		apply()
		now := time.Now().UnixNano()
		if w.nextDeath != 0 && now >= w.nextDeath {
			lastSrc = nil // the cached ring may be dropped
			w.reap(now)
		}
		if now >= nextTick {
			w.table.Expire(now - lag)
			w.flush() // records leave at least once per tick, however quiet the interface
			w.publish()
			nextTick = now + tick
		}
	}
	w.finish()
	return errors.Join(append([]error{fatal}, w.errs...)...)
}

// take counts frame f of ring r and decodes it straight into the next
// packet of the batch (no copy); a frame that does not decode is dropped
// from the batch (the decoder counts why).
func (w *worker) take(r *ring, f *source.Frame, pkts []flow.Packet) []flow.Packet {
	r.pkts++
	r.bytes += uint64(f.WireLen)
	pkts = pkts[:len(pkts)+1]
	p := &pkts[len(pkts)-1]
	p.Time, p.Iface = f.Time, r.iface
	if !w.dec.Decode(f.Link, f.Data, f.WireLen, p) {
		return pkts[:len(pkts)-1]
	}
	if tci, ok := r.src.LastVLAN(); ok {
		// The kernel stripped the outer tag into the ring's auxiliary
		// data; a tag the decoder found in the frame is an inner one.
		p.VLAN = tci & 0x0fff
	}
	if o := w.dec.Outer(); o != nil { // keyed by the packet inside a tunnel (--decap): keep the endpoints
		p.Iface = w.ifaces.IndexTunnel(r.iface, &p.Key, &o.SrcAddr, &o.DstAddr, o.IPVersion)
	}
	return pkts
}

// control handles queued control messages; it reports whether to stop.
func (w *worker) control(stop <-chan struct{}) bool {
	for {
		select {
		case <-stop:
			return true
		case m := <-w.ctl:
			switch m.kind {
			case ctlAdd:
				r := &ring{src: m.src, name: m.src.Iface()}
				r.iface = w.ifaces.Index(r.name)
				w.rings[m.src] = r
				w.set.Add(m.src)
			case ctlRemove:
				w.retire(m.src)
			case ctlPeek:
				m.reply <- w.top(m.n)
			}
		default:
			return false
		}
	}
}

// Bounds of the drain at stop.
const (
	drainFrames = 1 << 22
	drainTime   = 2 * time.Second
)

// drain reads what is already in the rings when capture stops, waiting a
// little longer than one block retire timeout for partly filled blocks, so
// that the last packets before SIGTERM are counted. Bounded in frames and
// time: a flood cannot hold shutdown up.
func (w *worker) drain() {
	var f source.Frame
	pkts := w.pkts[:0]
	wait := w.cfg.Ring.Timeout
	if wait <= 0 {
		wait = DefaultTimeout
	}
	deadline := time.Now().Add(drainTime)
	for n := 0; n < drainFrames && time.Now().Before(deadline); n++ {
		src, err := w.set.Next(&f, 2*wait)
		if errors.Is(err, ErrWoken) {
			continue
		}
		if err != nil {
			break
		}
		if pkts = w.take(w.rings[src], &f, pkts); len(pkts) == cap(pkts) {
			w.table.UpdateBatch(pkts)
			pkts = pkts[:0]
		}
	}
	w.table.UpdateBatch(pkts)
}

// retire schedules src to be dropped after a grace period in which its
// ring is still read: frames the kernel put there before the interface
// went away (some in a block it retires only after the block timeout)
// are counted, not lost.
func (w *worker) retire(src *Source) {
	r := w.rings[src]
	if r == nil || r.dying != 0 {
		return
	}
	timeout := w.cfg.Ring.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	r.dying = time.Now().UnixNano() + int64(3*timeout)
	if w.nextDeath == 0 || r.dying < w.nextDeath {
		w.nextDeath = r.dying
	}
}

// reap drops the retired rings whose grace period has passed.
func (w *worker) reap(now int64) {
	w.nextDeath = 0
	for src, r := range w.rings {
		switch {
		case r.dying == 0:
		case now >= r.dying:
			w.drop(src)
		case w.nextDeath == 0 || r.dying < w.nextDeath:
			w.nextDeath = r.dying
		}
	}
}

// drop closes src and keeps its counters in the snapshot.
func (w *worker) drop(src *Source) {
	r := w.rings[src]
	if r == nil {
		return
	}
	_ = w.set.Remove(src)
	delete(w.rings, src)
	w.mu.Lock()
	c := w.snap.ifaces[r.name]
	w.snap.ifaces[r.name] = [2]uint64{c[0] + r.pkts, c[1] + r.bytes}
	w.mu.Unlock()
	r.pkts, r.bytes = 0, 0
}

// finish expires what is due, flushes every flow with reason shutdown,
// closes the rings and publishes the final counters.
func (w *worker) finish() {
	w.table.Expire(time.Now().UnixNano())
	w.table.Flush(flow.ReasonShutdown)
	w.flush()
	for src := range w.rings {
		w.drop(src)
	}
	_ = w.set.Close()
	w.publish()
	for { // messages that came too late: close what they hand over
		select {
		case m := <-w.ctl:
			switch m.kind {
			case ctlAdd:
				_ = m.src.Close()
			case ctlPeek:
				m.reply <- nil
			}
		default:
			return
		}
	}
}

// publish copies the counters for other goroutines.
func (w *worker) publish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.snap.dec = *w.dec.Stats()
	w.snap.table = w.table.Stats()
	w.snap.flows = w.table.Len()
	w.snap.records = w.nrecs
	for _, r := range w.rings { // open rings: fold their counts in without resetting
		c := w.snap.ifaces[r.name]
		w.snap.ifaces[r.name] = [2]uint64{c[0] + r.pkts, c[1] + r.bytes}
		r.pkts, r.bytes = 0, 0
	}
}

// top returns the n largest live flows by bytes (both directions).
func (w *worker) top(n int) []flow.Record {
	var all []flow.Record
	w.table.Peek(func(r *flow.Record) {
		all = append(all, *r)
	})
	return topN(all, n)
}

// topN sorts recs by bytes (both ways, then packets) and keeps n.
func topN(recs []flow.Record, n int) []flow.Record {
	sort.Slice(recs, func(i, j int) bool {
		a, b := recs[i].Bytes+recs[i].RevBytes, recs[j].Bytes+recs[j].RevBytes
		if a != b {
			return a > b
		}
		return recs[i].Packets+recs[i].RevPackets > recs[j].Packets+recs[j].RevPackets
	})
	if len(recs) > n {
		recs = recs[:n]
	}
	return recs
}
