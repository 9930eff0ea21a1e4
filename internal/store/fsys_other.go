//go:build !unix

package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// dirH is an open directory of the store. Without openat this platform
// checks every name with Lstat before it opens it: a link where a store
// file goes is still refused, though not free of races as on Unix.
type dirH struct {
	path string
}

func openRoot(path string, create bool, perm os.FileMode) (*dirH, error) {
	if create {
		if err := os.MkdirAll(path, perm); err != nil {
			return nil, err
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", path)
	}
	return &dirH{path: path}, nil
}

func (d *dirH) join(name string) string { return filepath.Join(d.path, name) }

// noLink fails with ErrSymlink when name is a link.
func (d *dirH) noLink(name string) error {
	st, err := os.Lstat(d.join(name))
	if err == nil && st.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("%w: %s", ErrSymlink, d.join(name))
	}
	return nil
}

func (d *dirH) sub(name string, create bool, perm os.FileMode, sync bool) (*dirH, error) {
	if err := d.noLink(name); err != nil {
		return nil, err
	}
	p := d.join(name)
	st, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) && create {
		if err = os.Mkdir(p, perm); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		st, err = os.Stat(p)
	}
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", p)
	}
	return &dirH{path: p}, nil
}

func (d *dirH) open(name string, flag int, perm os.FileMode) (*os.File, error) {
	if err := d.noLink(name); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(d.join(name), flag, perm)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = fmt.Errorf("%s is not a regular file", d.join(name))
		}
		return nil, err
	}
	return f, nil
}

func (d *dirH) rename(old, new string) error { return os.Rename(d.join(old), d.join(new)) }

func (d *dirH) remove(name string) error {
	if err := os.Remove(d.join(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func (d *dirH) removeAll(name string) error { return os.RemoveAll(d.join(name)) }

type dirEnt struct {
	name      string
	dir, link bool
}

func (d *dirH) list() ([]dirEnt, error) {
	des, err := os.ReadDir(d.path)
	out := make([]dirEnt, 0, len(des))
	for _, e := range des {
		t := e.Type()
		out = append(out, dirEnt{name: e.Name(), dir: t.IsDir(), link: t&os.ModeSymlink != 0})
	}
	return out, err
}

func (d *dirH) sync() error {
	f, err := os.Open(d.path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (d *dirH) mode() (os.FileMode, error) {
	st, err := os.Stat(d.path)
	if err != nil {
		return 0, err
	}
	return st.Mode().Perm(), nil
}

func (d *dirH) close() {}

func allocated(f os.FileInfo) int64 { return f.Size() }

func links(os.FileInfo) uint64 { return 1 }
