//go:build !linux

package store

import "os"

// punchHole is Linux's FALLOC_FL_PUNCH_HOLE; elsewhere the caller
// rewrites the partition without the pruned blocks.
func punchHole(*os.File, int64, int64) error { return errPunch }
