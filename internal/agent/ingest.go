package agent

import (
	"context"
	"errors"
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
	Log                     io.Writer
}

// ingestKafkaOptions are the URL options weir ingest takes: the
// connection's, not the producer's.
var ingestKafkaOptions = []string{"tls", "ca", "cert", "key", "server-name", "sasl", "user", "password-file", "allow-plaintext-sasl", "client-id"}

// RunIngest runs r until SIGINT, SIGTERM or the duration, then inserts and
// commits the batch being filled (retrying up to StopTimeout: what is not
// inserted by then stays uncommitted, for the group to read again).
// Mistakes in r are usage errors.
func RunIngest(ctx context.Context, r IngestRun) error {
	if r.Log == nil {
		r.Log = os.Stderr
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
