package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/weir-dev/weir/internal/api"
	"github.com/weir-dev/weir/internal/cli"
	"github.com/weir-dev/weir/internal/httpauth"
	"github.com/weir-dev/weir/internal/query"
)

// defaultServeAddr is where 'weir serve' listens unless told otherwise:
// loopback, next to the capture's metrics (9464) and collect's (9465).
const defaultServeAddr = "127.0.0.1:9470"

type serveCmdOpts struct {
	dir, addr, liveURL           string
	ch                           chOpts
	tokenFile, certFile, keyFile string
	maxQueries, queryWorkers     int
	queryTimeout                 time.Duration
}

// runServeCmd is 'weir serve': the web console and HTTP API v1 over a
// flow store, until SIGINT or SIGTERM.
func runServeCmd(args []string, stdout_, stderr io.Writer) int {
	var o serveCmdOpts
	fs := helpFlagSet("serve")
	cli.DataDirVar(fs, &o.dir, "the flow store `dir` to serve ($WEIR_DATA_DIR or ./weir-data)")
	fs.StringVar(&o.addr, "addr", defaultServeAddr, "listen on `host:port` (loopback unless --api-token-file is given)")
	fs.StringVar(&o.liveURL, "live-url", "", "a running capture's live flows (`url`, loopback only; e.g. "+query.DefaultLiveURL+"): enables /api/v1/live and live=true")
	o.ch.flags(fs, "answer from ClickHouse's flows table instead of a store: its HTTP interface, http(s)://`host:port` (docs/fleet.md)")
	fs.StringVar(&o.tokenFile, "api-token-file", "", "bearer token `file` clients must send (required off loopback)")
	fs.StringVar(&o.certFile, "api-tls-cert", "", "TLS certificate `file` (PEM): serve HTTPS")
	fs.StringVar(&o.keyFile, "api-tls-key", "", "TLS private key `file` (PEM)")
	fs.IntVar(&o.maxQueries, "max-queries", api.DefaultMaxQueries, "queries answered at once; more wait up to 10s, then get 429")
	fs.DurationVar(&o.queryTimeout, "query-timeout", api.DefaultQueryTimeout, "time limit of one query (then 504)")
	fs.IntVar(&o.queryWorkers, "query-workers", 0, "goroutines one query decodes blocks on (default: one per CPU)")
	if done, code := parseFlags(fs, args, stdout_, stderr); done {
		return code
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "weir serve: "+format+"\n", a...)
		return code
	}
	if o.maxQueries < 1 || o.queryTimeout <= 0 || o.queryWorkers < 0 {
		return fail(exitUsage, "--max-queries and --query-timeout must be positive, --query-workers 0 or more")
	}
	src, code := o.backend(fs, stderr)
	if code != exitOK {
		return code
	}
	defer src.Close()
	srv, err := api.NewStandalone(api.Config{Backend: src.Backend, MaxQueries: o.maxQueries, QueryTimeout: o.queryTimeout, QueryWorkers: o.queryWorkers, Version: version},
		httpauth.Config{Addr: o.addr, TokenFile: o.tokenFile, CertFile: o.certFile, KeyFile: o.keyFile})
	var le *api.ListenError
	if errors.As(err, &le) {
		return fail(exitUsage, "%v", err)
	} else if err != nil {
		return fail(exitFailure, "%v", err)
	}
	what := "store " + o.dir
	if o.ch.url != "" {
		what = "ClickHouse " + o.ch.url + " database " + o.ch.db
	}
	fmt.Fprintf(stderr, "weir serve: %s\n", srv.Announce(what, o.tokenFile))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := srv.Run(ctx); err != nil {
		return fail(exitFailure, "%v", err)
	}
	return exitOK
}

// backend opens the store read-only, or connects to ClickHouse.
func (o *serveCmdOpts) backend(fs *flag.FlagSet, stderr io.Writer) (*api.Source, int) {
	if o.ch.url != "" && (isSet(fs, "data-dir", "d") || o.liveURL != "") {
		fmt.Fprintln(stderr, "weir serve: --clickhouse answers from ClickHouse: give it without --data-dir and --live-url")
		return nil, exitUsage
	}
	cfg := api.SourceConfig{Dir: o.dir, ClickHouse: o.ch.url, Database: o.ch.db, User: o.ch.user, PasswordFile: o.ch.pass}
	if o.liveURL != "" {
		cfg.Live = api.LiveFromURL(o.liveURL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, err := api.OpenSource(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "weir serve: %v\n", err)
		return nil, exitFailure
	}
	return src, exitOK
}

// chOpts are the flags that point a command at ClickHouse instead of a
// store (serve, query).
type chOpts struct{ url, db, user, pass string }

func (o *chOpts) flags(fs *flag.FlagSet, usage string) {
	fs.StringVar(&o.url, "clickhouse", "", usage)
	fs.StringVar(&o.db, "clickhouse-database", "weir", "the ClickHouse database 'weir clickhouse setup' created")
	fs.StringVar(&o.user, "clickhouse-user", "", "ClickHouse user (default: the server's default user)")
	fs.StringVar(&o.pass, "clickhouse-password-file", "", "`file` holding the ClickHouse user's password")
}
