//go:build unix

package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFileModes: what the store creates is 0700/0600, or 0750/0640 with
// ModeGroup, and the umask still applies.
func TestFileModes(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	for _, tc := range []struct {
		mode        Mode
		umask       int
		dirs, files os.FileMode
	}{
		{ModePrivate, 0o022, 0o700, 0o600},
		{ModeGroup, 0o022, 0o750, 0o640},
		{ModeGroup, 0o077, 0o700, 0o600},
	} {
		syscall.Umask(tc.umask)
		dir := filepath.Join(t.TempDir(), "new", "store")
		s := openT(t, Config{Dir: dir, Mode: tc.mode, NoSync: true})
		s.Write(mkRecs(10, 0, "eth0", t0))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		part := filepath.Join(dir, "eth0", "2025-03-01")
		for p, want := range map[string]os.FileMode{
			filepath.Dir(dir): tc.dirs, dir: tc.dirs, filepath.Join(dir, "eth0"): tc.dirs, part: tc.dirs,
			filepath.Join(dir, lockName): tc.files, filepath.Join(part, dataName): tc.files, filepath.Join(part, indexName): tc.files,
		} {
			st, err := os.Stat(p)
			if err != nil || st.Mode().Perm() != want {
				t.Errorf("mode %d umask %03o: %s is %v, want %v (%v)", tc.mode, tc.umask, p, st.Mode().Perm(), want, err)
			}
		}
	}
}

// precious is a file outside the store that a link points at.
type precious struct {
	path  string
	mtime time.Time
}

var preciousData = []byte("not the store's: must never be truncated, overwritten or read")

func newPrecious(t *testing.T) precious {
	p := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(p, preciousData, 0o600); err != nil {
		t.Fatal(err)
	}
	mt := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	os.Chtimes(p, mt, mt)
	return precious{p, mt}
}

func (p precious) untouched(t *testing.T, what string) {
	t.Helper()
	b, err := os.ReadFile(p.path)
	st, serr := os.Stat(p.path)
	if err != nil || serr != nil || !bytes.Equal(b, preciousData) || !st.ModTime().Equal(p.mtime) {
		t.Fatalf("%s: the link's target was touched: %q, mtime %v", what, b, st.ModTime())
	}
}

// TestNoSymlinkFollowed: a link where a block file, an index, an index
// temp, a partition or interface directory, or the LOCK goes is never
// followed by the writer, the readers or check: an error or warning names
// the path, and the target's content and mtime are unchanged.
func TestNoSymlinkFollowed(t *testing.T) {
	for _, tc := range []struct {
		name, at string // at: the path under the data directory replaced by a link
		dir      bool   // the target is a directory
		writeOK  bool   // the writer goes on (the link is removed, never followed)
	}{
		{name: "block file", at: "a/2025-03-01/blocks"},
		{name: "index", at: "a/2025-03-01/index"},
		{name: "index temp", at: "a/2025-03-01/.index.tmp", writeOK: true},
		{name: "partition directory", at: "a/2025-03-01", dir: true},
		{name: "interface directory", at: "a", dir: true},
		{name: "lock", at: "LOCK"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tempDir(t)
			buildSmall(t, dir)
			target := newPrecious(t)
			link := filepath.Join(dir, tc.at)
			to := target.path
			if tc.dir {
				to = filepath.Dir(target.path)
			}
			os.RemoveAll(link)
			if err := os.Symlink(to, link); err != nil {
				t.Fatal(err)
			}
			var l logged
			s, err := Open(Config{Dir: dir, NoSync: true, Writeout: time.Hour, Log: l.log})
			if tc.at == "LOCK" {
				if !errors.Is(err, ErrSymlink) || !strings.Contains(err.Error(), link) {
					t.Fatalf("Open over a linked LOCK: %v", err)
				}
				target.untouched(t, "open")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s.Write(mkRecs(5, 9000, "a", t0+100))
			ferr := s.Flush()
			s.Close()
			if tc.writeOK {
				if ferr != nil {
					t.Fatalf("flush: %v", ferr)
				}
				if fi, err := os.Lstat(link); err == nil {
					t.Fatalf("the temp link is still there: %v", fi.Mode())
				}
			} else if !errors.Is(ferr, ErrSymlink) || !strings.Contains(ferr.Error(), link) || s.Stats().WriteErrors["symlink"] == 0 ||
				!strings.Contains(l.all(), link) {
				t.Fatalf("flush: %v; stats %+v; log:\n%s", ferr, s.Stats(), l.all())
			}
			target.untouched(t, "writer")
			r, err := OpenReadOnly(dir)
			if err != nil {
				t.Fatal(err)
			}
			var rl logged
			r.cfg.Log = rl.log
			readAll(t, r)
			r.Ifaces()
			target.untouched(t, "reader")
			if !tc.writeOK && !strings.Contains(rl.all(), link) {
				t.Fatalf("the reader did not say the link:\n%s", rl.all())
			}
			rep, err := Check(dir, CheckOptions{Repair: true})
			if err != nil {
				t.Fatal(err)
			}
			target.untouched(t, "check --repair")
			found := false
			for _, d := range rep.Problems {
				found = found || strings.Contains(d.String(), link)
			}
			if !tc.writeOK && !found {
				t.Fatalf("check did not report the link: %+v", rep.Problems)
			}
		})
	}
}

// TestHardLinkRefused: a block file with a second hard link (someone
// else's file linked in) is refused, and that file stays as it was.
func TestHardLinkRefused(t *testing.T) {
	dir := tempDir(t)
	buildSmall(t, dir)
	data := filepath.Join(dir, "a", "2025-03-01", dataName)
	other := filepath.Join(dir, "other")
	if err := os.Link(data, other); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(other)
	os.WriteFile(filepath.Join(dir, "a", "2025-03-01", indexName), nil, 0o600) // the writer would cut the file to its committed length
	s := openT(t, Config{Dir: dir, NoSync: true})
	s.Write(mkRecs(5, 9000, "a", t0))
	err := s.Flush()
	s.Close()
	if err == nil || !strings.Contains(err.Error(), "hard links") {
		t.Fatalf("flush: %v", err)
	}
	if after, _ := os.ReadFile(other); !bytes.Equal(before, after) {
		t.Fatal("the hard-linked file changed")
	}
}
