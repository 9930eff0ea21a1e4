// Package collector receives IPFIX, NetFlow v9 and NetFlow v5 over UDP,
// and IPFIX over TCP and TLS, decodes it with internal/ipfix and hands the
// flow records to a sink, in batches, like any other source.
//
// Each UDP address is served by several sockets bound with SO_REUSEPORT
// (the kernel hashes an exporter's datagrams to one of them, so its
// templates stay with one decoder); each socket and each stream
// connection has a goroutine and a decoder of its own, so nothing on the
// receive path takes a lock.
package collector

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/internal/flow"
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
	// DefaultMaxIfaces bounds the distinct interface names the collector
	// passes on; later ones become flow.OtherIface, so hostile exporters
	// cannot make the store open a partition per made-up name.
	DefaultMaxIfaces = 4096
	// DefaultMaxExporters bounds the exporters whose sequence gaps are
	// counted apart; gaps of later ones are counted under OtherExporter.
	DefaultMaxExporters = 1024
)

// OtherExporter is the key under which Stats.GapsByExporter counts the
// gaps of exporters past Config.MaxExporters.
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
	MaxConns      int
	MaxIfaces     int
	MaxExporters  int
	Decoder       ipfix.DecoderConfig
}

// ErrListen wraps listen address errors.
var ErrListen = errors.New("collector: bad listen address")

// Collector receives flow export messages. Create it with New, run it with
// Run.
type Collector struct {
	cfg   Config
	out   sink.Sink
	udp   []*net.UDPConn
	lns   []net.Listener
	names ifaceNames

	mu      sync.Mutex
	workers map[*worker]struct{} // running receivers, for Stats
	retired ipfix.DecodeStats    // decoders of closed connections
	conns   atomic.Int64
	stats   struct{ accepted, rejected, readErrs, sinkErrs atomic.Uint64 }
	gaps    map[netip.Addr]uint64 // sequence gaps by exporter address, under mu
}

// New opens every listen address (so that Addrs is known before Run) and
// returns the collector that will write records to out. out must be safe
// for concurrent use (a sink.Queue is).
func New(cfg Config, out sink.Sink) (*Collector, error) {
	if len(cfg.Listen) == 0 {
		cfg.Listen = []string{DefaultListen}
	}
	if cfg.Sockets <= 0 {
		cfg.Sockets = runtime.GOMAXPROCS(0)
	}
	if cfg.ReadBuffer <= 0 {
		cfg.ReadBuffer = DefaultReadBuffer
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = DefaultFlushInterval
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.MaxIfaces <= 0 {
		cfg.MaxIfaces = DefaultMaxIfaces
	}
	if cfg.MaxExporters <= 0 {
		cfg.MaxExporters = DefaultMaxExporters
	}
	c := &Collector{cfg: cfg, out: out, workers: map[*worker]struct{}{}, gaps: map[netip.Addr]uint64{}}
	onGap := cfg.Decoder.OnGap
	c.cfg.Decoder.OnGap = func(exporter netip.AddrPort, domain uint32, lost ipfix.Loss) {
		c.gap(exporter.Addr())
		if onGap != nil {
			onGap(exporter, domain, lost)
		}
	}
	c.names.max = int64(cfg.MaxIfaces)
	for _, l := range cfg.Listen {
		if err := c.listen(l); err != nil {
			c.closeAll()
			return nil, err
		}
	}
	return c, nil
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
				return fmt.Errorf("collector: %s: %w", s, err)
			}
			c.udp = append(c.udp, conn)
		}
	case "tcp", "tls":
		if u.Scheme == "tls" && c.cfg.TLS == nil {
			return fmt.Errorf("%w %q: tls:// needs a certificate and key", ErrListen, s)
		}
		l, err := net.Listen("tcp", u.Host)
		if err != nil {
			return fmt.Errorf("collector: %s: %w", s, err)
		}
		if u.Scheme == "tls" {
			l = tls.NewListener(l, c.cfg.TLS)
		}
		c.lns = append(c.lns, l)
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

// Run receives until ctx is done, then closes the sockets, hands the last
// partial batches to the sink and returns. It does not close the sink.
func (c *Collector) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, u := range c.udp {
		wg.Add(1)
		go func() { defer wg.Done(); c.serveUDP(u) }()
	}
	var conns sync.WaitGroup
	live := &connSet{m: map[net.Conn]struct{}{}}
	for _, l := range c.lns {
		wg.Add(1)
		go func() { defer wg.Done(); c.accept(l, &conns, live) }()
	}
	<-ctx.Done()
	c.closeAll() // ends the UDP reads and the accept loops
	wg.Wait()
	live.closeAll() // ends the stream reads
	conns.Wait()
	return nil
}

// Stats are the collector's counters, summed over its decoders.
type Stats struct {
	ipfix.DecodeStats
	ConnsAccepted, ConnsRejected uint64 // stream connections (rejected: over MaxConns)
	ConnsOpen                    int64
	ReadErrors                   uint64 // socket reads that failed (other than at shutdown)
	SinkErrors                   uint64 // batches the sink refused
	// GapsByExporter splits SequenceGaps by exporter address (UDP
	// exporters change ports when they restart; the address stays).
	GapsByExporter map[netip.Addr]uint64
}

// Stats returns the counters (the decoders' as of their last flush).
func (c *Collector) Stats() Stats {
	c.mu.Lock()
	st := Stats{DecodeStats: c.retired, GapsByExporter: maps.Clone(c.gaps)}
	for w := range c.workers {
		st.DecodeStats.Add(&w.pub)
	}
	c.mu.Unlock()
	st.ConnsAccepted, st.ConnsRejected = c.stats.accepted.Load(), c.stats.rejected.Load()
	st.ConnsOpen, st.ReadErrors, st.SinkErrors = c.conns.Load(), c.stats.readErrs.Load(), c.stats.sinkErrs.Load()
	return st
}

// gap counts a sequence gap of exporter, within the exporter bound.
func (c *Collector) gap(exporter netip.Addr) {
	exporter = exporter.Unmap()
	c.mu.Lock()
	if _, ok := c.gaps[exporter]; !ok && len(c.gaps) >= c.cfg.MaxExporters {
		exporter = OtherExporter
	}
	c.gaps[exporter]++
	c.mu.Unlock()
}

// ifaceNames bounds the distinct interface names passed on.
type ifaceNames struct {
	seen sync.Map // name → struct{}
	n    atomic.Int64
	max  int64
}

// admit returns name, or flow.OtherIface once max names were admitted.
func (f *ifaceNames) admit(name string) string {
	if _, ok := f.seen.Load(name); ok {
		return name
	}
	if f.n.Add(1) > f.max {
		f.n.Add(-1)
		return flow.OtherIface
	}
	if _, dup := f.seen.LoadOrStore(name, struct{}{}); dup {
		f.n.Add(-1)
	}
	return name
}
