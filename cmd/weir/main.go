// Command weir is a network flow observability tool: it turns packets into
// bidirectional flow records, exactly, with bounded memory; collects them
// from exporters; stores, queries and serves them.
//
// The commands are the table in commands(); 'weir help' lists them. Every
// command takes --config FILE (YAML, keys are its long flags).
package main

import (
	_ "embed"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/weir-dev/weir/internal/cli"
	"github.com/weir-dev/weir/internal/termsafe"
)

// Exit codes.
const (
	exitOK      = cli.ExitOK
	exitFailure = cli.ExitFailure
	exitUsage   = cli.ExitUsage
)

// commands is the table every part of the CLI comes from: dispatch, 'weir
// help', 'weir config example', man pages and completions.
func commands() []cli.Command {
	return []cli.Command{
		{Name: "capture", Summary: "turn packets into flow records: live (-i), from a capture file, or synthetic", Run: runCapture},
		{Name: "collect", Summary: "receive IPFIX (UDP, TCP, TLS) and NetFlow v9/v5 from exporters into the same sinks", Run: runCollect},
		{Name: "query", Summary: "answer questions from the flow store or ClickHouse: top talkers, conversations, over time", Run: runQuery},
		{Name: "export", Summary: "stream stored records whole, as JSON lines or CSV or to Kafka and IPFIX (back-fill ClickHouse)", Run: runExport},
		{Name: "serve", Summary: "the web console and HTTP API v1 over a flow store (docs/api.md)", Run: runServeCmd},
		{Name: "services explain", Summary: "the service model compiled to datapath rows that serve a VIP", Run: runServicesExplain},
		{Name: "ingest", Summary: "Kafka consumer group inserting the agents' records into ClickHouse in batches", Run: runIngest},
		{Name: "clickhouse setup", Summary: "set up ClickHouse for a fleet: flows table, rollups, ingestion from Kafka", Run: runClickhouseSetup},
		{Name: "store check", Summary: "verify (and --repair) every block and index of the flow store", Run: runStoreCheck},
		{Name: "store stats", Summary: "bytes per row of the flow store, column by column, and their encodings", Run: runStoreStats},
		{Name: "bench gendb", Summary: "build a flow store of generated records", Run: runGendb},
		{Name: "bench lbstress", Summary: "OVN's load-balancer-group stress on weir's service model", Run: runLBStress},
		{Name: "bench run", Summary: "run a uperf-style traffic profile between test hosts", Run: runBenchRun},
		{Name: "bench compare", Summary: "before/after table of 'bench run' results, --html report", Run: runBenchCompare},
		{Name: "bench _child", Hidden: true, Run: runBenchChild},
		{Name: "config example", Summary: "print a complete commented config file for a command", Run: runConfigExample},
		{Name: "completion", Summary: "print the shell completion script for bash, zsh or fish", Run: runCompletion},
		{Name: "version", Summary: "print weir's version and build information", Run: runVersion},
	}
}

// progressOut is where long operations draw progress: standard error
// when it is a terminal, else nil (nothing drawn; also in tests, which
// call run).
var progressOut io.Writer

func main() {
	progressOut = cli.TerminalOrNil(os.Stderr)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs one command. Its stderr passes through termsafe.Writer: names
// from the network or a file that reach a message (interface names, file
// names, exporters' strings) cannot act on the terminal.
func run(args []string, stdout, stderr io.Writer) int {
	stderr = termsafe.NewWriter(stderr)
	cmds := commands()
	if len(args) == 0 {
		usage(stderr, cmds)
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			return run(append(args[1:], "--help"), stdout, stderr)
		}
		usage(stdout, cmds)
		return exitOK
	case "--version", "-version":
		args = []string{"version"}
	case "_gendocs": // hidden: man pages for make install
		return runGendocs(args[1:], stdout, stderr)
	}
	if c, rest, ok := cli.Find(cmds, args); ok {
		return c.Run(rest, stdout, stderr)
	}
	if g := cli.Group(cmds, args[0]); len(g) > 0 {
		return cli.WriteGroup(stdout, stderr, g, args)
	}
	fmt.Fprintf(stderr, "weir: unknown command %q\nRun 'weir help' for the list of commands.\n", args[0])
	return exitUsage
}

// usageText is 'weir help': {{commands}} stands for the command index.
//
//go:embed usage.txt
var usageText string

func usage(w io.Writer, cmds []cli.Command) {
	head, tail, _ := strings.Cut(usageText, "{{commands}}\n")
	fmt.Fprint(w, head)
	cli.WriteIndex(w, cmds)
	fmt.Fprint(w, tail)
}

// runConfigExample is 'weir config example [COMMAND]'.
func runConfigExample(args []string, stdout, stderr io.Writer) int {
	fs := helpFlagSet("config example")
	pos, done, code := parseInterleaved(fs, args, stdout, stderr)
	if done {
		return code
	}
	if err := cli.WriteConfigExamples(stdout, commands(), pos); err != nil {
		fmt.Fprintf(stderr, "weir config example: %v\n", err)
		return exitUsage
	}
	return exitOK
}
