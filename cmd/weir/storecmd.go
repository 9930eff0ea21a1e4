package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/weir-dev/weir/internal/store"
)

func runStoreCheck(args []string, stdout_, stderr io.Writer) int {
	var dir string
	var repair bool
	fs := helpFlagSet("store check")
	fs.StringVar(&dir, "data-dir", defaultDataDir(), "the flow store's `dir` (default $WEIR_DATA_DIR or ./weir-data)")
	fs.StringVar(&dir, "d", defaultDataDir(), "short for --data-dir")
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
