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
	fs := newFlagSet("store check", "weir store check [--repair] [--data-dir DIR]",
		`Verify the flow store: every block's header and column checksums, that
every column decodes, and every index against its block file (which is
scanned on its own, so damage the index does not know of is found too).
One line per problem (file, offset, size, what is wrong, the records
lost), then a summary. The exit status is 1 when anything is damaged, 0
when the store is sound.

With --repair each damaged partition gets an index rebuilt from its intact
blocks (every one, also those after a damaged block) and its block file is
cut after the last of them; each repair is said. Repairing needs the store
to itself: it refuses while a capture writes there (a check without
--repair runs beside one).`, `  weir store check
  weir store check --data-dir /var/lib/weir --repair
`)
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
