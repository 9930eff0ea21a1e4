// Package ipfixrecv receives IPFIX, NetFlow v9 and NetFlow v5 over UDP,
// and IPFIX over TCP and TLS, decodes it with internal/ipfix and hands the
// flow records to a sink, in batches, like any other source.
//
// Each UDP address is served by several sockets bound with SO_REUSEPORT
// (the kernel hashes an exporter's datagrams to one of them, so its
// templates stay with one decoder); each socket and each stream
// connection has a goroutine and a decoder of its own, so the receive
// path takes no contended lock (a decoder's own mutex is taken by another
// only to evict when the template budget is full). What exporters
// control is bounded: template state by one byte budget shared by every
// decoder (when full, the exporter holding the most gives way) and by
// limits per exporter address, stream connections by a global and a per-source
// bound, an idle timeout and a TLS handshake timeout, interface names
// per exporter, flow times by the receive time.
package ipfixrecv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/internal/ipfix"
	"github.com/weir-dev/weir/internal/sink"
)

// Defaults of Config.
const (
	DefaultListen        = "udp://127.0.0.1:4739"
	DefaultBatch         = 1024
	DefaultFlushInterval = 200 * time.Millisecond
	DefaultReadBuffer    = 8 << 20
	// DefaultMaxConns bounds the stream connections served at once.
	DefaultMaxConns = 1024
	// DefaultMaxConnsPerSource bounds one source address's connections,
	// so one host cannot take every slot.
	DefaultMaxConnsPerSource = 16
	// DefaultHandshakeTimeout bounds a TLS handshake.
	DefaultHandshakeTimeout = 5 * time.Second
	// DefaultIdleConnTimeout closes a stream connection that sent no
	// byte for this long.
	DefaultIdleConnTimeout = 5 * time.Minute
	// DefaultMessageTimeout closes a stream connection whose message is
	// not complete this long after its first byte (a slow client).
	DefaultMessageTimeout = 30 * time.Second
	// DefaultMaxIfaces bounds the distinct interface names the collector
	// passes on; later ones become flow.OtherIface, so hostile exporters
	// cannot make the store open a partition per made-up name.
	DefaultMaxIfaces = 4096
	// DefaultMaxIfacesPerExporter bounds the distinct interface names
	// one exporter address may introduce.
	DefaultMaxIfacesPerExporter = 64
	// DefaultMaxExporters bounds the exporters counted apart (losses,
	// interface names); later ones share OtherExporter's entry.
	DefaultMaxExporters = 1024
	// DefaultMaxClockSkew: flow times further than this from the receive
	// time become the receive time.
	DefaultMaxClockSkew = 24 * time.Hour
)

// OtherExporter is the key under which Stats.LossByExporter counts the
// exporters past Config.MaxExporters.
var OtherExporter = netip.Addr{}

