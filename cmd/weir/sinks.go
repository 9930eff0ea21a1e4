package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"

	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/ipfix"
	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/sink"
	ipfixsink "github.com/weir-dev/weir/internal/sink/ipfix"
	"github.com/weir-dev/weir/internal/store"
)

// sinkOpts are the flags that say where records go (capture and collect
// share them): stdout, the store, IPFIX destinations.
type sinkOpts struct {
	output                          string
	top                             int
	store                           storeOpts
	export                          listFlag
	exportRate                      float64
	exportCA, exportCert, exportKey string
	ipfixPEN                        uint64 // --ipfix-pen: checked to fit 32 bits by open

	st        *store.Store // open store, nil when --data-dir off
	exporters []*ipfixsink.Exporter
	main      sink.Sink // the -o output (table or JSON), nil for none

	enrich enrichOpts // --enrich: records are labelled before the fan-out (sync, queued)

	stderr io.Writer // where exporters say why records are undelivered (nil: os.Stderr)
}

func (o *sinkOpts) flags(fs *flag.FlagSet) {
	o.store.flags(fs)
	fs.Var(&o.export, "export", "also send every record as IPFIX to `url`: ipfix+udp://, ipfix+tcp:// or ipfix+tls://HOST:PORT, options ?mtu=BYTES, "+
		"?biflow=off (two unidirectional records per flow, for GoFlow2 and nfacctd), ?sets=one (one set per message, for vmware/go-ipfix); repeatable")
	fs.Float64Var(&o.exportRate, "export-rate", ipfixsink.DefaultRate, "IPFIX messages per second per UDP --export destination (paced so a burst does not overflow the collector; 0: unpaced)")
	fs.StringVar(&o.exportCA, "export-ca", "", "PEM `file` of the CA that signed ipfix+tls:// collectors' certificates (default: the system roots)")
	fs.StringVar(&o.exportCert, "export-cert", "", "PEM `file` of the client certificate for ipfix+tls:// (mutual TLS; with --export-key)")
	fs.StringVar(&o.exportKey, "export-key", "", "PEM `file` of the client certificate's key")
	fs.Uint64Var(&o.ipfixPEN, "ipfix-pen", 0, "IANA Private Enterprise `number` under which IPFIX carries the workloads, service, rule, conntrack mark and zone "+
		"as enterprise elements (--export sends them, weir collect reads them); 0: not sent, and read from no one. weir has no PEN of its own: "+
		"use your organisation's (RFC 5612's 32473 is for documentation and examples only)")
	fs.StringVar(&o.output, "output", "table", "output `format`: table, json or none")
	fs.StringVar(&o.output, "o", "table", "short for --output")
	fs.IntVar(&o.top, "top", 20, "with --output=table: show the top `n` flows by bytes at the end; 0 prints every record as it is emitted")
}

// open builds the sinks. A usage mistake comes back as errUsage.
func (o *sinkOpts) open(stdout_ io.Writer) error {
	switch o.output {
	case "table":
		o.main = format.NewTable(stdout_, o.top)
	case "json":
		o.main = format.NewJSON(stdout_)
	case "none":
	default:
		return errUsage(fmt.Sprintf("unknown --output %q: use table, json or none", o.output))
	}
	stor, err := o.store.open()
	if err != nil {
		return err
	}
	o.st = stor
	if o.ipfixPEN > math.MaxUint32 || o.ipfixPEN == ipfix.ReversePEN {
		o.close()
		return errUsage(fmt.Sprintf("--ipfix-pen %d: want a Private Enterprise Number below 2^32, not RFC 5103's %d", o.ipfixPEN, ipfix.ReversePEN))
	}
	var tlsCfg *tls.Config
	if o.exportCA != "" || o.exportCert != "" || o.exportKey != "" {
		if tlsCfg, err = ipfixsink.TLSConfig(o.exportCA, o.exportCert, o.exportKey); err != nil {
			o.close()
			return errUsage(fmt.Sprintf("--export-ca/--export-cert/--export-key: %v", err))
		}
	}
	for _, u := range o.export {
		rate := o.exportRate
		if rate == 0 {
			rate = -1 // unpaced
		}
		x, err := ipfixsink.New(ipfixsink.Config{URL: u, Rate: rate, TLS: tlsCfg, PEN: uint32(o.ipfixPEN), Log: o.stderr})
		if err != nil {
			o.close()
			if errors.Is(err, ipfixsink.ErrScheme) {
				return errUsage(fmt.Sprintf("--export: %v", err))
			}
			return fmt.Errorf("--export: %v", err)
		}
		o.exporters = append(o.exporters, x)
	}
	return nil
}

