//go:build unix

package caps

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Reachable reports whether weir's effective user and groups reach path
// through its modes (and its ancestors'), without capabilities: search on
// every ancestor, read on a file, and read, write and search on a
// directory and everything under it (the store's own partitions, made by
// an earlier run of another user). ACLs are not read: when the modes say
// no, weir keeps CAP_DAC_OVERRIDE rather than guess.
func Reachable(path string, dir bool) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		if !allowed(p, 1) {
			return false
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	if !dir {
		return allowed(abs, 4)
	}
	if _, err := os.Lstat(abs); errors.Is(err, fs.ErrNotExist) {
		return true // the store makes it, as weir's user
	}
	const limit = 100000 // entries looked at; a larger store keeps the capability
	n, ok := 0, true
	_ = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		n++
		switch {
		case err != nil || n > limit:
			ok = false
		case d.Type()&fs.ModeSymlink != 0:
			return nil // the store never follows them
		case d.IsDir():
			ok = allowed(p, 7)
		default:
			ok = allowed(p, 6)
		}
		if !ok {
			return filepath.SkipAll
		}
		return nil
	})
	return ok
}

// allowed reports whether the mode bits of path grant want (4 read, 2
// write, 1 search/execute, or'ed) to the effective user and groups.
func allowed(path string, want uint32) bool {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return false
	}
	mode := uint32(st.Mode) & 0o777 // uint16 on the BSDs
	switch {
	case st.Uid == uint32(os.Geteuid()):
		return (mode>>6)&want == want
	case inGroup(st.Gid):
		return (mode>>3)&want == want
	}
	return mode&want == want
}

// inGroup reports whether gid is weir's effective group or a supplementary one.
func inGroup(gid uint32) bool {
	if gid == uint32(os.Getegid()) {
		return true
	}
	groups, _ := os.Getgroups()
	for _, g := range groups {
		if uint32(g) == gid {
			return true
		}
	}
	return false
}
