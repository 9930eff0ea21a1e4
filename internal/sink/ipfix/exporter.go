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
//
// Every record that does not reach the collector is counted as
// undelivered by Reason (Stats.Undelivered, the metric
// weir_export_undelivered_records_total) and said once per cause on
// stderr: the dial or the TLS handshake failed (a TLS 1.3 collector that
// refuses the client's certificate is caught after the handshake, stream.go),
// the connection broke with messages its collector had not acknowledged
// (inflight.go), the queue was full, or the exporter stopped first.
//
// The URL's options: ?mtu=BYTES, ?biflow=off (two unidirectional records
// per flow, for collectors that ignore RFC 5103: ipfix.Config.Unidirectional)
// and ?sets=one (one set per message, for vmware/go-ipfix's collector:
// ipfix.Config.OneSet).
package ipfix

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/ipfix"
	"github.com/weir-dev/weir/internal/sink"
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
	// DefaultConfirm is how long a new TLS 1.3 session waits for the
	// collector to accept it (a session ticket) or refuse the client's
	// certificate (an alert) before the first message.
	DefaultConfirm = time.Second
	// DefaultLinger is how long Close waits for the collector to
	// acknowledge what was written.
	DefaultLinger = 2 * time.Second
)

// Config configures an Exporter.
type Config struct {
	URL    string  // ipfix+udp://, ipfix+tcp:// or ipfix+tls://HOST:PORT, optionally ?mtu=BYTES&biflow=off&sets=one (ParseURL)
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
	// Confirm and Linger: see DefaultConfirm and DefaultLinger (0: those).
	Confirm, Linger time.Duration
	// Log is where the causes of undelivered records are said, once
	// each (nil: os.Stderr).
	Log io.Writer
}

// Stats are an Exporter's counters.
type Stats struct {
	Records, Messages, Bytes uint64 // handed to the transport
	// SendErrors counts UDP messages the socket refused (collector down,
	// buffer full) and stream writes that failed.
	SendErrors uint64
	// Undelivered counts the records that did not reach the collector, by
	// Reason; DroppedRecords is their sum.
	Undelivered    [NumReasons]uint64
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
	udp   bool
	tr    transport
	warn  warner
	queue atomic.Pointer[sink.Queue] // in front of the exporter, for ReasonQueueFull (CountQueue)
	enc   *ipfix.Encoder
	gap   time.Duration // between UDP messages at the configured rate
	next  time.Time     // earliest time for the next UDP message
	sleep func(time.Duration)
	now   func() time.Time
	stats struct {
		records, messages, bytes, errs, connects, dialErrs, cut atomic.Uint64
		undelivered                                             [NumReasons]atomic.Uint64
		connected                                               atomic.Bool
	}
}

// ErrScheme is returned for export URLs weir cannot send to.
var ErrScheme = errors.New("ipfix: unsupported export URL")

// Dest is what an export URL says.
type Dest struct {
	Network string // "udp", "tcp" or "tls"
	Host    string // HOST:PORT
	MTU     int    // ?mtu=BYTES (0: not given)
	// Unidirectional: ?biflow=off (ipfix.Config.Unidirectional).
	Unidirectional bool
	// OneSet: ?sets=one (ipfix.Config.OneSet).
	OneSet bool
}

// ParseURL reads an export URL: ipfix+udp://, ipfix+tcp:// or
// ipfix+tls://HOST:PORT, with the options ?mtu=BYTES, ?biflow=on|off and
// ?sets=many|one.
func ParseURL(s string) (Dest, error) {
	const want = "want ipfix+udp://, ipfix+tcp:// or ipfix+tls://HOST:PORT[?mtu=BYTES&biflow=off&sets=one]"
	var d Dest
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Port() == "" || strings.Trim(u.Path, "/") != "" {
		return d, fmt.Errorf("%w %q: %s", ErrScheme, s, want)
	}
	q := u.Query()
	for k, v := range q {
		if len(v) != 1 {
			return d, fmt.Errorf("%w %q: %s given %d times", ErrScheme, s, k, len(v))
		}
		switch k {
		case "mtu":
			if d.MTU, err = strconv.Atoi(v[0]); err != nil || d.MTU <= 0 {
				return d, fmt.Errorf("%w %q: mtu must be a positive number of bytes", ErrScheme, s)
			}
		case "biflow":
			if v[0] != "on" && v[0] != "off" {
				return d, fmt.Errorf("%w %q: biflow is on (RFC 5103 biflows, the default) or off (two unidirectional records per flow)", ErrScheme, s)
			}
			d.Unidirectional = v[0] == "off"
		case "sets":
			if v[0] != "many" && v[0] != "one" {
				return d, fmt.Errorf("%w %q: sets is many (the default) or one (one set per message, for vmware/go-ipfix)", ErrScheme, s)
			}
			d.OneSet = v[0] == "one"
		default:
			return d, fmt.Errorf("%w %q: unknown option %q: %s", ErrScheme, s, k, want)
		}
	}
	network, ok := strings.CutPrefix(u.Scheme, "ipfix+")
	if !ok || (network != "udp" && network != "tcp" && network != "tls") {
		return d, fmt.Errorf("%w %q: %s", ErrScheme, s, want)
	}
	d.Network, d.Host = network, u.Host
	return d, nil
}

