package ipfix

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// transport carries whole messages to the collector.
type transport interface {
	ready() // before a batch: connect if needed and due
	write(msg []byte) error
	close()
}

// errDown is returned for a message built while a stream collector is
// unreachable and the next reconnect is not due yet.
var errDown = errors.New("ipfix: collector unreachable")

type udpTransport struct{ conn *net.UDPConn }

func (u *udpTransport) ready() {}

func (u *udpTransport) write(msg []byte) error {
	_, err := u.conn.Write(msg)
	return err
}

func (u *udpTransport) close() { u.conn.Close() }

// streamTransport is a TCP or TLS connection that is re-established with
// exponential backoff (and jitter, so that many agents restarted together
// do not reconnect in step) after the collector goes away.
type streamTransport struct {
	x                         *Exporter
	network, addr             string
	tls                       *tls.Config
	dialTimeout, writeTimeout time.Duration
	minBackoff, maxBackoff    time.Duration

	conn    net.Conn
	closed  *atomic.Bool  // set by conn's reader when the collector closed it
	backoff time.Duration // wait after the next failure
	retry   time.Time     // no dial before this
}

// ready dials when there is no connection and a retry is due. Write calls
// it before encoding a batch, so a new session's first message is built
// with the templates (Encoder.Reset) and nothing is lost to the switch.
func (s *streamTransport) ready() {
	if s.conn == nil {
		s.dial()
	}
}

// write sends msg. Any write error closes the connection: part of a
// message may have gone out, and the stream cannot be resynchronised.
func (s *streamTransport) write(msg []byte) error {
	if s.conn == nil {
		return errDown
	}
	if s.closed.Load() {
		// Seen before writing into a dead connection, whose first write
		// the kernel would accept and then lose.
		s.fail()
		return errDown
	}
	s.conn.SetWriteDeadline(s.x.now().Add(s.writeTimeout))
	if _, err := s.conn.Write(msg); err != nil {
		s.fail()
		return err
	}
	return nil
}

// dial connects when a retry is due; on success the encoder starts a new
// session so the next message carries the templates.
func (s *streamTransport) dial() {
	if s.x.now().Before(s.retry) {
		return
	}
	d := net.Dialer{Timeout: s.dialTimeout}
	var c net.Conn
	var err error
	if s.tls != nil {
		c, err = (&tls.Dialer{NetDialer: &d, Config: s.tls}).Dial("tcp", s.addr)
	} else {
		c, err = d.Dial("tcp", s.addr)
	}
	if err != nil {
		s.x.stats.dialErrs.Add(1)
		s.schedule()
		return
	}
	s.conn, s.backoff, s.closed = c, 0, new(atomic.Bool)
	go watch(c, s.closed)
	s.x.stats.connects.Add(1)
	s.x.stats.connected.Store(true)
	s.x.enc.Reset()
}

// watch reads conn until it fails and then sets closed. An IPFIX collector
// sends nothing back, so a read ends only when the collector closed or
// reset the connection (or Close was called): the exporter then reconnects
// before its next message instead of losing it into a dead socket.
func watch(conn net.Conn, closed *atomic.Bool) {
	var b [512]byte
	for {
		if _, err := conn.Read(b[:]); err != nil {
			closed.Store(true)
			return
		}
	}
}

// fail closes a broken connection and schedules the reconnect.
func (s *streamTransport) fail() {
	s.conn.Close()
	s.conn = nil
	s.x.stats.connected.Store(false)
	s.schedule()
}

// schedule sets the next retry: the backoff doubles from minBackoff to
// maxBackoff, each wait drawn from [backoff/2, backoff].
func (s *streamTransport) schedule() {
	s.backoff = min(max(2*s.backoff, s.minBackoff), s.maxBackoff)
	wait := s.backoff/2 + rand.N(s.backoff/2+1)
	s.retry = s.x.now().Add(wait)
}

func (s *streamTransport) close() {
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
}

// TLSConfig builds the client TLS configuration of ipfix+tls:// from PEM
// files: caFile (the collector's CA; "" for the system roots) and, for
// mutual TLS, certFile and keyFile (both or neither).
func TLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate", caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("a client certificate needs both the certificate and the key file")
	}
	if certFile != "" {
		kp, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{kp}
	}
	return c, nil
}
