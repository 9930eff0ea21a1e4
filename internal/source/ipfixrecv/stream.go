package ipfixrecv

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/internal/ipfix"
)

// Stream connections (TCP, TLS). Each has one goroutine, which ends with
// the connection: the TLS handshake runs first, under HandshakeTimeout
// and the collector's context; then messages are read until the peer
// closes, IdleConnTimeout passes without a byte, a read fails, or Run
// closes every connection. No read is retried but for a deadline that
// really passed.

// conns tracks open stream connections: bounded in all and per source
// address, closed all at once by Run.
type conns struct {
	max, perSource int
	wg             sync.WaitGroup

	mu      sync.Mutex
	live    map[net.Conn]*connState
	bySrc   map[netip.Addr]int
	closing int // evicted, their goroutines not done yet
	closed  bool
}

// connState is what the bound knows of an open connection.
type connState struct {
	conn     net.Conn
	src      netip.Addr
	accepted int64        // Unix ns
	lastMsg  atomic.Int64 // Unix ns of its last complete message; 0: none yet
	evicted  atomic.Bool  // set under conns.mu, read by its goroutine
}

func (s *conns) init(max, perSource int) {
	s.max, s.perSource = max, perSource
	s.live, s.bySrc = map[net.Conn]*connState{}, map[netip.Addr]int{}
}

// Why add refused or made room.
const (
	admitted = iota
	refusedClosed
	refusedPerSource
	evictedOther
)

// add admits conn from src. A source with perSource connections is
// refused. At the global bound the connection that has waited longest
// for a complete message is closed to make room (evictedOther): one that
// never completed a message, the longest open first, else the one whose
// last complete message is oldest. A slowloris client never completes a
// message and a real exporter does, so slow clients cannot lock
// exporters out, however many addresses they come from. Finding it scans
// the open connections (at most max, only when they are all taken).
func (s *conns) add(conn net.Conn, src netip.Addr, now time.Time) (*connState, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, refusedClosed
	case s.bySrc[src] >= s.perSource:
		return nil, refusedPerSource
	}
	why := admitted
	if len(s.live)-s.closing >= s.max {
		var v *connState
		for _, x := range s.live {
			if !x.evicted.Load() && (v == nil || x.staler(v)) {
				v = x
			}
		}
		if v == nil {
			return nil, refusedClosed // every one is being closed already: cannot happen with max ≥ 1
		}
		v.evicted.Store(true)
		s.closing++
		v.conn.SetReadDeadline(time.Unix(1, 0)) // wakes its goroutine, which counts what it cut, closes and removes it
		why = evictedOther
	}
	st := &connState{conn: conn, src: src, accepted: now.UnixNano()}
	s.live[conn] = st
	s.bySrc[src]++
	s.wg.Add(1)
	return st, why
}

// staler reports whether x has waited longer for a complete message than y.
func (x *connState) staler(y *connState) bool {
	xm, ym := x.lastMsg.Load(), y.lastMsg.Load()
	switch {
	case (xm == 0) != (ym == 0):
		return xm == 0
	case xm == 0:
		return x.accepted < y.accepted
	}
	return xm < ym
}

// remove forgets conn (closed by its goroutine).
func (s *conns) remove(st *connState) {
	s.mu.Lock()
	delete(s.live, st.conn)
	if st.evicted.Load() {
		s.closing--
	}
	if s.bySrc[st.src]--; s.bySrc[st.src] <= 0 {
		delete(s.bySrc, st.src)
	}
	s.mu.Unlock()
	s.wg.Done()
}

// open returns the number of connections open.
func (s *conns) open() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.live))
}

// closeAll closes every connection and admits no more: blocked reads,
// writes and handshakes return.
func (s *conns) closeAll() {
	s.mu.Lock()
	s.closed = true
	for c := range s.live {
		c.Close()
	}
	s.mu.Unlock()
}

// accept serves a stream listener's connections until it is closed.
func (c *Collector) accept(ctx context.Context, l listener) {
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
		var src netip.AddrPort
		if ta, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
			src = netip.AddrPortFrom(ta.AddrPort().Addr().Unmap(), ta.AddrPort().Port())
		}
		st, why := c.conns.add(conn, src.Addr(), time.Now())
		switch why {
		case refusedPerSource:
			c.stats.rejectedPerSource.Add(1)
			conn.Close()
			continue
		case refusedClosed:
			c.stats.rejected.Add(1)
			conn.Close()
			continue
		case evictedOther:
			c.stats.evicted.Add(1)
		}
		c.stats.accepted.Add(1)
		go func() {
			defer c.conns.remove(st)
			defer conn.Close()
			c.serveConn(ctx, conn, src, l.tls, st)
		}()
	}
}

