package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/weir-dev/weir/internal/agent"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/query"
	"github.com/weir-dev/weir/internal/sink"
	ipfixsink "github.com/weir-dev/weir/internal/sink/ipfix"
	"github.com/weir-dev/weir/internal/sink/kafka"
	"github.com/weir-dev/weir/internal/store"
)

const exportExamples = `  # Every stored record of the last day as JSON lines
  weir export -f -24h > flows.jsonl

  # One node's HTTPS records of one hour as CSV
  weir export -f 2026-01-02T10:00:00Z -t 2026-01-02T11:00:00Z -o csv 'node = web-1 and dport = 443'

  # Back-fill ClickHouse: every stored record into the Kafka topic its
  # Kafka engine reads (weir clickhouse setup), nothing on stdout
  weir export -o none --export kafka://127.0.0.1:9092/weir-flows

  # Replay stored records to an IPFIX collector
  weir export -o none --export ipfix+tcp://collector.example:4739 'iface = eth0'
`

// runExport is 'weir export': stored records, whole, out of the store.
func runExport(args []string, stdout_, stderr io.Writer) int {
	var (
		dir, cond, from, to, output string
		ifaces                      listFlag
		sinks                       sinkOpts
		batch                       int
	)
	fs := newFlagSet("export", "weir export [flags] [CONDITION...]",
		`Stream stored flow records out of the store, every record whole (every
field the store keeps: docs/record.md), as JSON lines or CSV on stdout,
or to --export destinations (Kafka, IPFIX): the way to back-fill
ClickHouse from an embedded store or to hand records to other tools.
Nothing is grouped or merged: each stored record is one exported record.

CONDITION (the remaining arguments, or --condition) is a filter in the
language of 'weir query' (see 'weir query --help'), e.g.
  node = web-1 and dport = 443 and not snet 10.0.0.0/8
A record is exported when its start lies in [--from, --to). Records come
block by block (per interface and day, each block by start time), not in
one global time order. Memory stays at one block and one batch whatever
the store's size. Damaged blocks are left out and said on stderr.`, exportExamples)
	fs.StringVar(&dir, "data-dir", defaultDataDir(), "the flow store to read (default $WEIR_DATA_DIR or ./weir-data)")
	fs.StringVar(&dir, "d", defaultDataDir(), "short for --data-dir")
	fs.Var(&ifaces, "iface", "only these interfaces (comma-separated or repeated; default all)")
	fs.Var(&ifaces, "i", "short for --iface")
	fs.StringVar(&cond, "condition", "", "filter `expression` (instead of trailing arguments)")
	fs.StringVar(&cond, "c", "", "short for --condition")
	fs.StringVar(&from, "from", "", "start `time`: RFC 3339, a date, Unix seconds, or relative (-24h, -7d); default: everything stored")
	fs.StringVar(&from, "f", "", "short for --from")
	fs.StringVar(&to, "to", "", "end `time` (exclusive), same forms; default: now and beyond")
	fs.StringVar(&to, "t", "", "short for --to")
	fs.StringVar(&output, "output", "json", "stdout `format`: json (JSON lines), csv, or none (with --export)")
	fs.StringVar(&output, "o", "json", "short for --output")
	fs.IntVar(&batch, "batch", query.DefaultExportBatch, "records handed to the outputs at once")
	fs.Var(&sinks.export, "export", "send the records to `url`: kafka://BROKER[,BROKER…]/TOPIC[?options] (docs/fleet.md), "+
		"or ipfix+udp://, ipfix+tcp://, ipfix+tls://HOST:PORT[?options] as 'weir capture --export'; repeatable")
	fs.Float64Var(&sinks.exportRate, "export-rate", ipfixsink.DefaultRate, "IPFIX messages per second per UDP destination (0: unpaced)")
	fs.StringVar(&sinks.exportCA, "export-ca", "", "PEM `file` of the CA that signed ipfix+tls:// collectors' certificates (default: the system roots)")
	fs.StringVar(&sinks.exportCert, "export-cert", "", "PEM `file` of the client certificate for ipfix+tls:// (mutual TLS; with --export-key)")
	fs.StringVar(&sinks.exportKey, "export-key", "", "PEM `file` of the client certificate's key")
	fs.Uint64Var(&sinks.ipfixPEN, "ipfix-pen", 0, "IANA Private Enterprise `number` under which IPFIX carries weir's enterprise elements (as 'weir capture --ipfix-pen'); 0: not sent")
	pos, done, code := parseInterleaved(fs, args, stdout_, stderr)
	if done {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "weir export: "+format+"\n", a...)
		return exitUsage
	}
	x := &query.Export{Batch: batch}
	if batch <= 0 || batch > 1<<20 {
		return fail("--batch must be within 1..1048576")
	}
	condText := cond
	if len(pos) > 0 {
		if condText != "" {
			return fail("give the condition either as arguments or with --condition, not both")
		}
		condText = strings.Join(pos, " ")
	}
	var err error
	if x.Cond, err = query.ParseCondition(condText); err != nil {
		var se *query.SyntaxError
		if errors.As(err, &se) {
			return fail("condition: %s\n%s", se.Msg, se.Caret())
		}
		return fail("condition: %v", err)
	}
	now := time.Now()
	for _, t := range []struct {
		arg string
		dst *time.Time
		nm  string
	}{{from, &x.From, "--from"}, {to, &x.To, "--to"}} {
		if t.arg == "" {
			continue
		}
		if *t.dst, err = query.ParseTime(t.arg, now); err != nil {
			return fail("%s: %v", t.nm, err)
		}
	}
	if !x.From.IsZero() && !x.To.IsZero() && !x.From.Before(x.To) {
		return fail("--from (%s) must be before --to (%s)", x.From.Format(time.RFC3339), x.To.Format(time.RFC3339))
	}
	for _, s := range ifaces {
		x.Ifaces = append(x.Ifaces, strings.Split(s, ",")...)
	}
	var out sink.Sink
	switch output {
	case "json":
		out = format.NewJSON(stdout_)
	case "csv":
		out = query.NewRecordCSV(stdout_)
	case "none":
		if len(sinks.export) == 0 {
			return fail("-o none without --export exports nowhere: give an --export destination, or -o json or csv")
		}
	default:
		return fail("unknown --output %q: use json, csv or none", output)
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	st, err := store.OpenReadOnly(dir)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stderr, "weir export: no flow store at %s: point --data-dir at one\n", dir)
		return exitFailure
	} else if err != nil {
		fmt.Fprintf(stderr, "weir export: %v\n", err)
		return exitFailure
	}
	defer st.Close()
	dsts, closeAll, code := openExportSinks(ctx, &sinks, stderr)
	if code != exitOK {
		return code
	}
	if out != nil {
		dsts = append(dsts, out)
	}
	res, err := query.ExportRecords(ctx, st, x, sink.Multi(dsts))
	if out != nil {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("%w: %w", query.ErrExportSink, cerr)
		}
	}
	lost := closeAll()
	code = exitOK
	if err != nil {
		fmt.Fprintf(stderr, "weir export: %v (after %d records)\n", err, res.Records)
		code = exitFailure
	}
	if lost > 0 {
		fmt.Fprintf(stderr, "weir export: %d records were not delivered to the --export destinations (counted above)\n", lost)
		code = exitFailure
	}
	if ss := st.Stats(); res.BlocksCorrupt > 0 || ss.CorruptBlocks > 0 || ss.CorruptIndexes > 0 {
		fmt.Fprintf(stderr, "weir export: %d damaged blocks were skipped; their records are not in the export ('weir store check' lists them)\n",
			max(res.BlocksCorrupt, int(ss.CorruptBlocks)))
		for _, w := range ss.Warnings {
			fmt.Fprintf(stderr, "weir export: %s\n", w)
		}
	}
	fmt.Fprintf(stderr, "weir export: %d records from %d of %d blocks (%d skipped by their summaries) in %v\n",
		res.Records, res.Blocks-res.BlocksSkipped-res.BlocksCorrupt-res.BlocksPruned, res.Blocks, res.BlocksSkipped,
		res.Elapsed.Round(time.Millisecond))
	return code
}

