package main

import (
	"context"
	"io"

	"github.com/weir-dev/weir/internal/agent"
	"github.com/weir-dev/weir/internal/cli"
	"github.com/weir-dev/weir/internal/query"
)

// runExport is 'weir export': stored records, whole, out of the store.
func runExport(args []string, stdout_, stderr io.Writer) int {
	var (
		cfg   = agent.ExportConfig{Stdout: stdout_, Log: stderr}
		sel   cli.Selection
		sinks sinkOpts
	)
	fs := helpFlagSet("export")
	cli.DataDirVar(fs, &cfg.Dir, "the flow store to read (default $WEIR_DATA_DIR or ./weir-data)")
	sel.Flags(fs, nil, nil)
	fs.StringVar(&cfg.Output, "output", "json", "stdout `format`: json (JSON lines), csv, or none (with --export)")
	fs.StringVar(&cfg.Output, "o", "json", "short for --output")
	fs.IntVar(&cfg.Batch, "batch", query.DefaultExportBatch, "records handed to the outputs at once")
	sinks.exportFlags(fs, "send the records to `url`: kafka://BROKER[,BROKER…]/TOPIC[?options] (docs/fleet.md), "+
		"or ipfix+udp://, ipfix+tcp://, ipfix+tls://HOST:PORT[?options] as 'weir capture --export'; repeatable",
		"IPFIX messages per second per UDP destination (0: unpaced)",
		"IANA Private Enterprise `number` under which IPFIX carries weir's enterprise elements (as 'weir capture --ipfix-pen'); 0: not sent")
	pos, done, code := parseInterleaved(fs, args, stdout_, stderr)
	if done {
		return code
	}
	cfg.Condition, cfg.Args, cfg.From, cfg.To, cfg.Ifaces = sel.Condition, pos, sel.From, sel.To, sel.Ifaces
	cfg.Sinks = agent.Sinks{Export: sinks.export, ExportRate: sinks.exportRate, ExportCA: sinks.exportCA,
		ExportCert: sinks.exportCert, ExportKey: sinks.exportKey, PEN: sinks.ipfixPEN}
	return agent.ExitCode(agent.Export(context.Background(), cfg))
}
