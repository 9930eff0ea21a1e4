package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// setFault installs an injected I/O fault (under the writer lock).
func setFault(s *Store, f func(op, path string) error) {
	s.mu.Lock()
	s.fault = f
	s.mu.Unlock()
}

// waitFor polls cond every 20 ms for up to limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(limit); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("after %v: %s", limit, what)
		}
	}
}

// seqs is the set of sequence numbers (Packets) of rows.
func seqs(rows []flow.Record) map[uint64]bool {
	m := make(map[uint64]bool, len(rows))
	for _, r := range rows {
		m[r.Packets] = true
	}
	return m
}

// TestWriteFailureCounted: while writes fail with ENOSPC (an injected
// failing writer), rows stay buffered up to MaxPendingRows and what
// exceeds it is dropped and counted; the cause and the dropping are each
// said once; write errors are counted by reason; writing resumes by
// itself when the fault clears, and says what was dropped meanwhile.
// Every row handed over is written or counted: exactly the buffered ones
// read back.
func TestWriteFailureCounted(t *testing.T) {
	dir := tempDir(t)
	var l logged
	s := openT(t, Config{Dir: dir, NoSync: true, TimePrecision: time.Nanosecond, MaxPendingRows: 1000, Writeout: time.Hour, Log: l.log})
	var failing atomic.Bool
	setFault(s, func(op, path string) error {
		if failing.Load() && op == "write" {
			return &os.PathError{Op: "write", Path: path, Err: syscall.ENOSPC}
		}
		return nil
	})
	s.Write(mkRecs(100, 0, "a", t0))
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	failing.Store(true)
	next := uint64(100)
	for i := 0; i < 30; i++ {
		if err := s.Write(mkRecs(100, next, []string{"a", "b"}[i%2], t0+int64(next))); err != nil {
			t.Fatalf("Write while the disk is full: %v", err)
		}
		next += 100
		if i%10 == 0 {
			if err := s.Flush(); !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Flush: %v", err)
			}
		}
	}
	st := s.Stats()
	if st.PendingRows != 1000 || st.DroppedRows != 2000 || st.RowsWritten != 100 || st.WriteErrors["no_space"] == 0 {
		t.Fatalf("while failing: %+v", st)
	}
	path := filepath.Join(dir, "a", "2025-03-01", dataName)
	msgs := l.all()
	if n := strings.Count(msgs, "no space left on device; "); n != 1 {
		t.Fatalf("the cause said %d times:\n%s", n, msgs)
	}
	if !strings.Contains(msgs, "writing "+path+": no space left on device") && !strings.Contains(msgs, "writing "+filepath.Join(dir, "b", "2025-03-01", dataName)) {
		t.Fatalf("the message does not name the file:\n%s", msgs)
	}
	if n := strings.Count(msgs, "dropping records while writes fail"); n != 1 {
		t.Fatalf("dropping said %d times:\n%s", n, msgs)
	}
	failing.Store(false)
	waitFor(t, 20*time.Second, "writing never resumed", func() bool { return s.Stats().PendingRows == 0 })
	if !strings.Contains(l.all(), "writing again after") || !strings.Contains(l.all(), "2,000 records were dropped meanwhile") {
		t.Fatalf("resuming not said:\n%s", l.all())
	}
	err := s.Close()
	if err == nil || !strings.Contains(err.Error(), "2,000 records were not written") {
		t.Fatalf("Close: %v", err)
	}
	st = s.Stats()
	if st.RowsWritten+st.DroppedRows != int64(next) || st.RowsWritten != 1100 {
		t.Fatalf("written %d + dropped %d != %d handed over", st.RowsWritten, st.DroppedRows, next)
	}
	r, _ := OpenReadOnly(dir)
	rows, _ := readAll(t, r)
	got := seqs(rows)
	for q := uint64(0); q < 1100; q++ { // the first 1000 rows of the failure were held, the rest dropped
		if !got[q] {
			t.Fatalf("row %d lost", q)
		}
	}
	if len(rows) != 1100 {
		t.Fatalf("%d rows read back", len(rows))
	}
	if s.Write(mkRecs(5, 0, "a", t0)) != ErrClosed || s.Stats().DroppedRows != st.DroppedRows+5 {
		t.Fatal("rows written after Close are not counted")
	}
}

// TestFailingPartitionDoesNotStarveOthers: a link where one partition's
// directory goes fails only that partition (said once, naming the path,
// its target untouched); the other partition is written in full, and
// the failing one's rows are dropped and counted when the buffer fills.
func TestFailingPartitionDoesNotStarveOthers(t *testing.T) {
	dir := tempDir(t)
	outside := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "b"), 0o700)
	if err := os.Symlink(outside, filepath.Join(dir, "b", "2025-03-01")); err != nil {
		t.Fatal(err)
	}
	var l logged
	s := openT(t, Config{Dir: dir, NoSync: true, TimePrecision: time.Nanosecond, MaxPendingRows: 1000, Writeout: time.Hour, Log: l.log})
	next := uint64(0)
	for i := 0; i < 40; i++ {
		s.Write(mkRecs(100, next, []string{"a", "b"}[i%2], t0+int64(next)))
		next += 100
	}
	s.Flush()
	err := s.Close()
	st := s.Stats()
	if st.RowsWritten != 2000 || st.DroppedRows != 2000 || st.WriteErrors["symlink"] == 0 || err == nil {
		t.Fatalf("close %v, stats %+v", err, st)
	}
	link := filepath.Join(dir, "b", "2025-03-01")
	said := "a symbolic link where a store file goes (never followed: remove it): " + link
	if n := strings.Count(l.all(), said+"; "); n != 1 || !strings.Contains(l.all(), said+": skipped") {
		t.Fatalf("the link said %d times as a write failure, or not at Open:\n%s", n, l.all())
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("the link's target was written: %v", ents)
	}
}

