//go:build linux

package afpacket

import (
	"errors"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/meter"
	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/source"
)

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
	shard *meter.Shard // the worker's
	iface uint16       // index in the worker's meter.Shard Ifaces
	name  string
	pkts  uint64
	bytes uint64
	dying int64 // Unix ns after which the ring is dropped (retire); 0 while alive
}

// worker owns a set of rings (its share of every interface) and a meter
// shard (decoder and table shard). Only its own goroutine touches them;
// others talk to it through ctl (and Set.Wake) and read its published
// snapshot.
type worker struct {
	id    int
	cfg   *Config
	set   *Set
	shard *meter.Shard
	rings map[*Source]*ring
	ctl   chan ctlMsg
	dead  chan<- *Source // sockets whose interface failed, for the manager
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
		rings: map[*Source]*ring{},
		ctl:   make(chan ctlMsg, 64),
	}
	w.snap.ifaces = map[string][2]uint64{}
	// No packet clock: run expires by the wall clock, less expireLag.
	if w.shard, err = meter.NewShard(meter.ShardConfig{Table: cfg.Table, Decoder: cfg.Decoder, Batch: cfg.Batch}, nil); err != nil {
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
		fatal    error
	)
	for fatal == nil {
		src, err := w.set.NextBlock(w.cfg.Tick / 4)
		switch {
		case err == nil:
			if src != lastSrc { // blocks come in turn: usually the same ring
				lastSrc, last = src, w.rings[src]
			}
			src.walk(&f, last) // then the rest of the batch goes to the table and the clock is read, once a block
		case errors.Is(err, ErrWoken):
			w.shard.Apply()
			if w.control(stop) {
				w.drain()
				w.finish()
				return w.shard.Err()
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
		w.shard.Apply()
		now := time.Now().UnixNano()
		if w.nextDeath != 0 && now >= w.nextDeath {
			lastSrc = nil // the cached ring may be dropped
			w.reap(now)
		}
		if now >= nextTick {
			w.shard.Expire(now - lag)
			w.shard.Flush() // records leave at least once per tick, however quiet the interface
			w.publish()
			nextTick = now + tick
		}
	}
	w.finish()
	return errors.Join(append([]error{fatal}, w.shard.Errs()...)...)
}

// take counts frame f of ring r and hands it to the shard.
func (r *ring) take(f *source.Frame) {
	r.pkts++
	r.bytes += uint64(f.WireLen)
	r.shard.Take(f, r.iface)
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
				r := &ring{name: m.src.Iface(), shard: w.shard}
				r.iface = w.shard.Ifaces().Index(r.name)
				w.rings[m.src] = r
				if err := w.set.Add(m.src); err != nil { // still read, at least every Tick/4
					w.cfg.Logf("%v", err)
				}
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
		w.rings[src].take(&f)
	}
	w.shard.Apply()
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
	w.shard.Finish(time.Now().UnixNano(), flow.ReasonShutdown)
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
	st := w.shard.Stats()
	w.snap.dec = st.Decoder
	w.snap.table = st.Table
	w.snap.flows = st.Flows
	w.snap.records = st.Records
	for _, r := range w.rings { // open rings: fold their counts in without resetting
		c := w.snap.ifaces[r.name]
		w.snap.ifaces[r.name] = [2]uint64{c[0] + r.pkts, c[1] + r.bytes}
		r.pkts, r.bytes = 0, 0
	}
}

// top returns the n largest live flows by bytes (both directions).
func (w *worker) top(n int) []flow.Record {
	var all []flow.Record
	w.shard.Peek(func(r *flow.Record) {
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
