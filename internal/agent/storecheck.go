package agent

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/weir-dev/weir/internal/store"
)

// ErrDamaged is a check that found damage it did not repair (said on
// CheckStore's out).
var ErrDamaged = errors.New("the store is damaged")

// CheckStore is 'weir store check': it verifies (and with repair,
// repairs) every block and index of the store in dir, writes each damage,
// each repair and the summary to out, and fails when the store is not
// clean. Its errors say what to do.
func CheckStore(dir string, repair bool, out io.Writer) error {
	rep, err := store.Check(dir, store.CheckOptions{
		Repair: repair,
		Problem: func(d store.Damage) {
			if d.Newer() {
				fmt.Fprintf(out, "newer: %s\n", d)
				return
			}
			fmt.Fprintf(out, "damaged: %s\n", d)
		},
		Action: func(a string) { fmt.Fprintf(out, "repaired: %s\n", a) },
	})
	switch {
	case errors.Is(err, store.ErrLocked):
		return fmt.Errorf("a capture is writing to %s: stop it to --repair (a check without --repair runs beside it)", dir)
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("no flow store at %s: point --data-dir at one", dir)
	case err != nil:
		return err
	}
	rep.WriteSummary(out, dir, repair)
	if rep.Clean() {
		return nil
	}
	return ErrDamaged
}

// StoreStats writes where the store's block bytes go, column by column
// ('weir store stats'): B/row stored and before compression, and the
// encodings the blocks chose, from block headers only. Damaged blocks left
// out are reported on warn.
func StoreStats(dir string, out, warn io.Writer) error {
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("no flow store at %s: point --data-dir at one", dir)
	}
	st, err := store.OpenReadOnly(dir)
	if err != nil {
		return err
	}
	defer st.Close()
	rep, err := st.ColumnStats(0, 0, nil)
	if err != nil {
		return err
	}
	fmt.Fprint(out, rep.Summary())
	if n := st.Stats().CorruptBlocks; n > 0 {
		fmt.Fprintf(warn, "weir store stats: %d damaged blocks are left out ('weir store check' lists them)\n", n)
	}
	return nil
}
