package store

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// journalStore writes n flushes of rows to partition "a" of a new store
// and returns the directory, the partition path and every row written.
// The index is left as the writer had it before Close (which rewrites it
// whole): as a crash would leave it.
func journalStore(t *testing.T, n int) (dir, part string, all []flow.Record) {
	t.Helper()
	dir = tempDir(t)
	part = filepath.Join(dir, "a", "2025-03-01")
	s := openT(t, Config{Dir: dir, NoSync: true, Writeout: time.Hour, TimePrecision: time.Nanosecond})
	for i := 0; i < n; i++ {
		recs := mkRecs(10+i, uint64(len(all)), "a", t0+int64(i))
		all = append(all, recs...)
		s.Write(recs)
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	live, err := os.ReadFile(filepath.Join(part, indexName))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(part, indexName), live, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, part, all
}

// indexAt parses the index of partition directory part.
func indexAt(t *testing.T, part string) *index {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(part, indexName))
	if err != nil {
		t.Fatal(err)
	}
	x, err := parseIndexFile(b)
	if err != nil {
		t.Fatalf("index of %s: %v", part, err)
	}
	return x
}

// rowsIn reads every row of dir's store, with its stats.
func rowsIn(t *testing.T, dir string) ([]flow.Record, Stats) {
	t.Helper()
	r, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rows, failed := readAll(t, r)
	if failed != 0 {
		t.Fatalf("%d blocks failed to read", failed)
	}
	return rows, r.Stats()
}

// TestIndexJournal: after the first commit (the index written whole) each
// writeout appends one journal record; readers see every block, a
// reopened writer appends after them, and the index holds the same
// entries as one written whole.
func TestIndexJournal(t *testing.T) {
	dir, part, all := journalStore(t, 4)
	b, err := os.ReadFile(filepath.Join(part, indexName))
	if err != nil {
		t.Fatal(err)
	}
	x, err := parseIndexFile(b)
	if err != nil || len(x.entries) != 4 || x.nrec != 3 || x.gen != 4 || x.fileLen != int64(len(b)) {
		t.Fatalf("index: %v, %+v", err, x)
	}
	if bl := baseLen(b); int64(bl+3*(journalHead+indexEntry+4)) != x.fileLen {
		t.Fatalf("base %d bytes, file %d: not 3 one-entry records after it", bl, len(b))
	}
	whole, err := parseIndex(x.marshal())
	if err != nil || whole.dataLen != x.dataLen || len(whole.entries) != 4 {
		t.Fatalf("rewritten whole: %v %+v", err, whole)
	}
	for i := range whole.entries {
		if whole.entries[i] != x.entries[i] {
			t.Fatalf("entry %d: %+v journaled, %+v whole", i, x.entries[i], whole.entries[i])
		}
	}
	rows, st := rowsIn(t, dir)
	sameRows(t, rows, all)
	if st.CorruptIndexes != 0 || st.CorruptBlocks != 0 {
		t.Fatalf("stats %+v", st)
	}
	s := openT(t, Config{Dir: dir, NoSync: true, Writeout: time.Hour, TimePrecision: time.Nanosecond})
	more := mkRecs(7, uint64(len(all)), "a", t0+100)
	s.Write(more)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if x := indexAt(t, part); x.nrec != 4 || len(x.entries) != 5 {
		t.Fatalf("after a reopen: %+v", x)
	}
	// Close rewrites it whole: an index at rest is one an older weir reads.
	s.Close()
	b, _ = os.ReadFile(filepath.Join(part, indexName))
	if y, err := parseIndex(b); err != nil || len(y.entries) != 5 || y.epoch != x.epoch {
		t.Fatalf("after Close: %v %+v", err, y)
	}
	rows, _ = rowsIn(t, dir)
	sameRows(t, rows, append(all, more...))
}

