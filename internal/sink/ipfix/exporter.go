// Package ipfix is the IPFIX exporter sink: it encodes records with
// internal/ipfix and sends the messages to a collector over UDP (paced so
// that a burst of records does not overflow the collector's socket), TCP or
// TLS (reconnected with backoff when the collector goes away).
//
// Records of sampled traffic (flow.Record.Sampling > 1) tell the collector
// their interval: internal/ipfix announces it in options data. Translated
// records (conntrack) carry their post-NAT key, deny flows (NFLOG)
// firewallEvent "flow denied", in templates of their own. With a Private
// Enterprise Number (Config.PEN) the workloads, service, rule, conntrack
// mark and zone travel as enterprise elements under it.
//
// Write blocks while it paces or while a stream collector applies back
// pressure; capture puts a sink.Queue in front of each exporter, so a slow
// or dead collector costs counted drops, never capture.
package ipfix

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/ipfix"
)

// DefaultRate is the default UDP pace in messages per second: about 40,000
// records/s of 1,400-byte messages, well within what nfcapd drains from a
// default socket buffer.
const DefaultRate = 2000

// MaxUDPMTU is the largest message a UDP datagram carries over IPv4
// (65,535 less the IP and UDP headers).
const MaxUDPMTU = 65535 - 20 - 8

// Defaults of the stream transports.
const (
	DefaultDialTimeout  = 5 * time.Second
	DefaultWriteTimeout = 5 * time.Second
	DefaultMinBackoff   = 100 * time.Millisecond
	DefaultMaxBackoff   = 30 * time.Second
)

// Config configures an Exporter.
type Config struct {
	URL    string  // ipfix+udp://, ipfix+tcp:// or ipfix+tls://HOST:PORT, optionally ?mtu=BYTES
	MTU    int     // largest message (default ipfix.DefaultMTU; the URL's mtu wins)
	Rate   float64 // UDP messages per second (0: DefaultRate; <0: unpaced)
	Domain uint32  // observation domain id
	// PEN is the Private Enterprise Number of the enterprise elements
	// carrying the enrichment, rule, conntrack mark and zone (0: they are
	// not sent; see ipfix.Config.PEN).
	PEN uint32
	// TLS configures ipfix+tls:// (nil: system roots, server name from
	// the URL). Use TLSConfig to build it from files.
	TLS *tls.Config
	// DialTimeout, WriteTimeout, MinBackoff and MaxBackoff tune the stream
	// transports (0: the defaults above). A write that cannot finish in
	// WriteTimeout closes the connection: a half-written message would
	// corrupt the stream.
	DialTimeout, WriteTimeout, MinBackoff, MaxBackoff time.Duration
}

// Stats are an Exporter's counters.
type Stats struct {
	Records, Messages, Bytes uint64 // handed to the transport
	// SendErrors counts UDP messages the socket refused (collector down,
	// buffer full) and stream writes that failed.
	SendErrors uint64
	// DroppedRecords counts records not sent: refused or failed messages,
	// and messages built while a stream collector was unreachable.
	DroppedRecords uint64
	// Connects counts stream connections established (the first and every
	// reconnect); DialErrors counts failed attempts.
	Connects, DialErrors uint64
	Connected            bool // a stream connection is up (always true for UDP)
	// CutStrings counts enterprise strings cut so that their record fits
	// in a message (ipfix.Encoder.Cut).
	CutStrings uint64
}

// Exporter is a sink.Sink sending IPFIX to one collector. It is not safe
// for concurrent use; Stats may be called from any goroutine.
type Exporter struct {
	cfg   Config
	url   string
	tr    transport
	enc   *ipfix.Encoder
	gap   time.Duration // between UDP messages at the configured rate
	next  time.Time     // earliest time for the next UDP message
	sleep func(time.Duration)
	now   func() time.Time
	stats struct {
		records, messages, bytes, errs, dropped, connects, dialErrs, cut atomic.Uint64
		connected                                                        atomic.Bool
	}
}

// ErrScheme is returned for export URLs weir cannot send to.
var ErrScheme = errors.New("ipfix: unsupported export URL")

// ParseURL splits an export URL into its transport ("udp", "tcp" or "tls")
// and HOST:PORT, and returns the message size its "?mtu=N" asks for (0:
// not given).
func ParseURL(s string) (network, hostport string, mtu int, err error) {
	const want = "want ipfix+udp://, ipfix+tcp:// or ipfix+tls://HOST:PORT[?mtu=BYTES]"
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Port() == "" || strings.Trim(u.Path, "/") != "" {
		return "", "", 0, fmt.Errorf("%w %q: %s", ErrScheme, s, want)
	}
	q := u.Query()
	if m := q.Get("mtu"); m != "" {
		if mtu, err = strconv.Atoi(m); err != nil || mtu <= 0 {
			return "", "", 0, fmt.Errorf("%w %q: mtu must be a positive number of bytes", ErrScheme, s)
		}
		q.Del("mtu")
	}
	if len(q) > 0 {
		return "", "", 0, fmt.Errorf("%w %q: %s", ErrScheme, s, want)
	}
	network, ok := strings.CutPrefix(u.Scheme, "ipfix+")
	if !ok || (network != "udp" && network != "tcp" && network != "tls") {
		return "", "", 0, fmt.Errorf("%w %q: %s", ErrScheme, s, want)
	}
	return network, u.Host, mtu, nil
}

