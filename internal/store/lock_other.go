//go:build !unix

package store

import (
	"fmt"
	"os"
)

// lockDir creates the lock file; without flock a second writer is not
// detected on this platform.
func lockDir(root *dirH, perm os.FileMode) (*os.File, error) {
	f, err := root.open(lockName, os.O_RDWR|os.O_CREATE, perm)
	if err != nil {
		return nil, fmt.Errorf("store: lock: %w", err)
	}
	return f, nil
}

// writerRunning cannot tell on this platform.
func writerRunning(*dirH) bool { return false }
