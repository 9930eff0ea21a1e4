package agent

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

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/query"
	"github.com/weir-dev/weir/internal/sink"
	ipfixsink "github.com/weir-dev/weir/internal/sink/ipfix"
	"github.com/weir-dev/weir/internal/sink/kafka"
	"github.com/weir-dev/weir/internal/store"
)

// ExportConfig is one 'weir export': stored records, whole, out of the
// store to stdout and the Sinks' Export destinations.
type ExportConfig struct {
	Dir       string   // the flow store
	Condition string   // filter in the query language; "": every record
	Args      []string // the condition as trailing arguments (not with Condition)
	From, To  string   // the records' start span, as query.ParseTime reads it; "": open
	Ifaces    []string // only these interfaces (each may be a comma-separated list); none: all
	Output    string   // stdout: json, csv or none (with Export destinations)
	Batch     int      // records handed to the outputs at once
	Stdout    io.Writer
	// Sinks gives the Export destinations (kafka:// and IPFIX) and their
	// options; the other fields are not used.
	Sinks Sinks
	// Log receives every message, each line as "weir export: ..." (nil:
	// os.Stderr).
	Log io.Writer
}

// errReported is a failure Export has already said on its Log.
var errReported = errors.New("export failed (said above)")

// Export runs an export until every matching record is out, or SIGINT or
// SIGTERM. It says everything on cfg.Log, failures too: the error only
// tells ExitCode how it went.
func Export(ctx context.Context, cfg ExportConfig) error {
	log := cfg.Log
	if log == nil {
		log = os.Stderr
	}
	say := func(format string, a ...any) { fmt.Fprintf(log, "weir export: "+format+"\n", a...) }
	x, out, err := cfg.check()
	if err != nil {
		say("%v", err)
		return err
	}
	ctx, cancel := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer cancel()
	st, err := store.OpenReadOnly(cfg.Dir)
	if errors.Is(err, os.ErrNotExist) {
		say("no flow store at %s: point --data-dir at one", cfg.Dir)
		return errReported
	} else if err != nil {
		say("%v", err)
		return errReported
	}
	defer st.Close()
	cfg.Sinks.Log = log
	dsts, closeAll, err := openExportSinks(ctx, &cfg.Sinks)
	if err != nil {
		say("%v", err)
		return err
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
	var failed error
	if err != nil {
		say("%v (after %d records)", err, res.Records)
		failed = errReported
	}
	if lost > 0 {
		say("%d records were not delivered to the --export destinations (counted above)", lost)
		failed = errReported
	}
	if ss := st.Stats(); res.BlocksCorrupt > 0 || ss.CorruptBlocks > 0 || ss.CorruptIndexes > 0 {
		say("%d damaged blocks were skipped; their records are not in the export ('weir store check' lists them)",
			max(res.BlocksCorrupt, int(ss.CorruptBlocks)))
		for _, w := range ss.Warnings {
			say("%s", w)
		}
	}
	say("%d records from %d of %d blocks (%d skipped by their summaries) in %v",
		res.Records, res.Blocks-res.BlocksSkipped-res.BlocksCorrupt-res.BlocksPruned, res.Blocks, res.BlocksSkipped,
		res.Elapsed.Round(time.Millisecond))
	return failed
}

// check turns the configuration into the store's export and the stdout
// sink (nil with -o none): usage errors.
func (cfg *ExportConfig) check() (*query.Export, sink.Sink, error) {
	x := &query.Export{Batch: cfg.Batch}
	if cfg.Batch <= 0 || cfg.Batch > 1<<20 {
		return nil, nil, usagef("--batch must be within 1..1048576")
	}
	cond := cfg.Condition
	if len(cfg.Args) > 0 {
		if cond != "" {
			return nil, nil, usagef("give the condition either as arguments or with --condition, not both")
		}
		cond = strings.Join(cfg.Args, " ")
	}
	var err error
	if x.Cond, err = query.ParseCondition(cond); err != nil {
		var se *query.SyntaxError
		if errors.As(err, &se) {
			return nil, nil, usagef("condition: %s\n%s", se.Msg, se.Caret())
		}
		return nil, nil, usagef("condition: %v", err)
	}
	now := time.Now()
	for _, t := range []struct {
		arg string
		dst *time.Time
		nm  string
	}{{cfg.From, &x.From, "--from"}, {cfg.To, &x.To, "--to"}} {
		if t.arg == "" {
			continue
		}
		if *t.dst, err = query.ParseTime(t.arg, now); err != nil {
			return nil, nil, usagef("%s: %v", t.nm, err)
		}
	}
	if !x.From.IsZero() && !x.To.IsZero() && !x.From.Before(x.To) {
		return nil, nil, usagef("--from (%s) must be before --to (%s)", x.From.Format(time.RFC3339), x.To.Format(time.RFC3339))
	}
	for _, s := range cfg.Ifaces {
		x.Ifaces = append(x.Ifaces, strings.Split(s, ",")...)
	}
	switch cfg.Output {
	case "json":
		return x, format.NewJSON(cfg.Stdout), nil
	case "csv":
		return x, query.NewRecordCSV(cfg.Stdout), nil
	case "none":
		if len(cfg.Sinks.Export) == 0 {
			return nil, nil, usagef("-o none without --export exports nowhere: give an --export destination, or -o json or csv")
		}
		return x, nil, nil
	}
	return nil, nil, usagef("unknown --output %q: use json, csv or none", cfg.Output)
}

// openExportSinks opens the --export destinations: kafka:// ones here,
// the others (IPFIX) as a capture does. Kafka's sink never blocks and
// drops what its buffer cannot hold, which suits a live source but not a
// back-fill: kafkaBackfill waits for the broker instead. closeAll closes
// them all, prints their counters and returns how many records they did
// not deliver.
func openExportSinks(ctx context.Context, s *Sinks) (dsts []sink.Sink, closeAll func() uint64, err error) {
	var ipfixURLs []string
	var ks []*kafka.Sink
	closeKafka := func() {
		for _, k := range ks {
			k.Close()
		}
	}
	for _, u := range s.Export {
		if !strings.HasPrefix(strings.ToLower(u), "kafka://") {
			ipfixURLs = append(ipfixURLs, u)
			continue
		}
		cfg, err := kafka.ParseURL(u)
		if err != nil {
			closeKafka()
			return nil, nil, usagef("--export: %v", err)
		}
		k, err := kafka.New(cfg)
		if err != nil {
			closeKafka()
			return nil, nil, fmt.Errorf("--export %s: %w", u, err)
		}
		ks = append(ks, k)
		dsts = append(dsts, &kafkaBackfill{ctx: ctx, k: k, every: max(1, min(cfg.BufferRecords, cfg.BufferBytes>>10)/4)})
	}
	var outs []Output
	if len(ipfixURLs) > 0 {
		as := *s
		as.Export = ipfixURLs
		if outs, err = as.openExporters(); err != nil {
			closeKafka()
			return nil, nil, err
		}
	}
	for _, out := range outs {
		dsts = append(dsts, out.Sink)
	}
	return dsts, func() uint64 { return closeExports(ks, outs, s.Log) }, nil
}

// closeExports flushes and closes the export's sinks, prints their
// counters and returns the records they did not deliver.
func closeExports(ks []*kafka.Sink, outs []Output, log io.Writer) (lost uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, k := range ks {
		if err := k.Flush(ctx); err != nil {
			fmt.Fprintf(log, "weir export: %s: %v\n", k.URL(), err)
		}
	}
	for _, k := range ks {
		k.Close()
	}
	for _, k := range ks {
		s := k.Stats()
		var dropped uint64
		for _, n := range s.Dropped {
			dropped += n
		}
		fmt.Fprintf(log, "export: %d records to %s; %d undelivered\n", s.Records, k.URL(), dropped)
		lost += dropped
	}
	for _, out := range outs {
		out.Sink.Close()
		if out.WriteStats != nil {
			out.WriteStats(log)
		}
		if x, ok := out.Sink.(*ipfixsink.Exporter); ok {
			lost += x.Stats().DroppedRecords
		}
	}
	return lost
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

func (b *kafkaBackfill) Close() error { return nil } // closeExports closes the sink