// openExportSinks opens the --export destinations: kafka:// ones here,
// the others (IPFIX) through the agent's exporters as capture does. Kafka's sink
// never blocks and drops what its buffer cannot hold, which suits a live
// source but not a back-fill: kafkaBackfill waits for the broker instead.
// closeAll closes them all, prints their counters and returns how many
// records they did not deliver.
func openExportSinks(ctx context.Context, o *sinkOpts, stderr io.Writer) (dsts []sink.Sink, closeAll func() uint64, code int) {
	var ipfixURLs listFlag
	var ks []*kafka.Sink
	closeKafka := func() {
		for _, k := range ks {
			k.Close()
		}
	}
	for _, u := range o.export {
		if !strings.HasPrefix(strings.ToLower(u), "kafka://") {
			ipfixURLs = append(ipfixURLs, u)
			continue
		}
		cfg, err := kafka.ParseURL(u)
		if err != nil {
			closeKafka()
			fmt.Fprintf(stderr, "weir export: --export: %v\n", err)
			return nil, nil, exitUsage
		}
		k, err := kafka.New(cfg)
		if err != nil {
			closeKafka()
			fmt.Fprintf(stderr, "weir export: --export %s: %v\n", u, err)
			return nil, nil, exitFailure
		}
		ks = append(ks, k)
		dsts = append(dsts, &kafkaBackfill{ctx: ctx, k: k, every: max(1, min(cfg.BufferRecords, cfg.BufferBytes>>10)/4)})
	}
	var outs []agent.Output
	if len(ipfixURLs) > 0 {
		as := agent.Sinks{Export: ipfixURLs, ExportRate: o.exportRate, ExportCA: o.exportCA,
			ExportCert: o.exportCert, ExportKey: o.exportKey, PEN: o.ipfixPEN, Log: stderr}
		var err error
		if outs, err = as.OpenExports(); err != nil {
			closeKafka()
			fmt.Fprintf(stderr, "weir export: %v\n", err)
			if errors.Is(err, agent.ErrUsage) {
				return nil, nil, exitUsage
			}
			return nil, nil, exitFailure
		}
	}
	for _, out := range outs {
		dsts = append(dsts, out.Sink)
	}
	closeAll = func() (lost uint64) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, k := range ks {
			if err := k.Flush(ctx); err != nil {
				fmt.Fprintf(stderr, "weir export: %s: %v\n", k.URL(), err)
			}
		}
		closeKafka()
		for _, k := range ks {
			s := k.Stats()
			var dropped uint64
			for _, n := range s.Dropped {
				dropped += n
			}
			fmt.Fprintf(stderr, "export: %d records to %s; %d undelivered\n", s.Records, k.URL(), dropped)
			lost += dropped
		}
		for _, out := range outs {
			out.Sink.Close()
			if out.WriteStats != nil {
				out.WriteStats(stderr)
			}
			if x, ok := out.Sink.(*ipfixsink.Exporter); ok {
				lost += x.Stats().DroppedRecords
			}
		}
		return lost
	}
	return dsts, closeAll, exitOK
}

// kafkaBackfill hands records to a Kafka sink and, every so many, waits
// until the broker has taken all of them, so the sink's bounded buffer
// never fills: an export waits for a slow broker rather than drop.
type kafkaBackfill struct {
	ctx     context.Context // the export's: an interrupt stops the wait
	k       *kafka.Sink
	every   int // records between waits: a quarter of the buffer
	pending int
}

func (b *kafkaBackfill) Write(recs []flow.Record) error {
	if err := b.k.Write(recs); err != nil {
		return err
	}
	if b.pending += len(recs); b.pending >= b.every {
		b.pending = 0
		return b.k.Flush(b.ctx)
	}
	return nil
}

func (b *kafkaBackfill) Close() error { return nil } // closeAll closes the sink
