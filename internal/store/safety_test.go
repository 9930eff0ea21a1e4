package store

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// checkRow verifies r is exactly the record mkRecs made for its sequence
// number (Packets), so a wrong row cannot pass.
func checkRow(t testing.TB, r flow.Record) {
	t.Helper()
	seq := r.Packets
	want := mkRecs(1, seq, r.Iface, 0)[0]
	want.Start, want.End = r.Start, r.Start+1000
	if r != want {
		t.Fatalf("wrong row:\n got %+v\nwant %+v", r, want)
	}
}

// buildSmall writes 2 partitions of 3 blocks each and returns every row.
func buildSmall(t *testing.T, dir string) []flow.Record {
	s := openT(t, Config{Dir: dir, NoSync: true, TimePrecision: time.Nanosecond})
	var all []flow.Record
	for b := 0; b < 3; b++ {
		for _, iface := range []string{"a", "b"} {
			recs := mkRecs(20+b*7, uint64(len(all)), iface, t0+int64(b))
			s.Write(recs)
			all = append(all, recs...)
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	return all
}

func TestCorruption(t *testing.T) {
	dir := tempDir(t)
	all := buildSmall(t, dir)
	part := filepath.Join(dir, "a", "2025-03-01")
	dataPath, idxPath := filepath.Join(part, dataName), filepath.Join(part, indexName)
	data, _ := os.ReadFile(dataPath)
	idx, _ := os.ReadFile(idxPath)
	x, err := parseIndexFile(idx)
	if err != nil || len(x.entries) != 3 {
		t.Fatal("index", err)
	}
	rowsOf := func(keep func(blk int) bool) []flow.Record {
		var out []flow.Record
		n := 0
		for _, r := range all {
			if r.Iface == "b" {
				out = append(out, r)
			}
		}
		for blk := 0; blk < 3; blk++ {
			c := 20 + blk*7
			if keep(blk) {
				for _, r := range all {
					if r.Iface == "a" && r.Packets >= uint64(n) && r.Packets < uint64(n+c) {
						out = append(out, r)
					}
				}
			}
			n += c + c // the "b" block of the same round follows
		}
		return out
	}
	blockAt := func(off int) int {
		for i, e := range x.entries {
			if int64(off) < e.off+int64(e.blockLen) {
				return i
			}
		}
		return -1
	}
	check := func(what string, wantRows []flow.Record, wantCorrupt int64) {
		t.Helper()
		s, err := OpenReadOnly(dir)
		if err != nil {
			t.Fatal(err)
		}
		rows, failed := readAll(t, s)
		for _, r := range rows {
			checkRow(t, r)
		}
		if st := s.Stats(); st.CorruptBlocks != wantCorrupt || int64(failed) > wantCorrupt {
			t.Fatalf("%s: corrupt %d failed %d, want %d (%q)", what, st.CorruptBlocks, failed, wantCorrupt, st.Warnings)
		}
		if len(rows) != len(wantRows) {
			t.Fatalf("%s: %d rows, want %d", what, len(rows), len(wantRows))
		}
		sameRows(t, rows, wantRows)
	}
	mut := make([]byte, len(data))
	for off := 0; off < len(data); off += 1 + off%3 {
		copy(mut, data)
		mut[off] ^= byte(1 + off%255)
		os.WriteFile(dataPath, mut, 0o644)
		hit := blockAt(off)
		check(fmt.Sprintf("flip data %d", off), rowsOf(func(b int) bool { return b != hit }), 1)
	}
	for cut := 0; cut < len(data); cut += 3 {
		os.WriteFile(dataPath, data[:cut], 0o644)
		lost := 0
		for _, e := range x.entries {
			if e.off+int64(e.blockLen) > int64(cut) {
				lost++
			}
		}
		check(fmt.Sprintf("truncate data at %d", cut), rowsOf(func(b int) bool {
			e := x.entries[b]
			return e.off+int64(e.blockLen) <= int64(cut)
		}), int64(lost))
	}
	os.WriteFile(dataPath, data, 0o644)
	// A damaged index is rebuilt from the (intact) data file.
	everything := rowsOf(func(int) bool { return true })
	for off := 0; off < len(idx); off += 1 + off%4 {
		m := append([]byte(nil), idx...)
		m[off] ^= 0x41
		os.WriteFile(idxPath, m, 0o644)
		check(fmt.Sprintf("flip index %d", off), everything, 0)
	}
	for cut := 0; cut < len(idx); cut += 5 {
		os.WriteFile(idxPath, idx[:cut], 0o644)
		check(fmt.Sprintf("truncate index at %d", cut), everything, 0)
	}
	// The writer recovers too, and appends after the intact blocks.
	os.WriteFile(idxPath, idx[:10], 0o644)
	s := openT(t, Config{Dir: dir, NoSync: true, TimePrecision: time.Nanosecond})
	more := mkRecs(5, 10000, "a", t0+9)
	s.Write(more)
	if err := s.Close(); err != nil || s.Stats().CorruptIndexes != 1 {
		t.Fatalf("close %v, stats %+v", err, s.Stats())
	}
	check("after writer recovery", append(everything, more...), 0)
}

// TestCrashChild is the child of TestCrashSafety: it writes and flushes
// blocks forever, printing the next unflushed sequence number after each
// successful Flush.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv("WEIR_STORE_CRASH_DIR")
	if dir == "" {
		t.Skip("crash-test child only")
	}
	base, _ := strconv.ParseUint(os.Getenv("WEIR_STORE_CRASH_BASE"), 10, 64)
	s, err := Open(Config{Dir: dir, TimePrecision: time.Nanosecond})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(3)
	}
	fmt.Println("ready") // the parent's kill lands during writes, not during the process's start
	seq := base
	for j := 0; ; j++ {
		iface := []string{"a", "b"}[j%2]
		recs := mkRecs(40, seq, iface, t0+int64(j)*int64(time.Minute))
		if err := s.Write(recs); err != nil {
			os.Exit(4)
		}
		if err := s.Flush(); err != nil {
			os.Exit(5)
		}
		seq += 40
		fmt.Println(seq)
	}
}

