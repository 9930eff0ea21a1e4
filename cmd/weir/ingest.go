package main

import (
	"context"
	"io"
	"time"

	"github.com/weir-dev/weir/internal/agent"
	"github.com/weir-dev/weir/internal/ingest"
)

// runIngest is 'weir ingest': Kafka → ClickHouse (internal/ingest).
func runIngest(args []string, stdout, stderr io.Writer) int {
	r := agent.IngestRun{Log: stderr}
	var stats bool
	fs := helpFlagSet("ingest")
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
	fs.IntVar(&r.BatchBytes, "batch-bytes", ingest.DefaultBatchBytes, "or this many bytes (the memory a batch holds; 1 MiB to 4 GiB)")
	fs.DurationVar(&r.BatchDelay, "batch-delay", ingest.DefaultBatchDelay, "or this long after its first row arrived")
	fs.DurationVar(&r.StopTimeout, "stop-timeout", 30*time.Second, "at exit, how long to retry the last batch while ClickHouse is away (what is not inserted stays uncommitted in Kafka)")
	fs.DurationVar(&r.Duration, "duration", 0, "stop after this long (0: run until SIGINT/SIGTERM)")
	fs.BoolVar(&stats, "stats", false, "print counters (rows, inserts, commits, skipped messages by reason, insert errors by kind) to stderr at exit")
	fs.StringVar(&r.HTTP.Addr, "metrics-addr", "off", "serve /metrics at `host:port` ('off' disables); loopback only unless --metrics-public")
	fs.BoolVar(&r.HTTP.Public, "metrics-public", false, "allow --metrics-addr to be a non-loopback address (then --api-token-file is required)")
	fs.StringVar(&r.HTTP.TokenFile, "api-token-file", "", "require the bearer token in this `file` for /metrics off loopback")
	fs.StringVar(&r.HTTP.CertFile, "api-tls-cert", "", "serve /metrics over HTTPS with this PEM certificate `file` (with --api-tls-key)")
	fs.StringVar(&r.HTTP.KeyFile, "api-tls-key", "", "PEM key `file` of --api-tls-cert")
	if _, done, code := parseInterleaved(fs, args, stdout, stderr); done {
		return code
	}
	if stats {
		r.Stats = stderr
	}
	if r.StopTimeout <= 0 || r.Duration < 0 {
		return exitErr(stderr, "ingest", agent.Usagef("--stop-timeout must be positive and --duration not negative"))
	}
	return exitErr(stderr, "ingest", agent.RunIngest(context.Background(), r))
}
