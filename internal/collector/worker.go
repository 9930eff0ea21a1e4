package collector

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

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
	pub   ipfix.DecodeStats
	name  string // the last interface name admitted, and what it became
	as    string
}

func (c *Collector) newWorker() *worker {
	w := &worker{c: c, dec: ipfix.NewDecoder(c.cfg.Decoder), batch: make([]flow.Record, 0, c.cfg.Batch)}
	c.mu.Lock()
	c.workers[w] = struct{}{}
	c.mu.Unlock()
	return w
}

// emit is the decoder's callback: it copies the record into the batch.
func (w *worker) emit(r *flow.Record) {
	if r.Iface != "" {
		if r.Iface != w.name { // records of one exporter mostly repeat a name
			w.name, w.as = r.Iface, w.c.names.admit(r.Iface)
		}
		r.Iface = w.as
	}
	if len(w.batch) == 0 {
		w.since = time.Now()
	}
	w.batch = append(w.batch, *r)
	if len(w.batch) == cap(w.batch) {
		w.flush()
	}
}

// flush hands the batch to the sink and publishes the counters.
func (w *worker) flush() {
	if len(w.batch) > 0 {
		if err := w.c.out.Write(w.batch); err != nil {
			w.c.stats.sinkErrs.Add(1)
		}
		w.batch = w.batch[:0]
	}
	st := w.dec.Stats()
	w.c.mu.Lock()
	w.pub = st
	w.c.mu.Unlock()
}

// due reports whether a partial batch has waited long enough.
func (w *worker) due() bool {
	return len(w.batch) > 0 && time.Since(w.since) >= w.c.cfg.FlushInterval
}

// retire flushes and folds the worker's counters into the collector's.
func (w *worker) retire() {
	w.flush()
	w.c.mu.Lock()
	delete(w.c.workers, w)
	w.c.retired.Add(&w.pub)
	w.c.mu.Unlock()
}

// listenUDP binds a UDP socket with SO_REUSEPORT and a large receive
// buffer: SO_RCVBUFFORCE when privileged (past net.core.rmem_max), else
// SO_RCVBUF (capped by the kernel).
func listenUDP(addr string, rcvbuf int) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); serr != nil {
				return
			}
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf) != nil {
				_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf) // best effort
			}
		})
		if err != nil {
			return err
		}
		return serr
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp", addr)
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}

// serveUDP reads datagrams until the socket is closed. The read deadline
// wakes the loop to hand over a partial batch when traffic pauses.
func (c *Collector) serveUDP(conn *net.UDPConn) {
	w := c.newWorker()
	defer w.retire()
	buf := make([]byte, 65536)
	var deadline time.Time
	for {
		if now := time.Now(); now.After(deadline.Add(-c.cfg.FlushInterval / 2)) { // re-arm at most twice per interval
			deadline = now.Add(c.cfg.FlushInterval)
			conn.SetReadDeadline(deadline)
		}
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded):
				w.flush()
				deadline = time.Time{}
				continue
			case errors.Is(err, net.ErrClosed):
				return
			}
			c.stats.readErrs.Add(1)
			continue
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		_ = w.dec.Decode(from, buf[:n], w.emit) // errors are counted by reason in the decoder
		if w.due() {
			w.flush()
		}
	}
}

// connSet tracks open stream connections so Run can close them.
type connSet struct {
	mu sync.Mutex
	m  map[net.Conn]struct{}
}

func (s *connSet) add(c net.Conn) {
	s.mu.Lock()
	s.m[c] = struct{}{}
	s.mu.Unlock()
}

func (s *connSet) remove(c net.Conn) {
	s.mu.Lock()
	delete(s.m, c)
	s.mu.Unlock()
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	for c := range s.m {
		c.Close()
	}
	s.mu.Unlock()
}

// accept serves a stream listener's connections until it is closed.
func (c *Collector) accept(l net.Listener, conns *sync.WaitGroup, live *connSet) {
	for {
		conn, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			c.stats.readErrs.Add(1)
			time.Sleep(10 * time.Millisecond) // e.g. EMFILE: do not spin
			continue
		}
		if c.conns.Load() >= int64(c.cfg.MaxConns) {
			c.stats.rejected.Add(1)
			conn.Close()
			continue
		}
		c.stats.accepted.Add(1)
		c.conns.Add(1)
		live.add(conn)
		conns.Add(1)
		go func() {
			defer conns.Done()
			defer c.conns.Add(-1)
			defer live.remove(conn)
			defer conn.Close()
			c.serveStream(conn)
		}()
	}
}

// serveStream reads IPFIX messages framed by their length field. The
// connection is one transport session: its decoder (and so its templates)
// ends with it. A header that is not IPFIX cannot be resynchronised and
// closes the connection, counted.
func (c *Collector) serveStream(conn net.Conn) {
	w := c.newWorker()
	defer w.retire()
	var peer netip.AddrPort
	if ta, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		peer = netip.AddrPortFrom(ta.AddrPort().Addr().Unmap(), ta.AddrPort().Port())
	}
	r := bufio.NewReaderSize(conn, 64<<10)
	msg := make([]byte, ipfix.MaxMTU)
	for {
		if err := c.readFull(conn, r, w, msg[:4]); err != nil {
			if !errors.Is(err, net.ErrClosed) && !errors.Is(err, errEOF) {
				c.stats.readErrs.Add(1)
			}
			return
		}
		n := int(binary.BigEndian.Uint16(msg[2:]))
		if binary.BigEndian.Uint16(msg) != ipfix.Version || n < 16 {
			w.dec.Decode(peer, msg[:4], w.emit) // counted by the decoder (bad version or length)
			return
		}
		if err := c.readFull(conn, r, w, msg[4:n]); err != nil {
			c.stats.readErrs.Add(1)
			return
		}
		_ = w.dec.Decode(peer, msg[:n], w.emit)
		if w.due() {
			w.flush()
		}
	}
}

// errEOF is a clean end of stream between messages.
var errEOF = errors.New("end of stream")

// readFull fills b from r; when no data comes for the flush interval it
// hands the worker's partial batch over and keeps reading (a timeout in
// the middle of a message loses nothing: the bytes read so far stay).
func (c *Collector) readFull(conn net.Conn, r *bufio.Reader, w *worker, b []byte) error {
	got := 0
	for got < len(b) {
		conn.SetReadDeadline(time.Now().Add(c.cfg.FlushInterval))
		n, err := r.Read(b[got:])
		got += n
		if err != nil {
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded):
				w.flush()
				continue
			case got == 0 && len(b) == 4 && errors.Is(err, io.EOF):
				return errEOF
			}
			return err
		}
	}
	return nil
}