// New prepares an exporter. A UDP socket is opened at once (no packet is
// sent until records come); a stream collector is dialled on the first
// write, so a collector that is down at start costs drops, not startup.
func New(cfg Config) (*Exporter, error) {
	network, host, mtu, err := ParseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	if mtu != 0 {
		cfg.MTU = mtu
	}
	x := &Exporter{cfg: cfg, url: cfg.URL, sleep: time.Sleep, now: time.Now}
	icfg := ipfix.Config{Domain: cfg.Domain, MTU: cfg.MTU, PEN: cfg.PEN}
	switch network {
	case "udp":
		if cfg.MTU > MaxUDPMTU {
			return nil, fmt.Errorf("%w: MTU %d: a UDP datagram holds at most %d bytes", ipfix.ErrBadConfig, cfg.MTU, MaxUDPMTU)
		}
		raddr, err := net.ResolveUDPAddr("udp", host)
		if err != nil {
			return nil, fmt.Errorf("ipfix: %s: %w", cfg.URL, err)
		}
		conn, err := net.DialUDP("udp", nil, raddr)
		if err != nil {
			return nil, fmt.Errorf("ipfix: %s: %w", cfg.URL, err)
		}
		x.tr = &udpTransport{conn: conn}
		x.stats.connected.Store(true)
		switch {
		case cfg.Rate == 0:
			x.gap = time.Duration(float64(time.Second) / DefaultRate)
		case cfg.Rate > 0:
			x.gap = time.Duration(float64(time.Second) / cfg.Rate)
		}
	default:
		// A stream keeps its templates for the session (RFC 7011 8.1): no
		// refresh; a new connection sends them again (Encoder.Reset).
		icfg.RefreshMessages, icfg.RefreshInterval = -1, -1
		st := &streamTransport{x: x, network: network, addr: host,
			dialTimeout: orDefault(cfg.DialTimeout, DefaultDialTimeout), writeTimeout: orDefault(cfg.WriteTimeout, DefaultWriteTimeout),
			minBackoff: orDefault(cfg.MinBackoff, DefaultMinBackoff), maxBackoff: orDefault(cfg.MaxBackoff, DefaultMaxBackoff)}
		if network == "tls" {
			st.tls = cfg.TLS
			if st.tls == nil {
				st.tls = &tls.Config{MinVersion: tls.VersionTLS12}
			}
			if st.tls.ServerName == "" {
				st.tls = st.tls.Clone()
				st.tls.ServerName, _, _ = net.SplitHostPort(host)
			}
		}
		x.tr = st
	}
	x.enc, err = ipfix.NewEncoder(icfg, x.send)
	if err != nil {
		x.tr.close()
		return nil, err
	}
	return x, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// URL returns the destination the exporter was made for.
func (x *Exporter) URL() string { return x.url }

// send paces and sends one message. A refused send is counted, not
// returned: a collector that is down must not stop capture.
func (x *Exporter) send(msg []byte) error {
	if x.gap > 0 {
		now := x.now()
		if d := x.next.Sub(now); d > time.Millisecond { // sleep only when well ahead: timer granularity
			x.sleep(d)
		}
		x.next = maxTime(x.next, now.Add(-10*x.gap)).Add(x.gap) // a short idle allows a burst of at most 10
	}
	if err := x.tr.write(msg); err != nil {
		// The flow records in msg (its sequence number counts options
		// data records too).
		x.stats.dropped.Add(uint64(x.enc.Flows()))
		if !errors.Is(err, errDown) {
			x.stats.errs.Add(1)
		}
		return nil
	}
	x.stats.messages.Add(1)
	x.stats.bytes.Add(uint64(len(msg)))
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Write encodes and sends recs, then flushes the last partial message so
// that records leave with their batch.
func (x *Exporter) Write(recs []flow.Record) error {
	x.tr.ready()
	for i := range recs {
		if err := x.enc.Add(&recs[i]); err != nil {
			return err
		}
	}
	x.stats.records.Add(uint64(len(recs)))
	x.stats.cut.Store(x.enc.Cut())
	return x.enc.Flush()
}

// Close flushes and closes the connection.
func (x *Exporter) Close() error {
	err := x.enc.Flush()
	x.tr.close()
	x.stats.connected.Store(false)
	return err
}

// Stats returns the counters.
func (x *Exporter) Stats() Stats {
	return Stats{Records: x.stats.records.Load(), Messages: x.stats.messages.Load(),
		Bytes: x.stats.bytes.Load(), SendErrors: x.stats.errs.Load(), DroppedRecords: x.stats.dropped.Load(),
		Connects: x.stats.connects.Load(), DialErrors: x.stats.dialErrs.Load(), Connected: x.stats.connected.Load(),
		CutStrings: x.stats.cut.Load()}
}
