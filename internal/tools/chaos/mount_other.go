//go:build !linux

package main

import (
	"errors"
	"runtime"
)

// errNoTmpfs: the full-disk case mounts a Linux tmpfs; it is skipped elsewhere.
var errNoTmpfs = errors.New("a size-limited tmpfs needs Linux; this is " + runtime.GOOS)

// mountTmpfs returns errNoTmpfs.
func mountTmpfs(dir, opts string) error { return errNoTmpfs }

// unmountLazy does nothing: nothing was mounted.
func unmountLazy(dir string) error { return nil }
