package ipfix

import (
	"context"
	"crypto/tls"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// streamTransport is a TCP or TLS connection that is re-established with
// exponential backoff (and jitter, so that many agents restarted together
// do not reconnect in step) after the collector goes away. It accounts
// for every message: written into a session that the collector
// acknowledged (inflight), or undelivered by Reason.
type streamTransport struct {
	x                         *Exporter
	addr                      string
	tls                       *tls.Config
	dialTimeout, writeTimeout time.Duration
	confirm, linger           time.Duration
	minBackoff, maxBackoff    time.Duration

	c       *session      // nil while down
	down    Reason        // why c is nil, after a failure
	fails   int           // failed attempts since the last connection
	backoff time.Duration // wait after the next failure
	retry   time.Time     // no dial before this
	writes  int           // since inflight was last pruned
}

// pruneEvery is how many writes go between two SIOCOUTQ reads that forget
// the acknowledged messages.
const pruneEvery = 64

// maxInflight bounds the messages tracked where SIOCOUTQ cannot be read.
const maxInflight = 1 << 16

// session is one connection: conn is what messages are written to (the
// TLS connection, or the counted TCP one), raw counts the bytes that go
// into the socket (TLS records included), so a message's end is a TCP
// stream offset.
type session struct {
	conn      net.Conn
	tcp       *net.TCPConn
	raw       *countedConn
	isTLS     bool
	confirmed bool          // the collector accepted the session (TLS 1.3: a ticket came); TCP and TLS 1.2 always
	ticket    chan struct{} // TLS 1.3: the collector sent a session ticket
	flight    inflight

	dead atomic.Bool   // set by read when the connection failed
	done chan struct{} // closed when read returns
	mu   sync.Mutex
	err  error // what read got
}

// countedConn counts the bytes written into a TCP connection.
type countedConn struct {
	*net.TCPConn
	n atomic.Uint64 // the TLS reader may write too (alerts, key updates)
}

func (c *countedConn) Write(b []byte) (int, error) {
	n, err := c.TCPConn.Write(b)
	c.n.Add(uint64(n))
	return n, err
}

// ticketSignal is a tls.ClientSessionCache that only tells that a TLS 1.3
// session ticket came: the server sends it after it has verified the
// client's certificate and Finished, so the session is accepted. Nothing
// is kept, so nothing is resumed.
type ticketSignal chan struct{}

func (t ticketSignal) Get(string) (*tls.ClientSessionState, bool) { return nil, false }
func (t ticketSignal) Put(string, *tls.ClientSessionState) {
	select {
	case t <- struct{}{}:
	default:
	}
}

// read reads the connection until it fails. An IPFIX collector sends
// nothing back, so a read ends only when the collector closed, reset or
// rejected (TLS alert) the connection, or it was closed here: the exporter
// then counts what it lost and reconnects before its next message instead
// of losing it into a dead socket. Over TLS the reads also take in the
// session tickets (ticketSignal).
func (c *session) read() {
	defer close(c.done)
	var b [512]byte
	for {
		if _, err := c.conn.Read(b[:]); err != nil {
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
			c.dead.Store(true)
			return
		}
	}
}

func (c *session) readErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// abort resets the connection (SO_LINGER 0: what the kernel still holds
// is discarded, so nothing counted as undelivered arrives later) and
// waits for its reader.
func (c *session) abort() {
	c.tcp.SetLinger(0)
	c.tcp.Close()
	<-c.done
}

// unackedFlows forgets the messages the collector acknowledged and returns
// the flow records of the others (all of them when SIOCOUTQ cannot say).
func (c *session) unackedFlows() uint64 {
	if q, err := unacked(c.tcp); err == nil {
		c.flight.acked(c.raw.n.Load() - q)
	}
	return c.flight.pending()
}

// ready dials when there is no connection and a retry is due, and notices
// a connection the collector closed. Write calls it before encoding a
// batch, so a new session's first message is built with the templates
// (Encoder.Reset) and nothing is lost to the switch.
// flush does nothing: every message is written as it comes.
func (s *streamTransport) flush() {}

func (s *streamTransport) ready() {
	if s.c != nil && s.c.dead.Load() {
		s.broken(ReasonConnectionLost, s.c.readErr())
	}
	if s.c == nil && !s.x.now().Before(s.retry) {
		s.dial()
	}
}

// write sends msg (flows flow records). Any write error breaks the
// connection: part of a message may have gone out, and the stream cannot
// be resynchronised.
func (s *streamTransport) write(msg []byte, flows uint32) error {
	if s.c != nil && s.c.dead.Load() {
		// Seen before writing into a dead connection, whose first write
		// the kernel would accept and then lose.
		s.broken(ReasonConnectionLost, s.c.readErr())
	}
	c := s.c
	if c == nil {
		s.x.lose(s.down, uint64(flows))
		return errDown
	}
	c.conn.SetWriteDeadline(s.x.now().Add(s.writeTimeout))
	if _, err := c.conn.Write(msg); err != nil {
		r := ReasonWriteFailed
		if c.dead.Load() || errors.Is(err, net.ErrClosed) || isReset(err) {
			r = ReasonConnectionLost
		}
		s.x.lose(r, uint64(flows))
		s.broken(r, err)
		return err
	}
	c.flight.push(c.raw.n.Load(), flows)
	if s.writes++; s.writes >= pruneEvery {
		s.writes = 0
		if c.unackedFlows(); c.flight.messages() > maxInflight { // SIOCOUTQ unavailable: keep the newest
			c.flight.acked(c.flight.ends[len(c.flight.ends)-maxInflight-1])
		}
	}
	return nil
}

// isReset reports a connection the peer reset or closed under a write.
func isReset(err error) bool {
	var se *os.SyscallError
	if errors.As(err, &se) {
		return errors.Is(se.Err, syscall.ECONNRESET) || errors.Is(se.Err, syscall.EPIPE)
	}
	return false
}

// isAlert reports a TLS alert from the peer.
func isAlert(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}

// broken counts what a broken connection lost (the unacknowledged
// messages; every message of a TLS session the collector rejected), resets
// it and schedules the reconnect: at once when the collector closed it (a
// restarted collector costs no batch; the backoff applies from the next
// failure), after the backoff when a write failed (a stalled collector
// would stall the next connection too).
func (s *streamTransport) broken(r Reason, err error) {
	c := s.c
	if c.isTLS && !c.confirmed && isAlert(c.readErr()) {
		// TLS 1.3: the collector refused the client's certificate after
		// the handshake, and with it everything written since.
		r, err = ReasonTLSHandshake, c.readErr()
		s.x.lose(r, c.flight.pending())
	} else {
		s.x.lose(r, c.unackedFlows())
	}
	c.abort()
	s.c = nil
	s.x.stats.connected.Store(false)
	s.failed(r, err, "reconnecting")
	if r == ReasonConnectionLost {
		s.retry = s.x.now()
	}
}

// failed records a failure of cause r and schedules the next attempt.
func (s *streamTransport) failed(r Reason, err error, then string) {
	s.down = r
	s.fails++
	s.x.warn.say(s.x.now(), s.x.url, r, err, then)
	s.schedule()
}

// dial connects (and over TLS shakes hands, each within dialTimeout); on
// success the encoder starts a new session so the next message carries
// the templates. Over TLS 1.3 it waits up to confirm for the collector to
// accept the session: a session ticket says it did, an alert that it
// refused the client's certificate (which TLS 1.3 tells only after the
// client's handshake is done).
func (s *streamTransport) dial() {
	d := net.Dialer{Timeout: s.dialTimeout}
	nc, err := d.Dial("tcp", s.addr)
	if err != nil {
		s.x.stats.dialErrs.Add(1)
		s.failed(ReasonDialFailed, err, "retrying with backoff")
		return
	}
	tcp := nc.(*net.TCPConn)
	c := &session{tcp: tcp, raw: &countedConn{TCPConn: tcp}, confirmed: true, done: make(chan struct{})}
	c.conn = c.raw
	if s.tls != nil {
		cfg := s.tls.Clone()
		c.ticket = make(chan struct{}, 1)
		cfg.ClientSessionCache = ticketSignal(c.ticket)
		tc := tls.Client(c.raw, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), s.dialTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			tcp.SetLinger(0)
			tcp.Close()
			s.x.stats.dialErrs.Add(1)
			s.failed(ReasonTLSHandshake, err, "retrying with backoff")
			return
		}
		c.conn, c.isTLS = tc, true
		c.confirmed = tc.ConnectionState().Version < tls.VersionTLS13
	}
	go c.read()
	if !c.confirmed {
		t := time.NewTimer(s.confirm)
		select {
		case <-c.ticket:
			c.confirmed = true
		case <-c.done:
			err := c.readErr()
			c.abort()
			s.x.stats.dialErrs.Add(1)
			s.failed(ReasonTLSHandshake, err, "retrying with backoff")
			t.Stop()
			return
		case <-t.C: // a collector that sends no tickets: go on, unconfirmed
		}
		t.Stop()
	}
	s.c, s.backoff = c, 0
	s.x.stats.connects.Add(1)
	s.x.stats.connected.Store(true)
	s.x.enc.Reset()
	if s.fails > 0 {
		s.x.warn.recovered(s.x.url, s.fails)
	}
	s.fails = 0
}

