package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// damageFixture is a store of buildSmall (partitions a and b of three
// blocks: 20, 27 and 34 rows) with a's files at hand.
type damageFixture struct {
	dir, part, data, idx string
	all                  []flow.Record
	dataB, idxB          []byte
	x                    *index
}

func newDamageFixture(t *testing.T) *damageFixture {
	t.Helper()
	f := &damageFixture{dir: tempDir(t)}
	f.all = buildSmall(t, f.dir)
	f.part = filepath.Join(f.dir, "a", "2025-03-01")
	f.data, f.idx = filepath.Join(f.part, dataName), filepath.Join(f.part, indexName)
	f.dataB, _ = os.ReadFile(f.data)
	f.idxB, _ = os.ReadFile(f.idx)
	var err error
	if f.x, err = parseIndexFile(f.idxB); err != nil || len(f.x.entries) != 3 {
		t.Fatal("index", err)
	}
	return f
}

// restore puts a's files back as built.
func (f *damageFixture) restore(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(f.data, f.dataB, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.idx, f.idxB, 0o600); err != nil {
		t.Fatal(err)
	}
}

// rows returns b's rows and those of a's blocks keep says to keep.
func (f *damageFixture) rows(keep func(blk int) bool) []flow.Record {
	var out []flow.Record
	seqA := map[uint64]int{} // Packets -> block of "a"
	n := 0
	for blk := 0; blk < 3; blk++ {
		c := 20 + blk*7
		for q := n; q < n+c; q++ {
			seqA[uint64(q)] = blk
		}
		n += 2 * c // the "b" block of the same round follows
	}
	for _, r := range f.all {
		if r.Iface == "b" || keep(seqA[r.Packets]) {
			out = append(out, r)
		}
	}
	return out
}

// logged collects what a store says through Config.Log.
type logged struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logged) log(m string) { l.mu.Lock(); l.msgs = append(l.msgs, m); l.mu.Unlock() }
func (l *logged) all() string  { l.mu.Lock(); defer l.mu.Unlock(); return strings.Join(l.msgs, "\n") }

// TestDamageAtListingSaid: a block skipped when listing (its header
// flipped, the file cut in it or before it) is counted, and the warning
// names the file, the offset and the records lost, as BlocksDamaged
// reports them; the other rows read back exactly.
func TestDamageAtListingSaid(t *testing.T) {
	f := newDamageFixture(t)
	e := f.x.entries
	for _, tc := range []struct {
		name string
		hurt func() []byte
		lost []int // blocks of a lost
		why  string
	}{
		{"header bit flip", func() []byte {
			b := slices.Clone(f.dataB)
			b[e[1].off+17] ^= 0x10 // the rows field
			return b
		}, []int{1}, "header damaged"},
		{"magic flip", func() []byte {
			b := slices.Clone(f.dataB)
			b[e[2].off] ^= 1
			return b
		}, []int{2}, "header damaged"},
		{"cut in the last block", func() []byte { return f.dataB[:e[2].off+100] }, []int{2}, "past the end of the file"},
		{"cut in the middle one", func() []byte { return f.dataB[:e[1].off+30] }, []int{1, 2}, "past the end of the file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.restore(t)
			if err := os.WriteFile(f.data, tc.hurt(), 0o600); err != nil {
				t.Fatal(err)
			}
			var l logged
			s, err := OpenReadOnly(f.dir)
			if err != nil {
				t.Fatal(err)
			}
			s.cfg.Log = l.log
			defer s.Close()
			_, bad, err := s.BlocksDamaged(0, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(bad) != len(tc.lost) || s.Stats().CorruptBlocks != int64(len(tc.lost)) {
				t.Fatalf("damaged %v, corrupt %d; want blocks %v", bad, s.Stats().CorruptBlocks, tc.lost)
			}
			for i, blk := range tc.lost {
				d := bad[i]
				want := fmt.Sprintf("%s offset %d (%s bytes): %s", f.data, e[blk].off, commas(int64(e[blk].blockLen)), tc.why)
				if d.File != f.data || d.Offset != e[blk].off || d.Rows != e[blk].rows || !strings.HasPrefix(d.String(), want) {
					t.Errorf("damage %+v\n%s", d, d)
				}
				msg := fmt.Sprintf("%s; %d records lost", want[:strings.Index(want, ": ")], e[blk].rows)
				if got := l.all(); !strings.Contains(got, msg[:strings.Index(msg, ";")]) || !strings.Contains(got, fmt.Sprintf("%d records lost", e[blk].rows)) {
					t.Errorf("log %q does not say %q", got, msg)
				}
			}
			rows, failed := readAll(t, s)
			if failed != 0 {
				t.Fatalf("%d blocks failed after listing", failed)
			}
			sameRows(t, rows, f.rows(func(b int) bool { return !slices.Contains(tc.lost, b) }))
			// Listing again says nothing new and counts nothing twice.
			n := len(l.msgs)
			s.Blocks(0, 0, nil)
			if len(l.msgs) != n || s.Stats().CorruptBlocks != int64(len(tc.lost)) {
				t.Fatalf("second listing: %d more messages, corrupt %d", len(l.msgs)-n, s.Stats().CorruptBlocks)
			}
		})
	}
}

