package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/weir-dev/weir/internal/clickhouse"
	"github.com/weir-dev/weir/internal/sink/kafka"
)

func runClickhouseSetup(args []string, stdout, stderr io.Writer) int {
	var (
		url, user, pwFile, brokers, topic, group, db, retention string
		consumers, partitions, replication                      int
	)
	fs := helpFlagSet("clickhouse setup")
	fs.StringVar(&url, "url", "", "ClickHouse's HTTP interface, http://HOST:PORT or https://HOST:PORT")
	fs.StringVar(&user, "user", "", "ClickHouse user (default: the server's default user)")
	fs.StringVar(&pwFile, "password-file", "", "file holding the user's password")
	fs.StringVar(&db, "database", "weir", "database to create the tables in")
	fs.StringVar(&brokers, "kafka", "", "Kafka brokers, HOST:PORT[,HOST:PORT...]: add the ingestion from Kafka")
	fs.StringVar(&topic, "topic", "weir-flows", "Kafka topic the agents export to (--export kafka://BROKERS/TOPIC)")
	fs.StringVar(&group, "group", "weir-clickhouse", "Kafka consumer group of ClickHouse's Kafka engine")
	fs.IntVar(&consumers, "consumers", 1, "Kafka engine consumers (at most the topic's partitions)")
	fs.IntVar(&partitions, "partitions", 4, "partitions of the topic when setup creates it")
	fs.IntVar(&replication, "replication", 1, "replication factor of the topic when setup creates it")
	fs.StringVar(&retention, "retention", "", "drop rows older than this (whole days: 30d) where the server has TTL (19.6+)")
	_, done, code := parseInterleaved(fs, args, stdout, stderr)
	if done {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "weir clickhouse setup: "+format+"\n", a...)
		return exitUsage
	}
	if url == "" {
		return fail("--url is required (ClickHouse's HTTP interface, e.g. http://127.0.0.1:8123)")
	}
	cfg := clickhouse.Config{Database: db, Topic: topic, Group: group, Consumers: consumers}
	if retention != "" {
		d, err := clickhouse.ParseRetention(retention)
		if err != nil {
			return fail("--retention: %v", err)
		}
		cfg.Retention = d
	}
	conn, err := clickhouse.NewHTTP(url, user, pwFile)
	if err != nil {
		return fail("%v", err)
	}
	kc, err := kafka.ParseURL("kafka://" + brokers + "/" + topic)
	if brokers != "" && err != nil {
		return fail("--kafka/--topic: %v", err)
	}
	if brokers != "" && (partitions < 1 || replication < 1 || partitions > 1<<16 || replication > 16) {
		return fail("--partitions and --replication must be positive")
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	ctx, cancel2 := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel2()
	if brokers != "" {
		if cfg.Kafka, err = ensureTopic(ctx, kc, partitions, replication, stdout); err != nil {
			fmt.Fprintf(stderr, "weir clickhouse setup: %v\n", err)
			return exitFailure
		}
	}
	res, err := clickhouse.Setup(ctx, conn, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "weir clickhouse setup: %v\n", err)
		return exitFailure
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(stderr, "weir clickhouse setup: warning: %s\n", w)
	}
	ing := "no Kafka ingestion (records go to " + db + "." + clickhouse.TableInput + ")"
	if len(cfg.Kafka) > 0 {
		ing = "ingesting " + topic + " from " + strings.Join(cfg.Kafka, ",") + " as group " + group
	}
	fmt.Fprintf(stdout, "ClickHouse %v: database %s ready (%d statements), %s\n", res.Features.Version, db, res.Statements, ing)
	return exitOK
}

// ensureTopic creates the topic on the brokers unless it exists, and
// returns the brokers.
func ensureTopic(ctx context.Context, kc *kafka.Config, partitions, replication int, stdout io.Writer) ([]string, error) {
	created, err := kafka.EnsureTopic(ctx, kc, int32(partitions), int16(replication))
	if created {
		fmt.Fprintf(stdout, "created topic %s (%d partitions, replication %d)\n", kc.Topic, partitions, replication)
	}
	return kc.Brokers, err
}
