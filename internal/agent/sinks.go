package agent

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync/atomic"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/ipfix"
	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/sink"
	ipfixsink "github.com/weir-dev/weir/internal/sink/ipfix"
	"github.com/weir-dev/weir/internal/sink/kafka"
	"github.com/weir-dev/weir/internal/store"
)

// Sinks says where records go.
type Sinks struct {
	Format string    // stdout: "table", "json", or "none"/"" for nothing
	Top    int       // table: the top n flows by bytes at the end; 0 prints every record as it comes
	Stdout io.Writer // where Format writes

	// Store is the flow store's configuration; nil: no store.
	Store *store.Config

	// Export are destinations by URL; the scheme picks the sink
	// (exporters below).
	Export                          []string
	ExportRate                      float64 // IPFIX messages per second per UDP destination (0: unpaced)
	ExportCA, ExportCert, ExportKey string  // ipfix+tls:// files
	PEN                             uint64  // IANA Private Enterprise Number of weir's IPFIX elements (0: none)

	// Node names the records that name no node (Record.Node); "": none.
	Node string
	// Enrich labels every record before the fan-out; nil: none.
	Enrich *Enrich

	// Log receives the exporters' and the store's messages (nil: the
	// agent's Log).
	Log io.Writer
	// Extra are more sinks, already open, after the others.
	Extra []Output
	// WrapStore, set by tests, wraps the store to make it fail or hang.
	WrapStore func(sink.Sink) sink.Sink
}

// DefaultExportRate is the IPFIX messages per second per UDP --export
// destination unless told otherwise.
const DefaultExportRate = ipfixsink.DefaultRate

// Output is one sink, named (its queue's name in metrics and --stats).
type Output struct {
	Name       string
	Sink       sink.Sink
	WriteStats func(w io.Writer)   // its --stats lines, after Close (nil: none)
	OnQueue    func(q *sink.Queue) // told the sink's queue (nil: not)
	Collector  metrics.Collector   // its metrics (nil: none)
}

// exporters open the --export destinations by URL scheme, all those of
// one kind at once (one collector per kind). A sink is one package plus
// one line here.
var exporters = []struct {
	schemes []string
	open    func(urls []string, s *Sinks) ([]Output, error)
}{
	{[]string{"ipfix+udp", "ipfix+tcp", "ipfix+tls"}, openIPFIX},
	{[]string{"kafka"}, openKafka},
}

// opened are the sinks of a run.
type opened struct {
	outs  []Output
	store *store.Store
	fmt   *formatSink // the stdout format, nil for none
}

// check finds the mistakes in s that need nothing opened.
func (s *Sinks) check() error {
	switch s.Format {
	case "table", "json", "none", "":
	default:
		return usagef("unknown --output %q: use table, json or none", s.Format)
	}
	if s.PEN > math.MaxUint32 || s.PEN == ipfix.ReversePEN {
		return usagef("--ipfix-pen %d: want a Private Enterprise Number below 2^32, not RFC 5103's %d", s.PEN, ipfix.ReversePEN)
	}
	return nil
}

// open opens every sink; on an error it closes those it opened. Mistakes
// in the configuration are ErrUsage.
func (s *Sinks) open() (*opened, error) {
	o := &opened{}
	switch s.Format {
	case "table":
		o.fmt = &formatSink{Sink: format.NewTable(s.Stdout, s.Top)}
	case "json":
		o.fmt = &formatSink{Sink: format.NewJSON(s.Stdout)}
	}
	exports, err := s.openExporters()
	if err != nil {
		return nil, err
	}
	if o.fmt != nil {
		o.outs = append(o.outs, Output{Name: s.Format, Sink: o.fmt})
	}
	if s.Store != nil {
		st, err := store.Open(*s.Store)
		if errors.Is(err, store.ErrLocked) {
			err = fmt.Errorf("--data-dir %s: another weir capture is writing there; give this one another --data-dir, or 'off'", s.Store.Dir)
		}
		if err != nil {
			closeOutputs(exports)
			return nil, err
		}
		o.store = st
		var sk sink.Sink = st
		if s.WrapStore != nil {
			sk = s.WrapStore(sk)
		}
		dir := s.Store.Dir
		out := Output{Name: "store", Sink: sk, Collector: st.Collector(),
			WriteStats: func(w io.Writer) { writeStoreStats(w, st, dir) }}
		o.outs = append(o.outs, out)
	}
	o.outs = append(append(o.outs, exports...), s.Extra...)
	return o, nil
}

