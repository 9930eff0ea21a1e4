package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/weir-dev/weir/internal/clickhouse"
	"github.com/weir-dev/weir/internal/ingest"
	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/sink/kafka"
)

// IngestRun is one 'weir ingest': the consumer group from Kafka into
// ClickHouse (internal/ingest), with the agent's signals, duration,
// metrics listener and --stats.
type IngestRun struct {
	Brokers, Topic, Group string
	// KafkaOptions are a kafka:// URL's connection options (tls=1&ca=…,
	// sasl=…&user=…&password-file=…, client-id=…), without the "?".
	KafkaOptions            string
	URL, User, PasswordFile string // ClickHouse's HTTP interface and credentials
	Database, Table         string
	BatchRows, BatchBytes   int
	BatchDelay              time.Duration
	StopTimeout             time.Duration // how long exit retries the last batch
	Duration                time.Duration // stop after this long (0: at SIGINT/SIGTERM)
	HTTP                    HTTP
	Stats                   io.Writer // --stats: the counters at exit; nil: none
	WantStats               bool      // --stats was given (the command sets Stats)
	Log                     io.Writer
}

// ingestKafkaOptions are the URL options weir ingest takes: the
// connection's, not the producer's.
var ingestKafkaOptions = []string{"tls", "ca", "cert", "key", "server-name", "sasl", "user", "password-file", "allow-plaintext-sasl", "client-id"}

// Flags registers weir ingest's flags on fs, into r.
func (r *IngestRun) Flags(fs *flag.FlagSet) {
	fs.StringVar(&r.Brokers, "kafka", "", "Kafka brokers, HOST:PORT[,HOST:PORT...]")
	fs.StringVar(&r.Topic, "topic", "weir-flows", "the topic the agents export to (--export kafka://BROKERS/TOPIC)")
	fs.StringVar(&r.Group, "group", ingest.DefaultGroup, "Kafka consumer group: every weir ingest of a group shares the topic's partitions")
	fs.StringVar(&r.KafkaOptions, "kafka-options", "", "the broker connection's kafka:// URL options: tls=1&ca=FILE&cert=FILE&key=FILE&server-name=NAME, "+
		"sasl=plain|scram-sha-256|scram-sha-512&user=NAME&password-file=FILE, client-id=NAME")
	fs.StringVar(&r.URL, "clickhouse", "", "ClickHouse's HTTP interface, http://HOST:PORT or https://HOST:PORT")
	fs.StringVar(&r.User, "user", "", "ClickHouse user (default: the server's default user)")
	fs.StringVar(&r.PasswordFile, "password-file", "", "file holding the ClickHouse user's password")
	fs.StringVar(&r.Database, "database", "weir", "database of 'weir clickhouse setup'")
	fs.StringVar(&r.Table, "table", "flows_input", "table the rows are inserted into (its views fill flows and the rollups)")
	fs.IntVar(&r.BatchRows, "batch-rows", ingest.DefaultBatchRows, "insert when a batch holds this many rows")
	fs.IntVar(&r.BatchBytes, "batch-bytes", ingest.DefaultBatchBytes, "or this many bytes (the memory a batch holds; 1 MiB to 1 GiB)")
	fs.DurationVar(&r.BatchDelay, "batch-delay", ingest.DefaultBatchDelay, "or this long after its first row arrived")
	fs.DurationVar(&r.StopTimeout, "stop-timeout", 30*time.Second, "at exit, how long to retry the last batch while ClickHouse is away (what is not inserted stays uncommitted in Kafka)")
	fs.DurationVar(&r.Duration, "duration", 0, "stop after this long (0: run until SIGINT/SIGTERM)")
	fs.BoolVar(&r.WantStats, "stats", false, "print counters (rows, inserts, commits, skipped messages by reason, replayed messages skipped, insert errors by kind) to stderr at exit")
	fs.StringVar(&r.HTTP.Addr, "metrics-addr", "off", "serve /metrics at `host:port` ('off' disables); loopback only unless --metrics-public")
	fs.BoolVar(&r.HTTP.Public, "metrics-public", false, "allow --metrics-addr to be a non-loopback address (then --api-token-file is required)")
	fs.StringVar(&r.HTTP.TokenFile, "api-token-file", "", "require the bearer token in this `file` for /metrics off loopback")
	fs.StringVar(&r.HTTP.CertFile, "api-tls-cert", "", "serve /metrics over HTTPS with this PEM certificate `file` (with --api-tls-key)")
	fs.StringVar(&r.HTTP.KeyFile, "api-tls-key", "", "PEM key `file` of --api-tls-cert")
}

