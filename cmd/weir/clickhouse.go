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
	s.Flags(fs)
	if _, done, code := parseInterleaved(fs, args, stdout, stderr); done {
		return code
	}
	return exitErr(stderr, "clickhouse setup", agent.SetupClickHouse(context.Background(), s))
}

// runIngest is 'weir ingest': Kafka → ClickHouse (internal/ingest).
func runIngest(args []string, stdout, stderr io.Writer) int {
	r := agent.IngestRun{Log: stderr}
	fs := helpFlagSet("ingest")
	r.Flags(fs)
	if _, done, code := parseInterleaved(fs, args, stdout, stderr); done {
		return code
	}
	return exitErr(stderr, "ingest", agent.RunIngest(context.Background(), r))
}
