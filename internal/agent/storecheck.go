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
		Repair:  repair,
		Problem: func(d store.Damage) { fmt.Fprintf(out, "damaged: %s\n", d) },
		Action:  func(a string) { fmt.Fprintf(out, "repaired: %s\n", a) },
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