// RunIngest runs r until SIGINT, SIGTERM or the duration, then inserts and
// commits the batch being filled (retrying up to StopTimeout: what is not
// inserted by then stays uncommitted, for the group to read again).
// Mistakes in r are usage errors.
func RunIngest(ctx context.Context, r IngestRun) error {
	if r.Log == nil {
		r.Log = os.Stderr
	}
	if r.WantStats && r.Stats == nil {
		r.Stats = r.Log
	}
	if r.StopTimeout <= 0 || r.Duration < 0 {
		return usagef("--stop-timeout must be positive and --duration not negative")
	}
	if r.URL == "" {
		return usagef("--clickhouse is required (ClickHouse's HTTP interface, e.g. http://127.0.0.1:8123)")
	}
	if r.Brokers == "" {
		return usagef("--kafka is required (the brokers, HOST:PORT[,HOST:PORT...])")
	}
	for kv := range strings.SplitSeq(r.KafkaOptions, "&") {
		if k, _, _ := strings.Cut(kv, "="); kv != "" && !slices.Contains(ingestKafkaOptions, k) {
			return usagef("--kafka-options: %q is not a connection option; weir ingest takes %s", k, strings.Join(ingestKafkaOptions, ", "))
		}
	}
	u := "kafka://" + r.Brokers + "/" + r.Topic
	if r.KafkaOptions != "" {
		u += "?" + r.KafkaOptions
	}
	kc, err := kafka.ParseURL(u)
	if err != nil {
		return usagef("--kafka/--topic/--kafka-options: %v", err)
	}
	conn, err := clickhouse.NewHTTP(r.URL, r.User, r.PasswordFile)
	if err != nil {
		return usagef("%v", err)
	}
	in, err := ingest.New(ingest.Config{Kafka: kc, Group: r.Group, ClickHouse: conn, URL: r.URL, Database: r.Database, Table: r.Table,
		BatchRows: r.BatchRows, BatchBytes: r.BatchBytes, BatchDelay: r.BatchDelay, Log: r.Log})
	if errors.Is(err, ingest.ErrConfig) {
		return usagef("%v", err)
	} else if err != nil {
		return err
	}
	life := newLifecycle(ctx, r.Duration)
	defer life.Close()
	ln, err := r.HTTP.listen()
	if err != nil {
		return err
	}
	if ln != nil {
		reg := metrics.NewRegistry()
		for _, c := range []metrics.Collector{metrics.NewGoCollector(), metrics.NewProcessCollector(), in.Collector()} {
			if err := reg.Register(c); err != nil {
				closeListener(ln)
				return usagef("metrics: %v", err)
			}
		}
		srv, err := ln.serve(reg)
		if err != nil {
			closeListener(ln)
			return err
		}
		defer srv.Close()
	}
	fmt.Fprintf(r.Log, "weir ingest: %s from %s as group %s into %s (%s.%s)\n", kc.Topic, strings.Join(kc.Brokers, ","), groupOr(r.Group), r.URL,
		orDefault(r.Database, "weir"), orDefault(r.Table, clickhouse.TableInput))
	in.Start(context.WithoutCancel(ctx))
	<-life.ctx.Done()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.StopTimeout)
	defer cancel()
	stopErr := in.Stop(sctx)
	if r.Stats != nil {
		in.WriteStats(r.Stats)
	}
	return stopErr
}

func groupOr(g string) string { return orDefault(g, ingest.DefaultGroup) }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
