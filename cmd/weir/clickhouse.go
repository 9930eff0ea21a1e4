package main

import (
	"context"
	"io"

	"github.com/weir-dev/weir/internal/agent"
)

// runClickhouseSetup is 'weir clickhouse setup'.
func runClickhouseSetup(args []string, stdout, stderr io.Writer) int {
	s := agent.ClickHouseSetup{Stdout: stdout, Log: stderr}
	fs := helpFlagSet("clickhouse setup")
	fs.StringVar(&s.URL, "url", "", "ClickHouse's HTTP interface, http://HOST:PORT or https://HOST:PORT")
	fs.StringVar(&s.User, "user", "", "ClickHouse user (default: the server's default user)")
	fs.StringVar(&s.PasswordFile, "password-file", "", "file holding the user's password")
	fs.StringVar(&s.Database, "database", "weir", "database to create the tables in")
	fs.StringVar(&s.Brokers, "kafka", "", "Kafka brokers, HOST:PORT[,HOST:PORT...]: add the ingestion from Kafka")
	fs.StringVar(&s.Ingest, "ingest", "weir", "who reads the topic: weir (weir ingest; the default, many rows a message) or kafka (ClickHouse's Kafka engine; exporters need ?format=row)")
	fs.StringVar(&s.Topic, "topic", "weir-flows", "Kafka topic the agents export to (--export kafka://BROKERS/TOPIC)")
	fs.StringVar(&s.Group, "group", "weir-clickhouse", "Kafka consumer group of ClickHouse's Kafka engine (--ingest kafka)")
	fs.IntVar(&s.Consumers, "consumers", 1, "Kafka engine consumers (at most the topic's partitions)")
	fs.IntVar(&s.Partitions, "partitions", 4, "partitions of the topic when setup creates it")
	fs.IntVar(&s.Replication, "replication", 1, "replication factor of the topic when setup creates it")
	fs.StringVar(&s.Retention, "retention", "", "drop rows older than this (whole days: 30d) where the server has TTL (19.6+)")
	if _, done, code := parseInterleaved(fs, args, stdout, stderr); done {
		return code
	}
	return exitErr(stderr, "clickhouse setup", agent.SetupClickHouse(context.Background(), s))
}
