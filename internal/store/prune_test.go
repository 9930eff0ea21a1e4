package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// oneDay writes blocks of realistic rows into one day partition of
// iface "eth0", one block per Flush, and returns the Store.
func oneDay(t *testing.T, dir string, blocks, rows int, noPunch bool) *Store {
	t.Helper()
	s := openT(t, Config{Dir: dir, Writeout: time.Hour, TimePrecision: time.Nanosecond, NoSync: true})
	s.noPunch = noPunch
	g := newGen(5)
	for b := 0; b < blocks; b++ {
		s.Write(g.window(nil, rows, t0+int64(b)*int64(time.Minute), "eth0"))
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestMaxSizeKeepsWhatTheBoundAllows: with one day stored (about 1.8 MiB
// in 30 blocks), --max-size 1MiB prunes the oldest blocks, not the day: the
// store ends at most 1 MiB and within one block of it, the day's newest
// blocks read back intact, and what is on disk is what the store says.
// Both ways of freeing: punched holes, and the rewrite swapped in.
func TestMaxSizeKeepsWhatTheBoundAllows(t *testing.T) {
	for _, noPunch := range []bool{false, true} {
		dir := tempDir(t)
		blocks, bound := 30, int64(1<<20)
		if raceEnabled { // encoding is ~10x slower: half the store, half the bound
			blocks, bound = 15, 1<<19
		}
		s := oneDay(t, dir, blocks, 4000, noPunch)
		before, _ := s.Blocks(0, 0, nil)
		var largest int64
		for _, b := range before {
			largest = max(largest, int64(b.Size))
		}
		s.cfg.MaxSize = bound
		ps, err := s.Prune(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		_, total, _ := s.survey()
		if total > bound || total < bound-largest-16<<10 || s.Stats().BytesOnDisk != total {
			t.Fatalf("noPunch %v: %d bytes on disk (store says %d) after pruning to %d; largest block %d; %+v",
				noPunch, total, s.Stats().BytesOnDisk, bound, largest, ps)
		}
		after, _ := s.Blocks(0, 0, nil)
		if ps.Partitions != 0 || ps.Blocks == 0 || len(after)+ps.Blocks != len(before) {
			t.Fatalf("noPunch %v: pruned %+v, %d of %d blocks left", noPunch, ps, len(after), len(before))
		}
		for i, b := range after { // the newest ones, intact
			want := before[len(before)-len(after)+i]
			if b.MinStart != want.MinStart || b.Rows != want.Rows {
				t.Fatalf("noPunch %v: block %d is not one of the newest", noPunch, i)
			}
		}
		s.Close()
		r, _ := OpenReadOnly(dir)
		rows, failed := readAll(t, r)
		if failed != 0 || len(rows) != 4000*len(after) || r.Stats().CorruptBlocks != 0 {
			t.Fatalf("noPunch %v: %d rows, %d failed, %q", noPunch, len(rows), failed, r.Stats().Warnings)
		}
		if rep, err := Check(dir, CheckOptions{}); err != nil || !rep.Clean() {
			t.Fatalf("noPunch %v: check after pruning: %v %+v", noPunch, err, rep)
		}
		t.Logf("noPunch %v: kept %d of %d blocks, %d bytes", noPunch, len(after), len(before), total)
	}
}

// TestRetentionByBlock: retention deletes the blocks whose rows all ended
// before the cutoff, inside a day too.
func TestRetentionByBlock(t *testing.T) {
	dir := tempDir(t)
	s := openT(t, Config{Dir: dir, Writeout: time.Hour, TimePrecision: time.Nanosecond, NoSync: true})
	defer s.Close()
	for h := int64(0); h < 10; h++ {
		s.Write(mkRecs(10, uint64(h*10), "a", t0+h*int64(time.Hour)))
		s.Flush()
	}
	s.cfg.Retention = 5 * time.Hour
	ps, err := s.Prune(time.Unix(0, t0+10*int64(time.Hour)))
	if err != nil || ps.Blocks != 5 || ps.Rows != 50 || ps.Partitions != 0 {
		t.Fatalf("%v %+v", err, ps)
	}
	rows, _ := readAll(t, s)
	for _, r := range rows {
		if r.Packets < 50 {
			t.Fatalf("row %d of hour %d survived", r.Packets, r.Packets/10)
		}
	}
	if len(rows) != 50 {
		t.Fatalf("%d rows left", len(rows))
	}
}

// TestReaderMeetsPrunedBlock: a block listed before retention punched it
// out reads as ErrPruned, not as damage.
func TestReaderMeetsPrunedBlock(t *testing.T) {
	dir := tempDir(t)
	s := oneDay(t, dir, 4, 2000, false)
	defer s.Close()
	r, _ := OpenReadOnly(dir)
	bl, _ := r.Blocks(0, 0, nil)
	_, total, _ := s.survey()
	s.cfg.MaxSize = total - int64(bl[0].Size+bl[1].Size) + 16<<10 // the oldest two go, punched out (file system blocks at their edges stay)
	if ps, err := s.Prune(time.Now()); err != nil || ps.Blocks != 2 {
		t.Fatalf("%v %+v", err, ps)
	}
	var c Columns
	pruned := 0
	for i := range bl {
		err := r.ReadBlock(&bl[i], ColAll, &c)
		switch {
		case errors.Is(err, ErrPruned) && i < 2:
			pruned++
		case err != nil:
			t.Fatalf("block %d: %v", i, err)
		}
	}
	if pruned != 2 || r.Stats().CorruptBlocks != 0 {
		t.Fatalf("pruned blocks counted as corrupt: %q", r.Stats().Warnings)
	}
}

// TestRewriteInterrupted: a rewrite cut short by a crash leaves either the
// old partition (the new one is discarded at Open) or, once the old was
// renamed away, the complete new one (moved into place at Open).
func TestRewriteInterrupted(t *testing.T) {
	dir := tempDir(t)
	s := oneDay(t, dir, 3, 100, true)
	s.Close()
	part := filepath.Join(dir, "eth0", "2025-03-01")
	cmp := filepath.Join(dir, "eth0", ".cmp-2025-03-01")
	copyDir(t, part, cmp)
	// Crash before the swap: both are there; the old one stays.
	os.WriteFile(filepath.Join(cmp, dataName), []byte("half a rewrite"), 0o600)
	s = openT(t, Config{Dir: dir, NoSync: true})
	s.Close()
	if _, err := os.Stat(cmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("unfinished rewrite left: %v", err)
	}
	r, _ := OpenReadOnly(dir)
	if rows, _ := readAll(t, r); len(rows) != 300 {
		t.Fatalf("%d rows", len(rows))
	}
	// Crash between the renames: only the complete new one is there.
	copyDir(t, part, cmp)
	os.Rename(part, filepath.Join(dir, "eth0", ".del-2025-03-01-1"))
	s = openT(t, Config{Dir: dir, NoSync: true})
	s.Close()
	ents, _ := os.ReadDir(filepath.Join(dir, "eth0"))
	if len(ents) != 1 || ents[0].Name() != "2025-03-01" {
		t.Fatalf("left in eth0/: %v", ents)
	}
	r, _ = OpenReadOnly(dir)
	if rows, _ := readAll(t, r); len(rows) != 300 {
		t.Fatalf("%d rows after finishing the rewrite", len(rows))
	}
}

// copyDir copies the files of directory src into a new directory dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.Mkdir(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(src)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600)
	}
}
