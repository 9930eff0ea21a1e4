//go:build !unix

package store

import (
	"fmt"
	"os"
)

// lockDir creates the lock file; without flock a second writer is not
// detected on this platform.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return f, nil
}
