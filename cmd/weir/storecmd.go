package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/weir-dev/weir/internal/agent"
	"github.com/weir-dev/weir/internal/cli"
)

// runStoreCheck is 'weir store check'.
func runStoreCheck(args []string, stdout_, stderr io.Writer) int {
	var dir string
	var repair bool
	fs := helpFlagSet("store check")
	cli.DataDirVar(fs, &dir, "the flow store's `dir` (default $WEIR_DATA_DIR or ./weir-data)")
	fs.BoolVar(&repair, "repair", false, "repair what is damaged (needs the store to itself)")
	if done, code := parseFlags(fs, args, stdout_, stderr); done {
		return code
	}
	err := agent.CheckStore(dir, repair, stdout_)
	if err != nil && !errors.Is(err, agent.ErrDamaged) {
		fmt.Fprintf(stderr, "weir store check: %v\n", err)
	}
	return agent.ExitCode(err)
}

// runStoreStats prints where the store's block bytes go, column by
// column ('weir store stats'): B/row stored and before compression, and
// the encodings the blocks chose. It reads only block headers.
func runStoreStats(args []string, stdout_, stderr io.Writer) int {
	var dir string
	fs := helpFlagSet("store stats")
	cli.DataDirVar(fs, &dir, "the flow store's `dir` (default $WEIR_DATA_DIR or ./weir-data)")
	if done, code := parseFlags(fs, args, stdout_, stderr); done {
		return code
	}
	if err := agent.StoreStats(dir, stdout_, stderr); err != nil {
		fmt.Fprintf(stderr, "weir store stats: %v\n", err)
		return exitFailure
	}
	return exitOK
}