// TestIndexSettlesWhenIdle: a partition idle since the last writeout (a
// day gone by) has its index rewritten whole when the writer releases it.
func TestIndexSettlesWhenIdle(t *testing.T) {
	dir := tempDir(t)
	s := openT(t, Config{Dir: dir, NoSync: true, Writeout: time.Hour, TimePrecision: time.Nanosecond})
	defer s.Close()
	for i := 0; i < 3; i++ {
		s.Write(mkRecs(10, uint64(10*i), "a", t0+int64(i)))
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	part := filepath.Join(dir, "a", "2025-03-01")
	if x := indexAt(t, part); x.nrec != 2 {
		t.Fatalf("%d journal records, want 2", x.nrec)
	}
	for i := 0; i < 2; i++ { // another interface's writeouts: "a" goes idle, then is released
		s.Write(mkRecs(10, 100, "b", t0))
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if x := indexAt(t, part); x.nrec != 0 || len(x.entries) != 3 {
		t.Fatalf("released: %d journal records, %d entries", x.nrec, len(x.entries))
	}
}

// TestIndexJournalCompacts: after maxJournal records the next commit
// rewrites the index whole (no records), and appends resume after it.
func TestIndexJournalCompacts(t *testing.T) {
	dir, part, all := journalStore(t, maxJournal+3)
	b, _ := os.ReadFile(filepath.Join(part, indexName))
	x, err := parseIndexFile(b)
	if err != nil || len(x.entries) != maxJournal+3 || x.nrec != 1 {
		t.Fatalf("%v: %d entries, %d records", err, len(x.entries), x.nrec)
	}
	rows, _ := rowsIn(t, dir)
	sameRows(t, rows, all)
}

// TestIndexJournalTorn: a crash inside an append leaves the index cut at
// any byte of its last record. Readers rebuild it by scanning the data
// file (said and counted: no block is lost), check reports it, and the
// writer reopening it commits a sound index and goes on.
func TestIndexJournalTorn(t *testing.T) {
	dir, part, all := journalStore(t, 3)
	idxPath := filepath.Join(part, indexName)
	b, _ := os.ReadFile(idxPath)
	rec := journalHead + indexEntry + 4
	for cut := len(b) - rec + 1; cut < len(b); cut++ {
		if err := os.WriteFile(idxPath, b[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		rows, st := rowsIn(t, dir)
		sameRows(t, rows, all)
		if st.CorruptIndexes != 1 || st.CorruptBlocks != 0 {
			t.Fatalf("cut at %d: stats %+v", cut, st)
		}
		rep, err := Check(dir, CheckOptions{})
		if err != nil || rep.BadIndexes != 1 || rep.Rows != int64(len(all)) {
			t.Fatalf("cut at %d: check %v %+v", cut, err, rep)
		}
	}
	var l logged
	s := openT(t, Config{Dir: dir, NoSync: true, Writeout: time.Hour, TimePrecision: time.Nanosecond, Log: l.log})
	more := mkRecs(5, uint64(len(all)), "a", t0+50)
	s.Write(more)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if st := s.Stats(); st.CorruptIndexes != 1 {
		t.Fatalf("the writer did not say the cut index: %+v", st)
	}
	rep, err := Check(dir, CheckOptions{})
	if err != nil || !rep.Clean() || rep.Rows != int64(len(all)+len(more)) {
		t.Fatalf("after the writer: %v %+v", err, rep)
	}
}

// TestIndexJournalUncommitted: a crash after a block's fsync but before
// its journal record (the index sound, the data file longer): readers see
// the committed blocks only, and the writer cuts the uncommitted tail
// before it appends, as it did when the index was renamed into place.
func TestIndexJournalUncommitted(t *testing.T) {
	dir, part, all := journalStore(t, 3)
	idxPath := filepath.Join(part, indexName)
	b, _ := os.ReadFile(idxPath)
	x, _ := parseIndexFile(b)
	last := x.entries[2]
	rec := journalHead + indexEntry + 4
	os.WriteFile(idxPath, b[:len(b)-rec], 0o600) // the last record never landed
	committed := all[:10+11]
	rows, st := rowsIn(t, dir)
	sameRows(t, rows, committed)
	if st.CorruptIndexes != 0 || st.CorruptBlocks != 0 {
		t.Fatalf("stats %+v", st)
	}
	s := openT(t, Config{Dir: dir, NoSync: true, Writeout: time.Hour, TimePrecision: time.Nanosecond})
	more := mkRecs(5, uint64(len(all)), "a", t0+50)
	s.Write(more)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	b, _ = os.ReadFile(idxPath)
	if x, err := parseIndexFile(b); err != nil || len(x.entries) != 3 || x.entries[2].off != last.off {
		t.Fatalf("the new block does not replace the uncommitted one: %v %+v", err, x)
	}
	rows, _ = rowsIn(t, dir)
	sameRows(t, rows, append(committed, more...))
}

// TestIndexRewriteCrash: a crash inside a whole rewrite of the index
// (compaction, prune, repair) leaves the old index and a temp file that
// never got renamed: readers use the old index, and the writer removes the
// temp file when it opens the partition.
func TestIndexRewriteCrash(t *testing.T) {
	dir, part, all := journalStore(t, 3)
	tmp := filepath.Join(part, indexTemp)
	x := &index{epoch: 5, gen: 1, iface: "a"}
	if err := os.WriteFile(tmp, x.marshal()[:20], 0o600); err != nil {
		t.Fatal(err)
	}
	rows, st := rowsIn(t, dir)
	sameRows(t, rows, all)
	if st.CorruptIndexes != 0 {
		t.Fatalf("stats %+v", st)
	}
	s := openT(t, Config{Dir: dir, NoSync: true, Writeout: time.Hour, TimePrecision: time.Nanosecond})
	s.Write(mkRecs(5, uint64(len(all)), "a", t0+50))
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Lstat(tmp); !os.IsNotExist(err) {
		t.Fatalf("the temp index is still there: %v", err)
	}
}

// TestIndexJournalDamaged: a flipped byte anywhere in a journal record,
// or bytes after the last one, makes the index rebuilt by scanning: said,
// and no block lost.
func TestIndexJournalDamaged(t *testing.T) {
	dir, part, all := journalStore(t, 3)
	idxPath := filepath.Join(part, indexName)
	b, _ := os.ReadFile(idxPath)
	for off := baseLen(b); off < len(b); off++ {
		m := append([]byte(nil), b...)
		m[off] ^= 0x10
		os.WriteFile(idxPath, m, 0o600)
		rows, st := rowsIn(t, dir)
		sameRows(t, rows, all)
		if st.CorruptIndexes != 1 {
			t.Fatalf("flip at %d: stats %+v", off, st)
		}
	}
	os.WriteFile(idxPath, append(append([]byte(nil), b...), make([]byte, 80)...), 0o600)
	rows, st := rowsIn(t, dir)
	sameRows(t, rows, all)
	if st.CorruptIndexes != 1 {
		t.Fatalf("zeros appended: stats %+v", st)
	}
}

// TestIndexJournalAppendFails: an append whose fsync fails after its
// record was written is cut back off the index: the rows stay buffered,
// and the retry commits them once (no row twice, none lost).
func TestIndexJournalAppendFails(t *testing.T) {
	dir := tempDir(t)
	s := openT(t, Config{Dir: dir, NoSync: true, Writeout: time.Hour, TimePrecision: time.Nanosecond})
	first := mkRecs(10, 0, "a", t0)
	s.Write(first)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	fails := 0
	setFault(s, func(op, path string) error {
		if op == "index sync" && fails == 0 {
			fails++
			return &os.PathError{Op: "fsync", Path: path, Err: syscall.EIO}
		}
		return nil
	})
	second := mkRecs(12, 10, "a", t0+1)
	s.Write(second)
	if err := s.Flush(); err == nil || fails != 1 {
		t.Fatalf("flush with a failing index fsync: %v (%d faults)", err, fails)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "a", "2025-03-01", indexName))
	x0, err := parseIndexFile(b)
	if err != nil || len(x0.entries) != 1 {
		t.Fatalf("the failed record was not cut off: %v %+v", err, x0)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(filepath.Join(dir, "a", "2025-03-01", indexName))
	if x, err := parseIndexFile(b); err != nil || len(x.entries) != 2 || x.epoch == x0.epoch || x.nrec != 0 {
		t.Fatalf("the retry did not rewrite the index under a new epoch (readers may hold the cut record): %v %+v", err, x)
	}
	s.Close()
	rows, st := rowsIn(t, dir)
	sameRows(t, rows, append(first, second...))
	if st.CorruptIndexes != 0 || s.Stats().DroppedRows != 0 {
		t.Fatalf("stats %+v, writer %+v", st, s.Stats())
	}
}