// openExporters opens the --export destinations, kind by kind.
func (s *Sinks) openExporters() ([]Output, error) {
	var all []Output
	left := s.Export
	for _, kind := range exporters {
		var mine, rest []string
		for _, u := range left {
			scheme, _, _ := strings.Cut(u, "://")
			if contains(kind.schemes, scheme) {
				mine = append(mine, u)
			} else {
				rest = append(rest, u)
			}
		}
		left = rest
		if len(mine) == 0 {
			continue
		}
		outs, err := kind.open(mine, s)
		if err != nil {
			closeOutputs(all)
			return nil, err
		}
		all = append(all, outs...)
	}
	if len(left) > 0 {
		closeOutputs(all)
		return nil, usagef("--export %q: want ipfix+udp://, ipfix+tcp://, ipfix+tls:// or kafka:// and HOST:PORT", left[0])
	}
	return all, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// close closes every sink (after an error, before the run).
func (o *opened) close() {
	for _, out := range o.outs {
		out.Sink.Close()
	}
}

// pending are the store's records not yet written out (nil without one).
func (o *opened) pending() []func(func(*flow.Record)) {
	if o.store == nil {
		return nil
	}
	return []func(func(*flow.Record)){o.store.Pending}
}

// openIPFIX opens IPFIX exporters.
func openIPFIX(urls []string, s *Sinks) ([]Output, error) {
	var tlsCfg *tls.Config
	if s.ExportCA != "" || s.ExportCert != "" || s.ExportKey != "" {
		var err error
		if tlsCfg, err = ipfixsink.TLSConfig(s.ExportCA, s.ExportCert, s.ExportKey); err != nil {
			return nil, usagef("--export-ca/--export-cert/--export-key: %v", err)
		}
	}
	rate := s.ExportRate
	if rate == 0 {
		rate = -1 // unpaced
	}
	var outs []Output
	var xs []*ipfixsink.Exporter
	for _, u := range urls {
		x, err := ipfixsink.New(ipfixsink.Config{URL: u, Rate: rate, TLS: tlsCfg, PEN: uint32(s.PEN), Log: s.Log})
		if err != nil {
			closeOutputs(outs)
			if errors.Is(err, ipfixsink.ErrScheme) {
				return nil, usagef("--export: %v", err)
			}
			return nil, fmt.Errorf("--export: %w", err)
		}
		xs = append(xs, x)
		outs = append(outs, Output{Name: "export " + x.URL(), Sink: x, OnQueue: x.CountQueue,
			WriteStats: func(w io.Writer) { writeIPFIXStats(w, x) }})
	}
	outs[0].Collector = ipfixsink.Collector(xs...)
	return outs, nil
}

// openKafka opens Kafka destinations.
func openKafka(urls []string, s *Sinks) ([]Output, error) {
	var outs []Output
	var ks []*kafka.Sink
	for _, u := range urls {
		cfg, err := kafka.ParseURL(u)
		if err != nil {
			closeOutputs(outs)
			return nil, usagef("--export: %v", err)
		}
		k, err := kafka.New(cfg)
		if err != nil {
			closeOutputs(outs)
			return nil, fmt.Errorf("--export: %w", err)
		}
		ks = append(ks, k)
		outs = append(outs, Output{Name: "export " + k.URL(), Sink: k, WriteStats: func(w io.Writer) { writeKafkaStats(w, k) }})
	}
	outs[0].Collector = kafka.Collector(ks...)
	return outs, nil
}

func closeOutputs(outs []Output) {
	for _, o := range outs {
		o.Sink.Close()
	}
}

// formatSink is the stdout format: when the run failed before any record
// came, Close prints nothing (no empty table above the error).
type formatSink struct {
	sink.Sink
	n      atomic.Uint64
	failed atomic.Bool
}

func (f *formatSink) Write(recs []flow.Record) error {
	f.n.Add(uint64(len(recs)))
	return f.Sink.Write(recs)
}

func (f *formatSink) Close() error {
	if f.failed.Load() && f.n.Load() == 0 {
		return nil
	}
	return f.Sink.Close()
}

// nodeSink names the node of records that name none.
type nodeSink struct {
	sink.Sink
	node string
}

func (s nodeSink) Write(recs []flow.Record) error {
	for i := range recs {
		if recs[i].Node == "" {
			recs[i].Node = s.node
		}
	}
	return s.Sink.Write(recs)
}