// New prepares an exporter. A UDP socket is opened at once (no packet is
// sent until records come); a stream collector is dialled on the first
// write, so a collector that is down at start costs drops, not startup.
func New(cfg Config) (*Exporter, error) {
	dst, err := ParseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	network, host := dst.Network, dst.Host
	if dst.MTU != 0 {
		cfg.MTU = dst.MTU
	}
	if cfg.Log == nil {
		cfg.Log = os.Stderr
	}
	x := &Exporter{cfg: cfg, url: cfg.URL, sleep: time.Sleep, now: time.Now, warn: warner{w: cfg.Log}}
	icfg := ipfix.Config{Domain: cfg.Domain, MTU: cfg.MTU, PEN: cfg.PEN, Unidirectional: dst.Unidirectional, OneSet: dst.OneSet}
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
		switch {
		case cfg.Rate == 0:
			x.gap = time.Duration(float64(time.Second) / DefaultRate)
		case cfg.Rate > 0:
			x.gap = time.Duration(float64(time.Second) / cfg.Rate)
		}
		max := batchMessages
		if x.gap > 0 {
			max = paceBurst // a batch leaves at once: never more than the pace's burst
		}
		x.tr, x.udp = newUDPTransport(x, conn, max), true
		x.stats.connected.Store(true)
	default:
		// A stream keeps its templates for the session (RFC 7011 8.1): no
		// refresh; a new connection sends them again (Encoder.Reset).
		icfg.RefreshMessages, icfg.RefreshInterval = -1, -1
		st := &streamTransport{x: x, addr: host,
			dialTimeout: orDefault(cfg.DialTimeout, DefaultDialTimeout), writeTimeout: orDefault(cfg.WriteTimeout, DefaultWriteTimeout),
			minBackoff: orDefault(cfg.MinBackoff, DefaultMinBackoff), maxBackoff: orDefault(cfg.MaxBackoff, DefaultMaxBackoff),
			confirm: orDefault(cfg.Confirm, DefaultConfirm), linger: orDefault(cfg.Linger, DefaultLinger)}
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

// paceBurst is how many UDP messages may leave at once after a pause.
const paceBurst = 10

// send hands one message to the transport. A refused send is counted (by
// the transport, with the flow records it held), not returned: a
// collector that is down must not stop capture.
func (x *Exporter) send(msg []byte) error {
	// The flow records in msg (its sequence number counts options data
	// records too).
	if err := x.tr.write(msg, x.enc.Flows()); err != nil {
		if !errors.Is(err, errDown) {
			x.stats.errs.Add(1)
		}
		return nil
	}
	if !x.udp { // UDP messages are counted as they leave (udpTransport.sent)
		x.stats.messages.Add(1)
		x.stats.bytes.Add(uint64(len(msg)))
	}
	return nil
}

// pace waits until n more UDP messages may leave together at the
// configured rate: the last of them is due (a batch is never early),
// after a pause up to paceBurst go at once.
func (x *Exporter) pace(n int) {
	if x.gap <= 0 {
		return
	}
	now := x.now()
	x.next = maxTime(x.next, now.Add(-paceBurst*x.gap))
	due := x.next.Add(time.Duration(n-1) * x.gap)
	if d := due.Sub(now); d > time.Millisecond { // sleep only when well ahead: timer granularity
		x.sleep(d)
	}
	x.next = x.next.Add(time.Duration(n) * x.gap)
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
	err := x.enc.Flush()
	x.tr.flush()
	return err
}

// lose counts n records undelivered for reason r.
func (x *Exporter) lose(r Reason, n uint64) {
	if n > 0 {
		x.stats.undelivered[r].Add(n)
	}
}

// CountQueue makes the records q (the queue in front of the exporter)
// drops count as undelivered, ReasonQueueFull.
func (x *Exporter) CountQueue(q *sink.Queue) { x.queue.Store(q) }

// Close flushes, waits up to Config.Linger for a stream collector to
// acknowledge what was written (ReasonShutdown counts what it did not),
// and closes the connection.
func (x *Exporter) Close() error {
	err := x.enc.Flush()
	x.tr.close()
	x.stats.connected.Store(false)
	return err
}

// Stats returns the counters.
func (x *Exporter) Stats() Stats {
	st := Stats{Records: x.stats.records.Load(), Messages: x.stats.messages.Load(),
		Bytes: x.stats.bytes.Load(), SendErrors: x.stats.errs.Load(),
		Connects: x.stats.connects.Load(), DialErrors: x.stats.dialErrs.Load(), Connected: x.stats.connected.Load(),
		CutStrings: x.stats.cut.Load()}
	for r := range st.Undelivered {
		st.Undelivered[r] = x.stats.undelivered[r].Load()
	}
	if q := x.queue.Load(); q != nil {
		st.Undelivered[ReasonQueueFull] = q.Stats().Dropped
	}
	for _, n := range st.Undelivered {
		st.DroppedRecords += n
	}
	return st
}

// Reasons are the reasons this exporter's transport can have.
func (x *Exporter) Reasons() []Reason {
	if x.udp {
		return udpReasons
	}
	return streamReasons
}