func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	dir := tempDir(t)
	r := rand.New(rand.NewPCG(11, 12))
	type span struct{ lo, hi uint64 }
	var flushed []span
	deadline := time.Now().Add(60 * time.Second)
	for it := 0; it < 100 && time.Now().Before(deadline); it++ {
		base := uint64(it) * 1_000_000
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "WEIR_STORE_CRASH_DIR="+dir, "WEIR_STORE_CRASH_BASE="+strconv.FormatUint(base, 10))
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		last := base
		done, ready := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if v, err := strconv.ParseUint(sc.Text(), 10, 64); err == nil {
					mu.Lock()
					last = v
					mu.Unlock()
				} else if sc.Text() == "ready" {
					close(ready)
				} else {
					t.Errorf("child: %s", sc.Text())
				}
			}
		}()
		select { // a loaded machine can take long to start a race-enabled child
		case <-ready:
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("the child did not open the store in 30 s")
		}
		time.Sleep(time.Duration(5+r.IntN(60)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		<-done
		cmd.Wait()
		mu.Lock()
		flushed = append(flushed, span{base, last})
		mu.Unlock()

		s, err := OpenReadOnly(dir)
		if err != nil {
			t.Fatal(err)
		}
		rows, failed := readAll(t, s)
		if failed != 0 || s.Stats().CorruptBlocks != 0 {
			t.Fatalf("iteration %d: %d blocks failed: %q", it, failed, s.Stats().Warnings)
		}
		seen := make(map[uint64]bool, len(rows))
		for _, row := range rows {
			checkRow(t, row)
			if seen[row.Packets] {
				t.Fatalf("row %d twice", row.Packets)
			}
			seen[row.Packets] = true
		}
		for _, sp := range flushed {
			for q := sp.lo; q < sp.hi; q++ {
				if !seen[q] {
					t.Fatalf("iteration %d: row %d was reported flushed but is missing", it, q)
				}
			}
		}
		s.Close()
	}
	total := uint64(0)
	for _, sp := range flushed {
		total += sp.hi - sp.lo
	}
	// The 60 s bound stops the loop early on a loaded machine (each
	// iteration reads the whole store again); 20 kills still exercise it.
	if len(flushed) < 20 || total == 0 {
		t.Fatalf("only %d kills, %d rows flushed", len(flushed), total)
	}
	t.Logf("%d kills, %d rows confirmed flushed", len(flushed), total)
}

func TestConcurrentReader(t *testing.T) {
	dir := tempDir(t)
	w := openT(t, Config{Dir: dir, NoSync: true, TimePrecision: time.Nanosecond})
	r, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	const blocks = 150
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var maxSeen int
	wg.Add(1)
	go func() {
		defer wg.Done()
		var c Columns
		for {
			select {
			case <-stop:
				return
			default:
			}
			bl, err := r.Blocks(0, 0, nil)
			if err != nil {
				t.Error(err)
				return
			}
			maxSeen = max(maxSeen, len(bl))
			for i := range bl {
				if err := r.ReadBlock(&bl[i], ColAll, &c); err != nil {
					t.Errorf("reader: %v", err)
					return
				}
				if c.N != 30 {
					t.Errorf("block of %d rows", c.N)
				}
				for j := 0; j < c.N; j++ {
					checkRow(t, rowOf(&c, j))
				}
			}
		}
	}()
	for b := 0; b < blocks; b++ {
		w.Write(mkRecs(30, uint64(b*30), "eth0", t0+int64(b)))
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	w.Close()
	rows, _ := readAll(t, r)
	if len(rows) != blocks*30 || r.Stats().CorruptBlocks != 0 {
		t.Fatalf("%d rows, corrupt %d", len(rows), r.Stats().CorruptBlocks)
	}
	if maxSeen == 0 {
		t.Log("reader never saw a block while writing")
	}
	_ = errors.New
}
