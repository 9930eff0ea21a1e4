// Package ipfix is the IPFIX exporter sink: it encodes records with
// internal/ipfix and sends the messages to a collector over UDP, paced so
// that a burst of records does not overflow the collector's socket.
package ipfix

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/ipfix"
)

// DefaultRate is the default pace in messages per second: about 40,000
// records/s of 1,400-byte messages, well within what nfcapd drains from a
// default socket buffer.
const DefaultRate = 2000

// Config configures an Exporter.
type Config struct {
	URL    string  // ipfix+udp://HOST:PORT
	MTU    int     // largest message (default ipfix.DefaultMTU)
	Rate   float64 // messages per second (0: DefaultRate; <0: unpaced)
	Domain uint32  // observation domain id
}

// Stats are an Exporter's counters.
type Stats struct {
	Records, Messages, Bytes uint64
	SendErrors               uint64 // messages the socket refused (collector down, buffer full)
}

// Exporter is a sink.Sink sending IPFIX over UDP. Write blocks while it
// paces; behind a sink.Queue capture never waits for it.
type Exporter struct {
	conn  *net.UDPConn
	enc   *ipfix.Encoder
	gap   time.Duration // between messages at the configured rate
	next  time.Time     // earliest time for the next message
	sleep func(time.Duration)
	now   func() time.Time
	stats struct{ records, messages, bytes, errs atomic.Uint64 }
}

// ErrScheme is returned for export URLs weir cannot send to yet.
var ErrScheme = errors.New("ipfix: unsupported export URL")

// New dials the collector (UDP: no packet is sent until records come).
func New(cfg Config) (*Exporter, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%w %q: want ipfix+udp://HOST:PORT", ErrScheme, cfg.URL)
	}
	if u.Scheme != "ipfix+udp" {
		return nil, fmt.Errorf("%w %q: only ipfix+udp:// is supported so far", ErrScheme, cfg.URL)
	}
	if u.Port() == "" || strings.Trim(u.Path, "/") != "" {
		return nil, fmt.Errorf("%w %q: want ipfix+udp://HOST:PORT", ErrScheme, cfg.URL)
	}
	raddr, err := net.ResolveUDPAddr("udp", u.Host)
	if err != nil {
		return nil, fmt.Errorf("ipfix: %s: %w", cfg.URL, err)
	}
	conn, err := net.DialUDP("udp", nil, raddr)
	if err != nil {
		return nil, fmt.Errorf("ipfix: %s: %w", cfg.URL, err)
	}
	x := &Exporter{conn: conn, sleep: time.Sleep, now: time.Now}
	switch {
	case cfg.Rate == 0:
		x.gap = time.Duration(float64(time.Second) / DefaultRate)
	case cfg.Rate > 0:
		x.gap = time.Duration(float64(time.Second) / cfg.Rate)
	}
	x.enc, err = ipfix.NewEncoder(ipfix.Config{Domain: cfg.Domain, MTU: cfg.MTU}, x.send)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return x, nil
}

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
	if _, err := x.conn.Write(msg); err != nil {
		x.stats.errs.Add(1)
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
	for i := range recs {
		if err := x.enc.Add(&recs[i]); err != nil {
			return err
		}
	}
	x.stats.records.Add(uint64(len(recs)))
	return x.enc.Flush()
}

// Close flushes and closes the socket.
func (x *Exporter) Close() error {
	return errors.Join(x.enc.Flush(), x.conn.Close())
}

// Stats returns the counters.
func (x *Exporter) Stats() Stats {
	return Stats{Records: x.stats.records.Load(), Messages: x.stats.messages.Load(),
		Bytes: x.stats.bytes.Load(), SendErrors: x.stats.errs.Load()}
}
