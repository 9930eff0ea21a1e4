package ipfixrecv

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/ipfix"
)

// worker is one receive loop's decoder and batch; only its goroutine
// touches it, but pub (the published counters) is read under c.mu.
type worker struct {
	c     *Collector
	dec   *ipfix.Decoder
	batch []flow.Record
	since time.Time // when the batch's first record came
	pubAt time.Time // when pub was last set
	pub   ipfix.DecodeStats
	from  netip.Addr // the exporter of the message being decoded
	// The last interface name admitted, its exporter, what it became
	// and why: records of one exporter mostly repeat a name.
	name, as string
	nameFrom netip.Addr
	why      nameRefusal
	// The node of records that name none: the exporter's address, as
	// text, made once per exporter change.
	node     string
	nodeFrom netip.Addr
}

// newWorker returns a worker; stream workers' decoders keep their
// templates as long as the connection.
func (c *Collector) newWorker(stream bool) *worker {
	cfg := c.cfg.Decoder
	cfg.Stream = stream
	w := &worker{c: c, dec: ipfix.NewDecoder(cfg), batch: make([]flow.Record, 0, min(c.cfg.Batch, 64))}
	c.mu.Lock()
	c.workers[w] = struct{}{}
	c.mu.Unlock()
	return w
}

// emit is the decoder's callback: it bounds the interface names, gives
// records whose exporter names no node (observationDomainName) the
// exporter's address as their node, and copies the record into the batch.
func (w *worker) emit(r *flow.Record) {
	if r.Node == "" {
		if w.node == "" || w.from != w.nodeFrom {
			w.node, w.nodeFrom = w.from.String(), w.from
		}
		r.Node = w.node
	}
	if r.Iface != "" {
		if r.Iface != w.name || w.from != w.nameFrom {
			w.name, w.nameFrom = r.Iface, w.from
			w.as, w.why = w.c.ex.admit(w.from, r.Iface)
		}
		if w.why != nameOK {
			w.c.ex.refused(w.why)
		}
		r.Iface = w.as
	}
	if len(w.batch) == 0 {
		w.since = time.Now()
	}
	w.batch = append(w.batch, *r)
	if len(w.batch) >= w.c.cfg.Batch {
		w.flush()
	}
}

// decode decodes one message from exporter.
func (w *worker) decode(from netip.AddrPort, msg []byte) {
	w.from = from.Addr()
	_ = w.dec.Decode(from, msg, w.emit) // errors are counted by reason in the decoder
}

// flush publishes the counters and hands the batch to the sink (in that
// order: whoever sees the records in the sink sees them counted).
func (w *worker) flush() {
	st := w.dec.Stats()
	w.pubAt = time.Now()
	w.c.mu.Lock()
	w.pub = st
	w.c.mu.Unlock()
	if len(w.batch) > 0 {
		if err := w.c.out.Write(w.batch); err != nil {
			w.c.stats.sinkErrs.Add(1)
		}
		w.batch = w.batch[:0]
	}
}

// due reports whether a partial batch has waited long enough, or the
// published counters are that old (a flood of templates has no records
// to flush, but its counters must show).
func (w *worker) due() bool {
	now := time.Now()
	return (len(w.batch) > 0 && now.Sub(w.since) >= w.c.cfg.FlushInterval) || now.Sub(w.pubAt) >= w.c.cfg.FlushInterval
}

// retire flushes, gives back the decoder's template state and folds the
// worker's counters into the collector's.
func (w *worker) retire() {
	w.dec.Close() // its sessions' budget goes back; the gauges are 0
	w.flush()
	w.c.mu.Lock()
	delete(w.c.workers, w)
	w.c.retired.Add(&w.pub)
	w.c.mu.Unlock()
}

// serveUDP reads datagrams until the socket is closed. The read deadline
// wakes the loop to hand over a partial batch when traffic pauses (and to
// forget sessions whose time is up).
func (c *Collector) serveUDP(conn *net.UDPConn) {
	w := c.newWorker(false)
	defer w.retire()
	buf := make([]byte, 65536)
	oob := make([]byte, oobLen)
	var drops uint32 // the socket's drop count as last reported
	var deadline time.Time
	for {
		if now := time.Now(); now.After(deadline.Add(-c.cfg.FlushInterval / 2)) { // re-arm at most twice per interval
			deadline = now.Add(c.cfg.FlushInterval)
			conn.SetReadDeadline(deadline)
		}
		n, oobn, _, from, err := conn.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded):
				w.flush()
				w.dec.Sweep()
				deadline = time.Time{}
				continue
			case errors.Is(err, net.ErrClosed):
				return
			}
			c.stats.readErrs.Add(1)
			continue
		}
		if v, ok := rxqOvfl(oob[:oobn]); ok && v != drops {
			c.stats.socketDrops.Add(uint64(v - drops)) // modulo 2^32: the kernel's counter wraps
			drops = v
		}
		w.decode(netip.AddrPortFrom(from.Addr().Unmap(), from.Port()), buf[:n])
		if w.due() {
			w.flush()
		}
	}
}
