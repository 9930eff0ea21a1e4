// Command weir is a network flow observability tool: it turns packets into
// bidirectional flow records, exactly, with bounded memory.
//
//	weir capture --read trace.pcapng          # replay a capture, top flows
//	weir capture --read trace.pcap -o json    # one JSON record per flow
//	weir version
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/weir-dev/weir/internal/termsafe"
)

// Exit codes.
const (
	exitOK      = 0 // success
	exitFailure = 1 // the command ran and failed (damaged input, sink error)
	exitUsage   = 2 // the command line is wrong
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"capture", "turn packets into flow records: live (-i), from a capture file, or synthetic", runCapture},
		{"collect", "receive IPFIX (UDP, TCP, TLS) and NetFlow v9/v5 from exporters into the same sinks", runCollect},
		{"query", "answer questions from the flow store: top talkers, conversations, applications over time", runQuery},
		{"serve", "the web console and HTTP API v1 over a flow store (docs/api.md)", runServeCmd},
		{"services", "the service model compiled to datapath rows: explain a VIP", runServices},
		{"clickhouse", "set up ClickHouse for a fleet: flows table, rollups, ingestion from Kafka (setup)", runClickhouse},
		{"store", "maintain the flow store: check (and repair) every block and index", runStore},
		{"bench", "benchmark tools: a flow store of generated records (gendb), the OVN load-balancer stress (lbstress)", runBench},
		{"version", "print weir's version and build information", runVersion},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs one command. Its stderr passes through termsafe.Writer: names
// from the network or a file that reach a message (interface names, file
// names, exporters' strings) cannot act on the terminal.
func run(args []string, stdout, stderr io.Writer) int {
	stderr = termsafe.NewWriter(stderr)
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			return run([]string{args[1], "--help"}, stdout, stderr)
		}
		usage(stdout)
		return exitOK
	case "--version", "-version":
		name = "version"
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "weir: unknown command %q\nRun 'weir help' for the list of commands.\n", name)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `weir sees every conversation on a host and reports it as exact, bidirectional flow records.

Usage:
  weir <command> [flags]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Examples:
  sudo weir capture -i eth0                    # watch an interface live: top flows every 5s
  weir capture --read trace.pcapng             # top flows of a capture file
  weir capture --read trace.pcap --output=json # one JSON record per flow (docs/record.md)
  weir capture --synthetic flows=10000,packets=1000000 --output=none --stats

Run 'weir <command> --help' for a command's flags.
`)
}

// parseFlags parses args into fs and turns flag errors into exit codes:
// -h/--help prints help and exits 0, anything else wrong is a usage error.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (done bool, code int) {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		fs.Usage()
		return true, exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "weir %s: %v\nRun 'weir %s --help' for usage.\n", fs.Name(), err, fs.Name())
		return true, exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "weir %s: unexpected argument %q\nRun 'weir %s --help' for usage.\n", fs.Name(), fs.Arg(0), fs.Name())
		return true, exitUsage
	}
	return false, exitOK
}
