//go:build unix

package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// dirH is an open directory of the store. Every file and subdirectory
// under the data directory is opened relative to its parent's descriptor
// with O_NOFOLLOW (openat, mkdirat, renameat, unlinkat), so a symbolic
// link where a store file or directory goes is an error naming it, and
// its target is never opened, truncated or written.
type dirH struct {
	fd   int
	path string // for messages only: never opened by name
}

const openFlags = unix.O_NOFOLLOW | unix.O_CLOEXEC

// openRoot opens (creating it and its parents with perm) the data
// directory itself. Its path is the operator's: a link in it is followed
// like any path on the command line; nothing below it is.
func openRoot(path string, create bool, perm os.FileMode) (*dirH, error) {
	if create {
		if err := os.MkdirAll(path, perm); err != nil {
			return nil, err
		}
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return &dirH{fd: fd, path: path}, nil
}

// join is the path of name in d, for messages.
func (d *dirH) join(name string) string { return filepath.Join(d.path, name) }

// linkErr turns the errors O_NOFOLLOW gives for a symbolic link (ELOOP;
// EMLINK on FreeBSD; ENOTDIR with O_DIRECTORY) into ErrSymlink when name
// really is a link.
func (d *dirH) linkErr(op, name string, err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EMLINK) || errors.Is(err, unix.ENOTDIR) {
		var st unix.Stat_t
		if unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return fmt.Errorf("%w: %s", ErrSymlink, d.join(name))
		}
	}
	return &os.PathError{Op: op, Path: d.join(name), Err: err}
}

// sub opens subdirectory name, creating it (mode perm, then fsyncing d
// unless nosync) when create is set and it does not exist.
func (d *dirH) sub(name string, create bool, perm os.FileMode, sync bool) (*dirH, error) {
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|openFlags, 0)
	if errors.Is(err, unix.ENOENT) && create {
		if err = unix.Mkdirat(d.fd, name, uint32(perm.Perm())); err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, &os.PathError{Op: "mkdir", Path: d.join(name), Err: err}
		}
		if sync {
			if err := d.sync(); err != nil {
				return nil, err
			}
		}
		fd, err = unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|openFlags, 0)
	}
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, &os.PathError{Op: "open", Path: d.join(name), Err: os.ErrNotExist}
		}
		return nil, d.linkErr("open", name, err)
	}
	return &dirH{fd: fd, path: d.join(name)}, nil
}

// open opens file name in d (flag as for os.OpenFile, plus O_NOFOLLOW).
func (d *dirH) open(name string, flag int, perm os.FileMode) (*os.File, error) {
	fd, err := unix.Openat(d.fd, name, flag|openFlags, uint32(perm.Perm()))
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, &os.PathError{Op: "open", Path: d.join(name), Err: os.ErrNotExist}
		}
		return nil, d.linkErr("open", name, err)
	}
	f := os.NewFile(uintptr(fd), d.join(name))
	// A regular file only: a FIFO or device where a store file goes is
	// refused like a link.
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = fmt.Errorf("%s is not a regular file", d.join(name))
		}
		return nil, err
	}
	return f, nil
}

// rename renames old to new, both in d.
func (d *dirH) rename(old, new string) error {
	if err := unix.Renameat(d.fd, old, d.fd, new); err != nil {
		return &os.LinkError{Op: "rename", Old: d.join(old), New: d.join(new), Err: err}
	}
	return nil
}

// remove unlinks file name (a link itself, never its target).
func (d *dirH) remove(name string) error {
	if err := unix.Unlinkat(d.fd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "remove", Path: d.join(name), Err: err}
	}
	return nil
}

// removeAll deletes name in d and, if it is a directory, everything in
// it, relative to descriptors: a link inside is removed, not followed.
func (d *dirH) removeAll(name string) error {
	err := unix.Unlinkat(d.fd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	sd, serr := d.sub(name, false, 0, false)
	if serr != nil {
		return &os.PathError{Op: "remove", Path: d.join(name), Err: err}
	}
	ents, lerr := sd.list()
	for _, e := range ents {
		if rerr := sd.removeAll(e.name); rerr != nil && lerr == nil {
			lerr = rerr
		}
	}
	sd.close()
	if err := unix.Unlinkat(d.fd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return errors.Join(lerr, &os.PathError{Op: "remove", Path: d.join(name), Err: err})
	}
	return lerr
}

// dirEnt is one directory entry; dir and link come from the entry's type
// (lstat), never from a link's target.
type dirEnt struct {
	name      string
	dir, link bool
}

// list reads d's entries (without "." and "..").
func (d *dirH) list() ([]dirEnt, error) {
	fd, err := unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: d.path, Err: err}
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	des, err := f.ReadDir(-1)
	out := make([]dirEnt, 0, len(des))
	for _, e := range des {
		t := e.Type()
		out = append(out, dirEnt{name: e.Name(), dir: t.IsDir(), link: t&os.ModeSymlink != 0})
	}
	return out, err
}

// sync fsyncs the directory (its entries: created, renamed, removed).
func (d *dirH) sync() error {
	if err := unix.Fsync(d.fd); err != nil {
		return &os.PathError{Op: "fsync", Path: d.path, Err: err}
	}
	return nil
}

// mode is the directory's permission bits.
func (d *dirH) mode() (os.FileMode, error) {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return 0, err
	}
	return os.FileMode(st.Mode & 0o7777), nil
}

func (d *dirH) close() {
	if d != nil && d.fd >= 0 {
		unix.Close(d.fd)
		d.fd = -1
	}
}

// allocated is the disk space f takes (its allocated blocks: a punched
// hole frees space without changing the size).
func allocated(f os.FileInfo) int64 {
	if st, ok := f.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return f.Size()
}

// links is f's hard link count (1 for a store file: anything else may be
// someone else's file linked in, and is refused).
func links(f os.FileInfo) uint64 {
	if st, ok := f.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
