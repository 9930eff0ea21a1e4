package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/weir-dev/weir/internal/api"
	"github.com/weir-dev/weir/internal/cli"
	"github.com/weir-dev/weir/internal/query"
)

type queryOpts struct {
	args                 query.Args
	dir, output, liveURL string
	liveToken, liveCA    string
	sel                  cli.Selection
	list, live           bool
	ch                   chOpts
	auth                 query.LiveAuth
}

func (o *queryOpts) flagSet() *flag.FlagSet {
	fs := helpFlagSet("query")
	a := &o.args
	cli.DataDirVar(fs, &o.dir, "the flow store `dir` to read (default $WEIR_DATA_DIR or ./weir-data)")
	o.sel.Flags(fs, &a.From, &a.To)
	fs.IntVar(&a.Limit, "limit", 10, "show the top `n` groups (per time bin when grouping by time); 0 shows all")
	fs.IntVar(&a.Limit, "n", 10, "short for --limit")
	fs.StringVar(&a.Sort, "sort", "bytes", "rank by `metric`: bytes, packets or flows, optionally :in, :out or :sum (bytes:in), or drop_packets or drop_bytes")
	fs.StringVar(&a.Sort, "s", "bytes", "short for --sort")
	fs.BoolVar(&a.Ascending, "ascending", false, "smallest first")
	fs.DurationVar(&a.Resolution, "resolution", 0, "time bin width; implies grouping by time (default 5m when grouping by time)")
	fs.StringVar(&o.output, "output", "table", "output `format`: table, json or csv")
	fs.StringVar(&o.output, "o", "table", "short for --output")
	fs.BoolVar(&o.list, "list", false, "list the stored interfaces with their time spans, records, size and nodes")
	fs.BoolVar(&o.live, "live", false, "add what a running capture has not written out yet: flows in its tables and records awaiting the next writeout (from --live-url)")
	fs.StringVar(&o.liveURL, "live-url", query.DefaultLiveURL, "where the running capture serves its live flows (loopback only; https:// when it has --api-tls-cert)")
	fs.StringVar(&o.liveToken, "api-token-file", "", "with --live: send the bearer token in this `file` (the capture's --api-token-file)")
	fs.StringVar(&o.liveCA, "api-ca", "", "with --live and an https --live-url: trust the CA certificates in this PEM `file` (default: the system roots)")
	fs.IntVar(&a.Workers, "workers", 0, "goroutines decoding blocks (default: one per CPU)")
	o.ch.flags(fs, "answer from ClickHouse's flows table instead of a store: its HTTP interface, http(s)://`host:port` (docs/fleet.md)")
	return fs
}

func runQuery(args []string, stdout, stderr io.Writer) int {
	var o queryOpts
	fs := o.flagSet()
	pos, done, code := parseInterleaved(fs, args, stdout, stderr)
	if done {
		return code
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "weir query: "+format+"\n", a...)
		return code
	}
	format, q, err := o.check(fs, pos)
	if err != nil {
		return syntaxFail(stderr, err)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	src, err := api.OpenSource(ctx, api.SourceConfig{Dir: o.dir, Live: query.LiveFetcher(o.liveURL, o.auth), // its blocks and the live flows are taken at once
		ClickHouse: o.ch.url, Database: o.ch.db, User: o.ch.user, PasswordFile: o.ch.pass})
	if err != nil {
		return fail(exitFailure, "%v", err)
	}
	defer src.Close()
	if o.list {
		err = src.List(ctx, o.sel.Ifaces, stdout, format)
	} else {
		var finish func()
		q.Progress, finish = cli.LazyProgress(progressOut, "blocks")
		err = src.Answer(ctx, q, o.live, stdout, format, finish)
	}
	if err != nil {
		return fail(exitFailure, "%v", err)
	}
	src.Warn(stderr, "weir query: ", o.list)
	return exitOK
}

// check parses the command line into a query (nil with --list).
func (o *queryOpts) check(fs *flag.FlagSet, pos []string) (query.Format, *query.Query, error) {
	format, err := query.ParseFormat(o.output)
	switch {
	case err != nil:
		return 0, nil, err
	case !o.live && (o.liveToken != "" || o.liveCA != ""):
		return 0, nil, errors.New("--api-token-file and --api-ca go with --live")
	case o.ch.url != "" && (o.live || isSet(fs, "data-dir", "d")):
		return 0, nil, errors.New("--clickhouse answers from ClickHouse: give it without --data-dir and --live")
	case o.list && (len(pos) > 0 || o.sel.Condition != ""):
		return 0, nil, errors.New("--list takes no group-by or condition")
	case o.list:
		return format, nil, nil
	case len(pos) > 1 && o.sel.Condition != "":
		return 0, nil, errors.New("give the condition either as arguments or with --condition, not both")
	}
	o.args.Condition = []string{o.sel.Condition}
	if len(pos) > 0 {
		o.args.Group = pos[0]
	}
	if len(pos) > 1 {
		o.args.Condition = pos[1:]
	}
	o.args.Ifaces = o.sel.Ifaces
	q, err := o.args.Build(time.Now())
	if err == nil {
		o.auth, err = query.LoadLiveAuth(o.liveToken, o.liveCA)
	}
	return format, q, err
}

// syntaxFail prints a mistake on the command line, with a caret under a
// query-string mistake.
func syntaxFail(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "weir query: %s\n", query.Describe(err))
	return exitUsage
}

// isSet reports whether one of the flags names was given.
var isSet = cli.IsSet