// TestDamagedIndexRebuiltPastDamage: with the index cut and block 1's
// header flipped, readers rebuild the index by scanning and keep block 2
// (after the damage), saying the damaged stretch with its records
// unknown (no index lists them).
func TestDamagedIndexRebuiltPastDamage(t *testing.T) {
	f := newDamageFixture(t)
	e := f.x.entries
	b := slices.Clone(f.dataB)
	b[e[1].off+26] ^= 0x40
	os.WriteFile(f.data, b, 0o600)
	os.WriteFile(f.idx, f.idxB[:10], 0o600)
	var l logged
	s, _ := OpenReadOnly(f.dir)
	s.cfg.Log = l.log
	rows, failed := readAll(t, s)
	if failed != 0 {
		t.Fatal(failed)
	}
	sameRows(t, rows, f.rows(func(b int) bool { return b != 1 }))
	st := s.Stats()
	if st.CorruptIndexes != 1 || st.CorruptBlocks != 1 {
		t.Fatalf("stats %+v", st)
	}
	if want := fmt.Sprintf("%s offset %d (%s bytes): header checksum mismatch; records lost: unknown", f.data, e[1].off, commas(int64(e[1].blockLen))); !strings.Contains(l.all(), want) {
		t.Fatalf("log %q\nwant %q", l.all(), want)
	}
}

// TestWriterOpensCutPartition: a capture opening a store whose block
// file was cut says so at Open (file, offset, records), and appending to
// that partition drops the index entries past the end (never extends the
// file with zeros): the rows before the cut and the new ones read back.
func TestWriterOpensCutPartition(t *testing.T) {
	f := newDamageFixture(t)
	e := f.x.entries
	os.WriteFile(f.data, f.dataB[:e[2].off+50], 0o600)
	var l logged
	s := openT(t, Config{Dir: f.dir, NoSync: true, TimePrecision: time.Nanosecond, Log: l.log})
	want := fmt.Sprintf("%s offset %d (%s bytes): past the end of the file (%d bytes): cut off; %d records lost",
		f.data, e[2].off, commas(int64(e[2].blockLen)), e[2].off+50, e[2].rows)
	if !strings.Contains(l.all(), want) || s.Stats().CorruptBlocks != 1 {
		t.Fatalf("at Open: %q, corrupt %d\nwant %q", l.all(), s.Stats().CorruptBlocks, want)
	}
	more := mkRecs(9, 5000, "a", t0+5)
	s.Write(more)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.Stats().CorruptBlocks != 1 {
		t.Fatalf("counted twice: %d", s.Stats().CorruptBlocks)
	}
	r, _ := OpenReadOnly(f.dir)
	rows, failed := readAll(t, r)
	if failed != 0 || r.Stats().CorruptBlocks != 0 {
		t.Fatalf("after the writer: %d failed, %q", failed, r.Stats().Warnings)
	}
	sameRows(t, rows, append(f.rows(func(b int) bool { return b != 2 }), more...))
	// The new block follows block 1 directly: no zeros where the cut block was.
	ix, _ := os.ReadFile(f.idx)
	x, err := parseIndexFile(ix)
	if err != nil || len(x.entries) != 3 || x.entries[2].off != e[2].off {
		t.Fatalf("index after the writer: %v %+v", err, x)
	}
	if st, _ := os.Stat(f.data); st.Size() != x.dataLen {
		t.Fatalf("data file %d bytes, index says %d", st.Size(), x.dataLen)
	}
}

