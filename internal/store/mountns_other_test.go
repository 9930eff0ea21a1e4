//go:build !linux

package store

import (
	"errors"
	"testing"
)

func runInMountNS(t *testing.T, run string, env ...string) (string, error) {
	t.Skip("mount namespaces are Linux's")
	return "", nil
}

func mountTmpfs(t *testing.T, dir, opts string) error { return errors.New("tmpfs mounts are Linux's") }