// Config configures a Collector.
type Config struct {
	// Listen lists the addresses: udp://HOST:PORT (IPFIX, NetFlow v9 and
	// v5), tcp://HOST:PORT and tls://HOST:PORT (IPFIX).
	Listen []string
	// Sockets is the number of SO_REUSEPORT sockets per UDP address
	// (default GOMAXPROCS).
	Sockets int
	// ReadBuffer is SO_RCVBUF of each UDP socket (default 8 MiB; raised
	// past net.core.rmem_max when privileged).
	ReadBuffer int
	// TLS is the server configuration of tls:// addresses.
	TLS *tls.Config
	// Batch is the most records handed to the sink at once; a partial
	// batch goes after FlushInterval.
	Batch         int
	FlushInterval time.Duration
	// MaxConns and MaxConnsPerSource bound the stream connections open
	// at once, in all and from one source address (at MaxConns a new
	// connection evicts the one that has waited longest for a complete
	// message); HandshakeTimeout a TLS handshake; IdleConnTimeout a
	// connection without a byte; MessageTimeout a message from its first
	// byte to its last.
	MaxConns          int
	MaxConnsPerSource int
	HandshakeTimeout  time.Duration
	IdleConnTimeout   time.Duration
	MessageTimeout    time.Duration
	// MaxIfaces and MaxIfacesPerExporter bound the distinct interface
	// names passed on, in all and introduced by one exporter address (of
	// the first MaxExporters; later ones only by MaxIfaces).
	MaxIfaces            int
	MaxIfacesPerExporter int
	// MaxExporters bounds the exporter addresses counted apart: losses
	// (later ones count under OtherExporter) and names.
	MaxExporters int
	// TemplateBudget is the bytes of template state all decoders hold
	// together (default ipfix.DefaultBudget), ExporterLimits what one
	// exporter address may hold of it.
	TemplateBudget int64
	ExporterLimits ipfix.ExporterLimits
	// MaxClockSkew: flow times further than this from the receive time
	// become the receive time (default DefaultMaxClockSkew; negative:
	// times are kept as sent).
	MaxClockSkew time.Duration
	// Decoder configures every decoder (template timeout, sessions
	// without data, PEN); its Budget, MaxClockSkew and Stream are set
	// by the collector.
	Decoder ipfix.DecoderConfig
	// Logf says where the collector listens; nil: silent.
	Logf func(format string, args ...any)
	// Status, if set, is a terminal on which Run keeps a one-line
	// summary (records/s, exporter sessions, templates, drops) redrawn
	// every StatusInterval (default 1 s), erased when Run returns. Leave
	// it nil when the output is not a terminal.
	Status         io.Writer
	StatusInterval time.Duration
}

// ErrListen wraps listen address errors.
var ErrListen = errors.New("ipfixrecv: bad listen address")

// Collector receives flow export messages. Create it with New, run it with
// Run.
type Collector struct {
	cfg    Config
	out    sink.Sink
	udp    []*net.UDPConn
	lns    []listener
	budget *ipfix.Budget
	ex     exporters

	mu      sync.Mutex
	workers map[*worker]struct{} // running receivers, for Stats
	retired ipfix.DecodeStats    // decoders of closed connections
	conns   conns
	stats   struct {
		accepted, readErrs, sinkErrs, socketDrops atomic.Uint64
		rejected, rejectedPerSource, idleClosed   atomic.Uint64
		handshakeTimeouts, handshakeFailures      atomic.Uint64
		evicted, msgTimeouts                      atomic.Uint64
		partialMsgs, partialBytes                 atomic.Uint64
	}
}

// listener is a stream listener; tls is set for tls:// addresses.
type listener struct {
	net.Listener
	tls *tls.Config
}

// New opens every listen address (so that Addrs is known before Run) and
// returns the collector.
func New(cfg Config) (*Collector, error) {
	c := newCollector(cfg)
	for _, l := range c.cfg.Listen {
		if err := c.listen(l); err != nil {
			c.closeAll()
			return nil, err
		}
	}
	return c, nil
}

