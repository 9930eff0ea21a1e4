package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/weir-dev/weir/internal/cli"
)

// newFlagSet returns a command's flag set with its help (cli.WriteHelp)
// and --config.
func newFlagSet(name, usageLine, description, examples string) *flag.FlagSet {
	return cli.NewFlagSet(name, usageLine, description, examples)
}

// parseFlags parses args (flags only) into fs, then the --config file, and
// turns errors into exit codes: -h/--help prints help and exits 0,
// anything else wrong is a usage error.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (done bool, code int) {
	_, done, code = parse(fs, args, false, stdout, stderr)
	return done, code
}

// parseInterleaved parses flags that may come before, between or after
// positional arguments, which it returns.
func parseInterleaved(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (pos []string, done bool, code int) {
	return parse(fs, args, true, stdout, stderr)
}

func parse(fs *flag.FlagSet, args []string, interleaved bool, stdout, stderr io.Writer) ([]string, bool, int) {
	pos, err := cli.Parse(fs, args, interleaved)
	switch {
	case err == nil:
		return pos, false, exitOK
	case errors.Is(err, cli.ErrDescribed):
		return nil, true, exitOK
	case errors.Is(err, flag.ErrHelp):
		cli.WriteHelp(stdout, fs)
		return nil, true, exitOK
	}
	fmt.Fprintf(stderr, "weir %s: %v\nRun 'weir %s --help' for usage.\n", fs.Name(), err, fs.Name())
	return nil, true, exitUsage
}