// TestCloseBoundedWhenStuck: a write that never returns (a file system
// that does not answer) cannot hold Close: it returns within
// CloseTimeout, counts the buffered rows as lost and says so; when the
// write comes back it is not counted as written too. Flush is bounded
// the same way and leaves its rows buffered.
func TestCloseBoundedWhenStuck(t *testing.T) {
	for _, closing := range []bool{false, true} {
		dir := tempDir(t)
		var l logged
		s := openT(t, Config{Dir: dir, NoSync: true, CloseTimeout: time.Second, Writeout: time.Hour, Log: l.log})
		release := make(chan struct{})
		setFault(s, func(op, _ string) error {
			if op == "write" {
				<-release
			}
			return nil
		})
		s.Write(mkRecs(500, 0, "a", t0))
		start := time.Now()
		var err error
		if closing {
			err = s.Close()
		} else {
			err = s.Flush()
		}
		took := time.Since(start)
		if took > 3*time.Second || !errors.Is(err, ErrTimeout) {
			t.Fatalf("closing %v: took %v, %v", closing, took, err)
		}
		st := s.Stats()
		if closing && (st.DroppedRows != 500 || !strings.Contains(l.all(), "500 buffered records are counted as lost")) {
			t.Fatalf("close: %+v\n%s", st, l.all())
		}
		if !closing && (st.DroppedRows != 0 || st.PendingRows != 500) {
			t.Fatalf("flush: %+v", st)
		}
		close(release)
		waitFor(t, 10*time.Second, "the stuck write never finished", func() bool {
			if s.mu.TryLock() {
				s.mu.Unlock()
				return true
			}
			return false
		})
		st = s.Stats()
		if closing && (st.RowsWritten != 0 || st.DroppedRows != 500) {
			t.Fatalf("after the stuck write returned: %+v", st)
		}
		if !closing {
			if err := s.Close(); err != nil || s.Stats().RowsWritten != 500 {
				t.Fatalf("close after the flush: %v %+v", err, s.Stats())
			}
		}
	}
}

// TestDiskFullTmpfs fills a real 2 MiB tmpfs (in a mount namespace of
// its own), frees it, and checks the same accounting as
// TestWriteFailureCounted against the kernel's ENOSPC.
func TestDiskFullTmpfs(t *testing.T) {
	if os.Getenv("WEIR_STORE_TMPFS_CHILD") != "" {
		diskFullChild(t)
		return
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI runs as root: the tmpfs disk-full test must not skip")
		}
		t.Skip("needs root to mount a tmpfs (TestWriteFailureCounted injects the same failure)")
	}
	out, err := runInMountNS(t, "^TestDiskFullTmpfs$", "WEIR_STORE_TMPFS_CHILD=1")
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
}

func diskFullChild(t *testing.T) {
	mnt := t.TempDir()
	if err := mountTmpfs(t, mnt, "size=2m"); err != nil {
		t.Fatal(err)
	}
	var l logged
	dir := filepath.Join(mnt, "store")
	s, err := Open(Config{Dir: dir, Writeout: time.Hour, MaxPendingRows: 10000, Log: l.log})
	if err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(mnt, "filler")
	fill, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	filled := 0
	for filled < 1800<<10 {
		n, err := fill.Write(buf)
		filled += n
		if err != nil {
			t.Fatal(err)
		}
	}
	fill.Close()
	g := newGen(3)
	var total int64
	for i := 0; i < 200 && s.Stats().DroppedRows == 0; i++ {
		recs := g.window(nil, 2000, t0+int64(i)*int64(time.Minute), "eth0")
		s.Write(recs)
		total += int64(len(recs))
		_ = s.Flush()
	}
	st := s.Stats()
	if st.WriteErrors["no_space"] == 0 || st.DroppedRows == 0 || st.RowsWritten == 0 {
		t.Fatalf("the disk never filled: %+v", st)
	}
	t.Logf("full after %d rows: %d written, %d held, %d dropped", total, st.RowsWritten, st.PendingRows, st.DroppedRows)
	os.Remove(filler)
	waitFor(t, 20*time.Second, "writing never resumed on the freed tmpfs", func() bool { return s.Stats().PendingRows == 0 })
	cerr := s.Close()
	st = s.Stats()
	if st.RowsWritten+st.DroppedRows != total || cerr == nil {
		t.Fatalf("written %d + dropped %d != %d handed over (close: %v)", st.RowsWritten, st.DroppedRows, total, cerr)
	}
	msgs := l.all()
	if strings.Count(msgs, "no space left on device; ") != 1 || !strings.Contains(msgs, "writing again after") {
		t.Fatalf("messages:\n%s", msgs)
	}
	r, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	rows, failed := readAll(t, r)
	if failed != 0 || int64(len(rows)) != st.RowsWritten {
		t.Fatalf("%d rows read back (%d blocks failed), %d written", len(rows), failed, st.RowsWritten)
	}
	fmt.Printf("tmpfs: %d rows handed over, %d written, %d dropped and counted\n", total, st.RowsWritten, st.DroppedRows)
}