// newCollector returns a collector of cfg (defaults set) that listens
// nowhere yet.
func newCollector(cfg Config) *Collector {
	if len(cfg.Listen) == 0 {
		cfg.Listen = []string{DefaultListen}
	}
	if cfg.Sockets <= 0 {
		cfg.Sockets = runtime.GOMAXPROCS(0)
	}
	cfg.ReadBuffer = or(cfg.ReadBuffer, DefaultReadBuffer)
	cfg.Batch = or(cfg.Batch, DefaultBatch)
	cfg.FlushInterval = or(cfg.FlushInterval, DefaultFlushInterval)
	cfg.StatusInterval = or(cfg.StatusInterval, time.Second)
	cfg.MaxConns = or(cfg.MaxConns, DefaultMaxConns)
	cfg.MaxConnsPerSource = or(cfg.MaxConnsPerSource, DefaultMaxConnsPerSource)
	cfg.HandshakeTimeout = or(cfg.HandshakeTimeout, DefaultHandshakeTimeout)
	cfg.IdleConnTimeout = or(cfg.IdleConnTimeout, DefaultIdleConnTimeout)
	cfg.MessageTimeout = or(cfg.MessageTimeout, DefaultMessageTimeout)
	cfg.MaxIfaces = or(cfg.MaxIfaces, DefaultMaxIfaces)
	cfg.MaxIfacesPerExporter = or(cfg.MaxIfacesPerExporter, DefaultMaxIfacesPerExporter)
	cfg.MaxExporters = or(cfg.MaxExporters, DefaultMaxExporters)
	switch {
	case cfg.MaxClockSkew == 0:
		cfg.MaxClockSkew = DefaultMaxClockSkew
	case cfg.MaxClockSkew < 0:
		cfg.MaxClockSkew = 0 // the decoder's "off"
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	c := &Collector{cfg: cfg, workers: map[*worker]struct{}{},
		budget: ipfix.NewBudget(cfg.TemplateBudget, cfg.ExporterLimits)}
	c.ex.init(cfg.MaxExporters, cfg.MaxIfaces, cfg.MaxIfacesPerExporter)
	c.conns.init(cfg.MaxConns, cfg.MaxConnsPerSource)
	onGap := cfg.Decoder.OnGap
	c.cfg.Decoder.OnGap = func(exporter netip.AddrPort, domain uint32, lost ipfix.Loss) {
		c.ex.gap(exporter.Addr(), lost)
		if onGap != nil {
			onGap(exporter, domain, lost)
		}
	}
	c.cfg.Decoder.Budget, c.cfg.Decoder.MaxClockSkew = c.budget, cfg.MaxClockSkew
	return c
}

// or returns v, or def when v is not positive.
func or[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// listen opens one address.
func (c *Collector) listen(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Port() == "" || strings.Trim(u.Path, "/") != "" {
		return fmt.Errorf("%w %q: want udp://, tcp:// or tls://HOST:PORT", ErrListen, s)
	}
	switch u.Scheme {
	case "udp":
		for i := 0; i < c.cfg.Sockets; i++ {
			host := u.Host
			if i > 0 {
				host = c.udp[len(c.udp)-1].LocalAddr().String() // port 0: the others join the first's port
			}
			conn, err := listenUDP(host, c.cfg.ReadBuffer)
			if err != nil {
				return fmt.Errorf("ipfixrecv: %s: %w", s, err)
			}
			c.udp = append(c.udp, conn)
		}
	case "tcp", "tls":
		if u.Scheme == "tls" && c.cfg.TLS == nil {
			return fmt.Errorf("%w %q: tls:// needs a certificate and key", ErrListen, s)
		}
		l, err := net.Listen("tcp", u.Host)
		if err != nil {
			return fmt.Errorf("ipfixrecv: %s: %w", s, err)
		}
		ln := listener{Listener: l}
		if u.Scheme == "tls" {
			ln.tls = c.cfg.TLS // the handshake runs per connection, under its own timeout
		}
		c.lns = append(c.lns, ln)
	default:
		return fmt.Errorf("%w %q: want udp://, tcp:// or tls://HOST:PORT", ErrListen, s)
	}
	return nil
}

// Addrs returns the bound addresses: each UDP socket, then each listener.
func (c *Collector) Addrs() []net.Addr {
	var as []net.Addr
	for _, u := range c.udp {
		as = append(as, u.LocalAddr())
	}
	for _, l := range c.lns {
		as = append(as, l.Addr())
	}
	return as
}

func (c *Collector) closeAll() {
	for _, u := range c.udp {
		u.Close()
	}
	for _, l := range c.lns {
		l.Close()
	}
}

// Close closes the sockets (Run closes them too; closing again is
// harmless).
func (c *Collector) Close() error {
	c.closeAll()
	return nil
}

// Run receives until ctx is done, writing records to out (safe for
// concurrent use: a sink.Queue is), then closes the sockets and every
// connection (handshakes and reads in progress end with them), hands the
// last partial batches to the sink and returns. It does not close the
// sink.
func (c *Collector) Run(ctx context.Context, out sink.Sink) error {
	c.out = out
	var said []string // UDP addresses have one SO_REUSEPORT socket per CPU: say each once
	for _, a := range c.Addrs() {
		if s := a.Network() + " " + a.String(); !slices.Contains(said, s) {
			said = append(said, s)
			c.cfg.Logf("listening on %s", s)
		}
	}
	var wg sync.WaitGroup
	for _, u := range c.udp {
		wg.Add(1)
		go func() { defer wg.Done(); c.serveUDP(u) }()
	}
	for _, l := range c.lns {
		wg.Add(1)
		go func() { defer wg.Done(); c.accept(ctx, l) }()
	}
	status := make(chan struct{})
	go func() { defer close(status); c.status(ctx) }()
	<-ctx.Done()
	<-status     // the status line is erased before anything else is printed
	c.closeAll() // ends the UDP reads and the accept loops
	wg.Wait()
	c.conns.closeAll() // ends the handshakes and stream reads
	c.conns.wg.Wait()
	return nil
}

// Stats are the collector's counters, summed over its decoders.
type Stats struct {
	ipfix.DecodeStats
	ConnsAccepted uint64 // stream connections accepted
	// ConnsRejected were closed at once: the collector was shutting
	// down; and ConnsRejectedPerSource: their source had
	// MaxConnsPerSource open.
	ConnsRejected, ConnsRejectedPerSource uint64
	ConnsOpen                             int64
	ConnsIdleClosed                       uint64 // closed after IdleConnTimeout without a byte
	// ConnsEvicted were closed to make room for a new connection when
	// MaxConns were open (the one that had waited longest for a complete
	// message); ConnsMessageTimeouts because a message was not complete
	// MessageTimeout after its first byte.
	ConnsEvicted, ConnsMessageTimeouts uint64
	// PartialMessages are messages cut when their connection closed
	// (evicted, timed out, shut down, or the peer left mid-message), and
	// PartialBytes the bytes of them that had come: received, not
	// decoded.
	PartialMessages, PartialBytes uint64
	// HandshakeTimeouts and HandshakeFailures are TLS handshakes that did
	// not finish within HandshakeTimeout, or failed (bad certificate, not
	// TLS): their connections were closed.
	HandshakeTimeouts, HandshakeFailures uint64
	ReadErrors                           uint64 // socket reads that failed (other than at shutdown)
	SinkErrors                           uint64 // batches the sink refused
	// SocketDrops are datagrams the kernel dropped because a UDP
	// socket's receive buffer was full (SO_RXQ_OVFL), counted when the
	// socket's next datagram is read.
	SocketDrops uint64
	// OtherIfaceExporter and OtherIfaceGlobal count records whose
	// interface name became flow.OtherIface: their exporter had
	// introduced MaxIfacesPerExporter names, or MaxIfaces names were in
	// use.
	OtherIfaceExporter, OtherIfaceGlobal uint64
	// LossByExporter splits sequence gaps and losses by exporter address
	// (UDP exporters change ports when they restart; the address stays).
	LossByExporter map[netip.Addr]ExporterLoss
	// BudgetUsed and BudgetLimit are the template state held, in bytes,
	// and its bound.
	BudgetUsed, BudgetLimit int64
}

// Stats returns the counters (the decoders' as of their last flush).
func (c *Collector) Stats() Stats {
	c.mu.Lock()
	st := Stats{DecodeStats: c.retired}
	for w := range c.workers {
		st.DecodeStats.Add(&w.pub)
	}
	c.mu.Unlock()
	st.LossByExporter, st.OtherIfaceExporter, st.OtherIfaceGlobal = c.ex.stats()
	s := &c.stats
	st.ConnsAccepted, st.ConnsRejected, st.ConnsRejectedPerSource = s.accepted.Load(), s.rejected.Load(), s.rejectedPerSource.Load()
	st.ConnsOpen, st.ConnsIdleClosed = c.conns.open(), s.idleClosed.Load()
	st.ConnsEvicted, st.ConnsMessageTimeouts = s.evicted.Load(), s.msgTimeouts.Load()
	st.PartialMessages, st.PartialBytes = s.partialMsgs.Load(), s.partialBytes.Load()
	st.HandshakeTimeouts, st.HandshakeFailures = s.handshakeTimeouts.Load(), s.handshakeFailures.Load()
	st.ReadErrors, st.SinkErrors, st.SocketDrops = s.readErrs.Load(), s.sinkErrs.Load(), s.socketDrops.Load()
	st.BudgetUsed, st.BudgetLimit = c.budget.Used()
	return st
}