// replayDepth is the queue depth, in batches, of each sink in file replay:
// the queues block there, so a few batches keep every sink busy.
const replayDepth = 16

// storeFault, set only by tests, wraps the store to make it fail or hang.
var storeFault func(sink.Sink) sink.Sink

// queued puts a bounded queue of depth batches, and a goroutine, in front
// of each sink: the -o output, the store (sink "store") and each --export
// destination, so that a slow or failing sink holds up none of the others.
// Live sources (block false) never wait: what a full queue cannot take is
// dropped and counted. File replay (block true) waits for a healthy sink,
// so nothing is dropped, but not for one whose last write failed (a full
// disk must not stop the IPFIX export or the JSON output). After stop is
// closed no queue waits any more (see lifecycle).
func (o *sinkOpts) queued(depth int, block bool, stop <-chan struct{}) (sink.Sink, []*sink.Queue) {
	opts := sink.QueueOptions{Block: block, Stop: stop}
	var qs []*sink.Queue
	if o.main != nil {
		qs = append(qs, sink.NewQueueOpts(o.output, o.main, depth, 1024, opts))
	}
	if o.st != nil {
		var st sink.Sink = o.st
		if storeFault != nil {
			st = storeFault(st)
		}
		qs = append(qs, sink.NewQueueOpts("store", st, depth, 1024, opts))
	}
	for _, x := range o.exporters {
		q := sink.NewQueueOpts("export "+x.URL(), x, depth, 1024, opts)
		x.CountQueue(q) // its drops are the destination's undelivered records too
		qs = append(qs, q)
	}
	all := make(sink.Multi, len(qs))
	for i, q := range qs {
		all[i] = q
	}
	return o.enrich.wrap(all), qs
}

// collectors are the metrics of the store and the exporters.
func (o *sinkOpts) collectors() []metrics.Collector {
	var cs []metrics.Collector
	if o.st != nil {
		cs = append(cs, o.st.Collector())
	}
	if len(o.exporters) > 0 {
		cs = append(cs, ipfixsink.Collector(o.exporters...))
	}
	if o.enrich.e != nil {
		cs = append(cs, o.enrich.e.Collector())
	}
	return cs
}

// close closes what open opened (on an error before the sinks are used).
func (o *sinkOpts) close() {
	if o.main != nil {
		o.main.Close()
	}
	if o.st != nil {
		o.st.Close()
	}
	for _, x := range o.exporters {
		x.Close()
	}
}

// printStats prints the store's and the exporters' counters (after the
// sinks are closed).
func (o *sinkOpts) printStats(w io.Writer) {
	if o.st != nil {
		printStoreStats(w, o.st, o.store.dir)
	}
	for _, x := range o.exporters {
		st := x.Stats()
		fmt.Fprintf(w, "export: %d records in %d IPFIX messages (%s) to %s; %d records undelivered",
			st.Records, st.Messages, format.Bytes(st.Bytes), x.URL(), st.DroppedRecords)
		sep := " ("
		for _, r := range x.Reasons() {
			if n := st.Undelivered[r]; n > 0 {
				fmt.Fprintf(w, "%s%s %d", sep, r, n)
				sep = ", "
			}
		}
		if sep == ", " {
			fmt.Fprint(w, ")")
		}
		fmt.Fprintf(w, ", %d send errors", st.SendErrors)
		if st.Connects+st.DialErrors > 0 {
			fmt.Fprintf(w, ", %d connects, %d failed dials", st.Connects, st.DialErrors)
		}
		fmt.Fprintln(w)
	}
}
