package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/weir-dev/weir/internal/cli"
	"github.com/weir-dev/weir/internal/store"
)

func runStoreCheck(args []string, stdout_, stderr io.Writer) int {
	var dir string
	var repair bool
	fs := helpFlagSet("store check")
	cli.DataDirVar(fs, &dir, "the flow store's `dir` (default $WEIR_DATA_DIR or ./weir-data)")
	fs.BoolVar(&repair, "repair", false, "repair what is damaged (needs the store to itself)")
	if done, code := parseFlags(fs, args, stdout_, stderr); done {
		return code
	}
	rep, err := store.Check(dir, store.CheckOptions{
		Repair:  repair,
		Problem: func(d store.Damage) { fmt.Fprintf(stdout_, "damaged: %s\n", d) },
		Action:  func(a string) { fmt.Fprintf(stdout_, "repaired: %s\n", a) },
	})
	switch {
	case errors.Is(err, store.ErrLocked):
		fmt.Fprintf(stderr, "weir store check: a capture is writing to %s: stop it to --repair (a check without --repair runs beside it)\n", dir)
		return exitFailure
	case errors.Is(err, os.ErrNotExist):
		fmt.Fprintf(stderr, "weir store check: no flow store at %s: point --data-dir at one\n", dir)
		return exitFailure
	case err != nil:
		fmt.Fprintf(stderr, "weir store check: %v\n", err)
		return exitFailure
	}
	rep.WriteSummary(stdout_, dir, repair)
	if rep.Clean() {
		return exitOK
	}
	return exitFailure
}

// runStoreStats prints where the store's block bytes go, column by
// column ('weir store stats'): B/row stored and before compression, and
// the encodings the blocks chose. It reads only block headers.
func runStoreStats(args []string, stdout_, stderr io.Writer) int {
	var dir string
	fs := helpFlagSet("store stats")
	fs.StringVar(&dir, "data-dir", defaultDataDir(), "the flow store's `dir` (default $WEIR_DATA_DIR or ./weir-data)")
	fs.StringVar(&dir, "d", defaultDataDir(), "short for --data-dir")
	if done, code := parseFlags(fs, args, stdout_, stderr); done {
		return code
	}
	if _, err := os.Stat(dir); err != nil {
		fmt.Fprintf(stderr, "weir store stats: no flow store at %s: point --data-dir at one\n", dir)
		return exitFailure
	}
	st, err := store.OpenReadOnly(dir)
	if err != nil {
		fmt.Fprintf(stderr, "weir store stats: %v\n", err)
		return exitFailure
	}
	defer st.Close()
	rep, err := st.ColumnStats(0, 0, nil)
	if err != nil {
		fmt.Fprintf(stderr, "weir store stats: %v\n", err)
		return exitFailure
	}
	fmt.Fprint(stdout_, rep.Summary())
	if n := st.Stats().CorruptBlocks; n > 0 {
		fmt.Fprintf(stderr, "weir store stats: %d damaged blocks are left out ('weir store check' lists them)\n", n)
	}
	return exitOK
}