// serveConn runs the TLS handshake, if any, under its own timeout, then
// serves the stream. A failed handshake closes the connection, counted.
func (c *Collector) serveConn(ctx context.Context, conn net.Conn, peer netip.AddrPort, cfg *tls.Config, st *connState) {
	if cfg != nil {
		tc := tls.Server(conn, cfg)
		hctx, cancel := context.WithTimeout(ctx, c.cfg.HandshakeTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		switch {
		case err == nil:
		case ctx.Err() != nil, st.evicted.Load(): // shutting down, or evicted (counted)
			return
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
			c.stats.handshakeTimeouts.Add(1)
			return
		default:
			c.stats.handshakeFailures.Add(1)
			return
		}
		conn = tc
	}
	c.serveStream(conn, peer, st)
}

// serveStream reads IPFIX messages framed by their length field. The
// connection is one transport session: its decoder (and so its templates)
// ends with it. A header that is not IPFIX cannot be resynchronised and
// closes the connection, counted. st (nil in fuzzing) learns when each
// message completes.
func (c *Collector) serveStream(conn net.Conn, peer netip.AddrPort, st *connState) {
	w := c.newWorker(true)
	defer w.retire()
	s := stream{c: c, conn: conn, r: bufio.NewReaderSize(conn, 16<<10), w: w, st: st, last: time.Now()}
	msg := make([]byte, 4, 2048) // grows to the longest message (at most 64 KiB)
	for {
		s.partial, s.started = 0, time.Time{}
		if err := s.readFull(msg[:4]); err != nil {
			s.end(err)
			return
		}
		n := int(binary.BigEndian.Uint16(msg[2:]))
		if binary.BigEndian.Uint16(msg) != ipfix.Version || n < 16 {
			w.decode(peer, msg[:4]) // counted by the decoder (bad version or length)
			return
		}
		if cap(msg) < n {
			msg = append(msg[:4], make([]byte, n-4)...)
		}
		if err := s.readFull(msg[4:n]); err != nil {
			if errors.Is(err, errEOF) {
				err = io.ErrUnexpectedEOF
			}
			s.end(err)
			return
		}
		w.decode(peer, msg[:n])
		if st != nil {
			st.lastMsg.Store(s.last.UnixNano())
		}
		if w.due() {
			w.flush()
		}
	}
}

// Stream ends that are not read errors.
var (
	errEOF     = errors.New("end of stream")                    // the peer closed between messages
	errIdle    = errors.New("connection idle too long")         // IdleConnTimeout without a byte
	errMsgSlow = errors.New("message not complete in its time") // MessageTimeout since its first byte
	errEvicted = errors.New("evicted at --max-conns")           // to make room for a new connection
)

// stream is a connection being read.
type stream struct {
	c     *Collector
	conn  net.Conn
	r     *bufio.Reader
	w     *worker
	st    *connState // nil in fuzzing
	last  time.Time  // the last byte read
	armed time.Time  // the read deadline set
	// started is when the first byte of the message being read came
	// (zero: none yet), partial how many of its bytes have come.
	started time.Time
	partial int
}

// end counts why the stream ended, and the message it cut.
func (s *stream) end(err error) {
	var unread int
	switch {
	case errors.Is(err, errEOF), errors.Is(err, net.ErrClosed):
	case errors.Is(err, errEvicted): // counted when evicted; what the kernel holds is cut too
		unread = inQueue(s.st.conn)
	case errors.Is(err, errIdle):
		s.c.stats.idleClosed.Add(1)
	case errors.Is(err, errMsgSlow):
		s.c.stats.msgTimeouts.Add(1)
	default:
		s.c.stats.readErrs.Add(1)
	}
	if s.partial+unread > 0 {
		s.c.stats.partialMsgs.Add(1)
		s.c.stats.partialBytes.Add(uint64(s.partial + unread))
	}
}

// readFull fills b. The read deadline wakes it to hand over the worker's
// partial batch after FlushInterval, to give up after IdleConnTimeout
// without a byte, and MessageTimeout after the first byte of a message
// that is still not complete (a timeout in the middle of a message loses
// nothing: the bytes read so far stay). Only a deadline that really
// passed is retried: any other error, and a timeout reported before its
// deadline (a connection whose state is broken fails every read at
// once), ends the stream.
func (s *stream) readFull(b []byte) error {
	idle, flush, whole := s.c.cfg.IdleConnTimeout, s.c.cfg.FlushInterval, s.c.cfg.MessageTimeout
	for got := 0; got < len(b); {
		want := s.last.Add(idle)
		if !s.started.IsZero() && s.started.Add(whole).Before(want) {
			want = s.started.Add(whole)
		}
		if len(s.w.batch) > 0 && s.w.since.Add(flush).Before(want) {
			want = s.w.since.Add(flush)
		}
		if s.armed.IsZero() || want.Before(s.armed) { // a later deadline can wait for the armed one to pass
			s.armed = want
			s.conn.SetReadDeadline(want)
		}
		if s.st != nil && s.st.evicted.Load() { // after arming: eviction's deadline may have been overwritten
			return errEvicted
		}
		n, err := s.r.Read(b[got:])
		if n > 0 {
			got += n
			s.partial += n
			s.last = time.Now()
			if s.started.IsZero() {
				s.started = s.last
			}
		}
		switch {
		case err == nil:
		case !errors.Is(err, os.ErrDeadlineExceeded):
			if got == 0 && len(b) == 4 && errors.Is(err, io.EOF) {
				return errEOF
			}
			return err
		case s.st != nil && s.st.evicted.Load():
			return errEvicted
		case time.Until(s.armed) > time.Millisecond:
			return err // not a deadline that passed
		default:
			s.armed = time.Time{}
			if s.w.due() {
				s.w.flush()
			}
			if time.Since(s.last) >= idle {
				return errIdle
			}
			if !s.started.IsZero() && time.Since(s.started) >= whole {
				return errMsgSlow
			}
		}
	}
	return nil
}
