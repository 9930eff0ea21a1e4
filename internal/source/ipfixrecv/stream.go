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

	mu     sync.Mutex
	live   map[net.Conn]struct{}
	bySrc  map[netip.Addr]int
	closed bool
}

func (s *conns) init(max, perSource int) {
	s.max, s.perSource = max, perSource
	s.live, s.bySrc = map[net.Conn]struct{}{}, map[netip.Addr]int{}
}

// add admits conn from src, or says which bound refuses it.
func (s *conns) add(conn net.Conn, src netip.Addr) (ok, perSource bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed || len(s.live) >= s.max:
		return false, false
	case s.bySrc[src] >= s.perSource:
		return false, true
	}
	s.live[conn] = struct{}{}
	s.bySrc[src]++
	s.wg.Add(1)
	return true, false
}

// remove forgets conn (closed by its goroutine).
func (s *conns) remove(conn net.Conn, src netip.Addr) {
	s.mu.Lock()
	delete(s.live, conn)
	if s.bySrc[src]--; s.bySrc[src] <= 0 {
		delete(s.bySrc, src)
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
		switch ok, perSource := c.conns.add(conn, src.Addr()); {
		case ok:
		case perSource:
			c.stats.rejectedPerSource.Add(1)
			conn.Close()
			continue
		default:
			c.stats.rejected.Add(1)
			conn.Close()
			continue
		}
		c.stats.accepted.Add(1)
		go func() {
			defer c.conns.remove(conn, src.Addr())
			defer conn.Close()
			c.serveConn(ctx, conn, src, l.tls)
		}()
	}
}

// serveConn runs the TLS handshake, if any, under its own timeout, then
// serves the stream. A failed handshake closes the connection, counted.
func (c *Collector) serveConn(ctx context.Context, conn net.Conn, peer netip.AddrPort, cfg *tls.Config) {
	if cfg != nil {
		tc := tls.Server(conn, cfg)
		hctx, cancel := context.WithTimeout(ctx, c.cfg.HandshakeTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		switch {
		case err == nil:
		case ctx.Err() != nil: // shutting down
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
	c.serveStream(conn, peer)
}

// serveStream reads IPFIX messages framed by their length field. The
// connection is one transport session: its decoder (and so its templates)
// ends with it. A header that is not IPFIX cannot be resynchronised and
// closes the connection, counted.
func (c *Collector) serveStream(conn net.Conn, peer netip.AddrPort) {
	w := c.newWorker(true)
	defer w.retire()
	s := stream{c: c, conn: conn, r: bufio.NewReaderSize(conn, 16<<10), w: w, last: time.Now()}
	msg := make([]byte, 4, 2048) // grows to the longest message (at most 64 KiB)
	for {
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
		if w.due() {
			w.flush()
		}
	}
}

// Stream ends that are not read errors.
var (
	errEOF  = errors.New("end of stream")            // the peer closed between messages
	errIdle = errors.New("connection idle too long") // IdleConnTimeout without a byte
)

// stream is a connection being read.
type stream struct {
	c     *Collector
	conn  net.Conn
	r     *bufio.Reader
	w     *worker
	last  time.Time // the last byte read
	armed time.Time // the read deadline set
}

// end counts why the stream ended.
func (s *stream) end(err error) {
	switch {
	case errors.Is(err, errEOF), errors.Is(err, net.ErrClosed):
	case errors.Is(err, errIdle):
		s.c.stats.idleClosed.Add(1)
	default:
		s.c.stats.readErrs.Add(1)
	}
}

// readFull fills b. The read deadline wakes it to hand over the worker's
// partial batch after FlushInterval, and to give up after
// IdleConnTimeout without a byte (a timeout in the middle of a message
// loses nothing: the bytes read so far stay). Only a deadline that really
// passed is retried: any other error, and a timeout reported before its
// deadline (a connection whose state is broken fails every read at
// once), ends the stream.
func (s *stream) readFull(b []byte) error {
	idle, flush := s.c.cfg.IdleConnTimeout, s.c.cfg.FlushInterval
	for got := 0; got < len(b); {
		want := s.last.Add(idle)
		if len(s.w.batch) > 0 && s.w.since.Add(flush).Before(want) {
			want = s.w.since.Add(flush)
		}
		if s.armed.IsZero() || want.Before(s.armed) { // a later deadline can wait for the armed one to pass
			s.armed = want
			s.conn.SetReadDeadline(want)
		}
		n, err := s.r.Read(b[got:])
		if n > 0 {
			got += n
			s.last = time.Now()
		}
		switch {
		case err == nil:
		case !errors.Is(err, os.ErrDeadlineExceeded):
			if got == 0 && len(b) == 4 && errors.Is(err, io.EOF) {
				return errEOF
			}
			return err
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
		}
	}
	return nil
}
