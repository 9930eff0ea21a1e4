package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/weir-dev/weir/internal/cli"
	"github.com/weir-dev/weir/internal/clidoc"
)

// docProgram describes weir and every command for man pages and
// completions (cli.Program).
func docProgram() *clidoc.Program {
	return cli.Program(clidoc.Program{
		Name:    "weir",
		Summary: "exact, bidirectional network flow records at line rate with bounded memory",
		Description: "weir sees every conversation on a host and reports it as exact, bidirectional flow records: " +
			"live from interfaces (AF_PACKET, eBPF, conntrack, NFLOG), from capture files, or from IPFIX and NetFlow exporters. " +
			"Records go to an embedded columnar flow store (queried with weir query), to stdout, and to IPFIX collectors.\n\n" +
			"Every command takes --help and --config FILE. Metrics are described in docs/metrics.md, records in docs/record.md.",
		Version: version,
	}, commands())
}

// runCompletion is 'weir completion bash|zsh|fish'.
func runCompletion(args []string, stdout, stderr io.Writer) int {
	fs := helpFlagSet("completion")
	pos, done, code := parseInterleaved(fs, args, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "weir completion: want one shell: bash, zsh or fish\nRun 'weir completion --help' for usage.\n")
		return exitUsage
	}
	if err := docProgram().WriteCompletion(stdout, pos[0]); err != nil {
		fmt.Fprintf(stderr, "weir completion: %v\n", err)
		return exitUsage
	}
	return exitOK
}

// runGendocs is 'weir _gendocs --man DIR' (hidden; make install): the man
// pages of weir and every command.
func runGendocs(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("_gendocs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("man", "", "write NAME.1 man pages into this directory")
	if err := fs.Parse(args); err != nil || *dir == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: weir _gendocs --man DIR")
		return exitUsage
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fmt.Fprintf(stderr, "weir _gendocs: %v\n", err)
		return exitFailure
	}
	names, err := docProgram().WriteManPages(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "weir _gendocs: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "%d man pages in %s\n", len(names), *dir)
	return exitOK
}