// TestCheckAndRepair: check finds every kind of damage with the records
// lost, exits unclean; repair keeps exactly the intact blocks (also those
// after a damaged one), cuts what follows the last one, and a second
// check is clean. Sampled over flipped bytes and cuts of every block.
func TestCheckAndRepair(t *testing.T) {
	f := newDamageFixture(t)
	e := f.x.entries
	blockAt := func(off int64) int {
		for i, x := range e {
			if off < x.off+int64(x.blockLen) {
				return i
			}
		}
		return -1
	}
	type hurt struct {
		name        string
		data, idx   []byte
		keep        func(int) bool
		damaged     int
		rowsLost    int64
		tail, badIx bool
	}
	var cases []hurt
	for off := int64(0); off < int64(len(f.dataB)); off += 37 {
		b := slices.Clone(f.dataB)
		b[off] ^= 0x5a
		hit := blockAt(off)
		cases = append(cases, hurt{name: fmt.Sprintf("flip data %d", off), data: b, idx: f.idxB,
			keep: func(i int) bool { return i != hit }, damaged: 1, rowsLost: int64(e[hit].rows)})
	}
	for cut := int64(1); cut < int64(len(f.dataB)); cut += 53 {
		var lost int64
		n := 0
		for _, x := range e {
			if x.off+int64(x.blockLen) > cut {
				lost += int64(x.rows)
				n++
			}
		}
		cases = append(cases, hurt{name: fmt.Sprintf("cut data %d", cut), data: f.dataB[:cut], idx: f.idxB,
			keep: func(i int) bool { return e[i].off+int64(e[i].blockLen) <= cut }, damaged: n, rowsLost: lost})
	}
	for _, cut := range []int{0, 10, len(f.idxB) - 1} {
		cases = append(cases, hurt{name: fmt.Sprintf("cut index %d", cut), data: f.dataB, idx: f.idxB[:cut],
			keep: func(int) bool { return true }, badIx: true})
	}
	cases = append(cases, hurt{name: "garbage appended", data: append(slices.Clone(f.dataB), "not a block at all"...), idx: f.idxB,
		keep: func(int) bool { return true }, tail: true})
	for _, tc := range cases {
		os.WriteFile(f.data, tc.data, 0o600)
		os.WriteFile(f.idx, tc.idx, 0o600)
		var lines []string
		rep, err := Check(f.dir, CheckOptions{Problem: func(d Damage) { lines = append(lines, d.String()) }})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if rep.Clean() || rep.Partitions != 2 || rep.DamagedBlocks != tc.damaged || rep.DamagedRows != tc.rowsLost ||
			(rep.BadIndexes == 1) != tc.badIx || (rep.Tails == 1) != tc.tail || len(lines) != len(rep.Problems) {
			t.Fatalf("%s: report %+v\n%s", tc.name, rep, strings.Join(lines, "\n"))
		}
		want := f.rows(tc.keep)
		if rep.Rows != int64(len(want)) {
			t.Fatalf("%s: %d intact rows reported, %d expected", tc.name, rep.Rows, len(want))
		}
		var acts []string
		rep, err = Check(f.dir, CheckOptions{Repair: true, Action: func(a string) { acts = append(acts, a) }})
		if err != nil || rep.Repaired != 1 || len(acts) != 1 {
			t.Fatalf("%s: repair %v, %+v, %q", tc.name, err, rep, acts)
		}
		if said := fmt.Sprintf("removed %d damaged blocks (%s records)", tc.damaged, commas(tc.rowsLost)); !strings.Contains(acts[0], said) &&
			!strings.Contains(acts[0], "no intact block in it") {
			t.Fatalf("%s: repair says %q, not %q", tc.name, acts[0], said)
		}
		rep, err = Check(f.dir, CheckOptions{})
		if err != nil || !rep.Clean() || rep.Rows != int64(len(want)) {
			t.Fatalf("%s: after repair %v %+v", tc.name, err, rep)
		}
		r, _ := OpenReadOnly(f.dir)
		rows, failed := readAll(t, r)
		if failed != 0 || r.Stats().CorruptBlocks != 0 {
			t.Fatalf("%s: %d failed after repair", tc.name, failed)
		}
		sameRows(t, rows, want)
		r.Close()
		if _, err := os.Stat(f.part); err != nil {
			if !errors.Is(err, os.ErrNotExist) || len(want) != len(f.rows(func(int) bool { return false })) {
				t.Fatalf("%s: %v", tc.name, err)
			}
			os.MkdirAll(f.part, 0o700) // repair removed a partition with nothing intact
		}
	}
}

// TestRepairRefusedWhileWriting: repair needs the writer lock.
func TestRepairRefusedWhileWriting(t *testing.T) {
	dir := tempDir(t)
	s := openT(t, Config{Dir: dir, NoSync: true})
	defer s.Close()
	if _, err := Check(dir, CheckOptions{Repair: true}); !errors.Is(err, ErrLocked) {
		t.Fatalf("repair beside a writer: %v", err)
	}
	rep, err := Check(dir, CheckOptions{})
	if err != nil || !rep.WriterRunning || !rep.Clean() {
		t.Fatalf("check beside a writer: %v %+v", err, rep)
	}
}

// TestScanBounded: a data file full of false block magics, each claiming
// a large header, is scanned within its read budget (it used to read
// every candidate's header: quadratic), as one damaged stretch.
func TestScanBounded(t *testing.T) {
	var pat [16]byte
	copy(pat[:], blockMagic)
	binary.LittleEndian.PutUint32(pat[4:], 1<<21) // block length
	binary.LittleEndian.PutUint32(pat[8:], 1<<20) // header length
	data := bytes.Repeat(pat[:], 4<<20/len(pat))
	sc := scanner{r: bytes.NewReader(data), size: int64(len(data)), decode: true}
	start := time.Now()
	blocks, gaps := sc.scan()
	if len(blocks) != 0 || len(gaps) != 1 || gaps[0].off != 0 || gaps[0].end != int64(len(data)) ||
		sc.spent > scanBudget(sc.size)+maxHeaderLen || !strings.Contains(gaps[0].why, "gave up") {
		t.Fatalf("blocks %v, gaps %+v, read %d bytes (budget %d)", blocks, gaps, sc.spent, scanBudget(sc.size))
	}
	t.Logf("%d MiB of false starts scanned in %v, %d MiB read", len(data)>>20, time.Since(start), sc.spent>>20)
}
