//go:build unix

package store

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// lockDir takes an exclusive flock on the LOCK file of root (opened
// without following a link); the lock dies with the process.
func lockDir(root *dirH, perm os.FileMode) (*os.File, error) {
	f, err := root.open(lockName, os.O_RDWR|os.O_CREATE, perm)
	if err != nil {
		return nil, fmt.Errorf("store: lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, root.join(lockName))
		}
		return nil, fmt.Errorf("store: lock %s: %w", root.join(lockName), err)
	}
	return f, nil
}

// writerRunning reports whether a writer holds root's lock now (false
// when there is no LOCK file, or it cannot be opened).
func writerRunning(root *dirH) bool {
	f, err := root.open(lockName, os.O_RDONLY, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	if err == nil {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN) // a probe: closing the file drops the lock anyway
	}
	return errors.Is(err, unix.EWOULDBLOCK)
}
