package store

import (
	"os"

	"golang.org/x/sys/unix"
)

// punchHole frees the disk space of [off, off+n) in f without changing
// its size or any other offset (FALLOC_FL_PUNCH_HOLE): pruned blocks give
// their space back while the index's offsets of the others stay valid.
// It fails with errors.ErrUnsupported on a file system without hole
// punching; the caller then rewrites the partition.
func punchHole(f *os.File, off, n int64) error {
	if n <= 0 {
		return nil
	}
	err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	if err == unix.EOPNOTSUPP || err == unix.ENOSYS {
		return errPunch
	}
	if err != nil {
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
	return nil
}