// schedule sets the next retry: the backoff doubles from minBackoff to
// maxBackoff, each wait drawn from [backoff/2, backoff].
func (s *streamTransport) schedule() {
	s.backoff = min(max(2*s.backoff, s.minBackoff), s.maxBackoff)
	wait := s.backoff/2 + rand.N(s.backoff/2+1)
	s.retry = s.x.now().Add(wait)
}

// close waits up to linger for the collector to acknowledge what was
// written, counts what it did not as undelivered (ReasonShutdown) and
// closes: gracefully when everything was acknowledged (TLS close_notify),
// else with a reset.
func (s *streamTransport) close() {
	c := s.c
	if c == nil {
		return
	}
	for end := time.Now().Add(s.linger); ; time.Sleep(5 * time.Millisecond) {
		if c.dead.Load() {
			s.broken(ReasonConnectionLost, c.readErr())
			return
		}
		if c.unackedFlows() == 0 || !time.Now().Before(end) {
			break
		}
	}
	s.c = nil
	if n := c.unackedFlows(); n > 0 {
		s.x.lose(ReasonShutdown, n)
		s.x.warn.say(s.x.now(), s.x.url, ReasonShutdown, nil, "closed after waiting "+s.linger.String())
		c.abort()
		return
	}
	c.conn.SetWriteDeadline(time.Now().Add(s.writeTimeout))
	c.conn.Close()
	<-c.done
}
