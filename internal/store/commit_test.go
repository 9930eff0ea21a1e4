package store

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// TestPipelineKillChild is the child of TestPipelineKilledBeforeIndex:
// it hands blocks of 40 rows to the commit pipeline with FlushAsync (one
// partition, one block each), printing the rows acknowledged after every
// third block's Flush, and kills itself with SIGKILL when the committer,
// the Kth block's file fsynced, is about to write its index record.
func TestPipelineKillChild(t *testing.T) {
	dir := os.Getenv("WEIR_STORE_PIPE_DIR")
	if dir == "" {
		t.Skip("pipeline crash-test child only")
	}
	k, _ := strconv.Atoi(os.Getenv("WEIR_STORE_PIPE_K"))
	s, err := Open(Config{Dir: dir, TimePrecision: time.Nanosecond, Writeout: time.Hour})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(3)
	}
	var commits atomic.Int64
	setFault(s, func(op, path string) error {
		if op == "index" && commits.Add(1) == int64(k) {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal lands before anything else runs here
		}
		return nil
	})
	seq := uint64(0)
	for j := 0; j < 10*k; j++ {
		if err := s.Write(mkRecs(40, seq, "a", t0+int64(j)*int64(time.Minute))); err != nil {
			os.Exit(4)
		}
		seq += 40
		if err := s.FlushAsync(); err != nil {
			os.Exit(5)
		}
		if j%3 == 2 {
			if err := s.Flush(); err != nil {
				os.Exit(6)
			}
			fmt.Println(seq)
		}
	}
	os.Exit(7) // never: the Kth commit kills the process
}

// TestPipelineKilledBeforeIndex kills the writer between a block file's
// fsync and its index record, with later blocks already appended behind
// it: readers see exactly the blocks committed before it (every
// acknowledged row, none twice, none of the killed block or those after
// it, no damage), and a writer reopening the store cuts the tail and
// appends after the committed blocks.
func TestPipelineKilledBeforeIndex(t *testing.T) {
	for _, k := range []int{1, 2, 5, 9} {
		t.Run(strconv.Itoa(k), func(t *testing.T) {
			dir := tempDir(t)
			cmd := exec.Command(os.Args[0], "-test.run=^TestPipelineKillChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), "WEIR_STORE_PIPE_DIR="+dir, "WEIR_STORE_PIPE_K="+strconv.Itoa(k))
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			acked := uint64(0)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				v, err := strconv.ParseUint(sc.Text(), 10, 64)
				if err != nil {
					t.Errorf("child: %s", sc.Text())
					continue
				}
				acked = v
			}
			err = cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the child did not die by its SIGKILL: %v", err)
			}
			rows, st := rowsIn(t, dir)
			if st.CorruptBlocks != 0 || st.CorruptIndexes != 0 {
				t.Fatalf("damage after the kill: %+v", st)
			}
			// What is committed is a prefix of whole blocks, in order: the
			// K-1 commits before the kill, each of one block or more (a group).
			committed := uint64(len(rows))
			got := seqs(rows)
			if len(got) != len(rows) || committed%40 != 0 || committed < uint64(k-1)*40 {
				t.Fatalf("%d rows (%d distinct) after the kill: not the whole blocks of %d commits", len(rows), len(got), k-1)
			}
			for q := uint64(0); q < committed; q++ {
				if !got[q] {
					t.Fatalf("row %d missing: the %d rows committed are not the first ones handed over", q, committed)
				}
			}
			if acked > committed {
				t.Fatalf("the child acknowledged %d rows, only %d committed", acked, committed)
			}
			// The Kth block's bytes were fsynced before the kill: the data
			// file runs past what the index commits.
			part := filepath.Join(dir, "a", "2025-03-01")
			fi, err := os.Stat(filepath.Join(part, dataName))
			if err != nil {
				t.Fatal(err)
			}
			r, _ := OpenReadOnly(dir)
			bl, _ := r.Blocks(-1<<63, 0, nil)
			r.Close()
			end := int64(0)
			if n := len(bl); n > 0 {
				end = bl[n-1].Offset + int64(bl[n-1].Size)
			}
			if fi.Size() <= end {
				t.Fatalf("data file %d bytes, committed %d: the kill did not land after the block's write", fi.Size(), end)
			}
			s := openT(t, Config{Dir: dir, TimePrecision: time.Nanosecond, Writeout: time.Hour})
			more := mkRecs(40, 1_000_000, "a", t0+int64(time.Hour))
			s.Write(more)
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			rows, st = rowsIn(t, dir)
			if uint64(len(rows)) != committed+40 || st.CorruptBlocks != 0 {
				t.Fatalf("after reopening: %d rows, want %d; %+v", len(rows), committed+40, st)
			}
		})
	}
}

// TestPipelineOverlapsAndBounds holds the committer inside a block file's
// fsync: Write, FlushAsync (the next blocks encoded and appended),
// Pending and a reader's Blocks go on meanwhile; at most maxInFlight
// writeouts are handed over (the next waits for room before encoding); Flush
// returns only after the held fsync; and no reader ever lists a block
// whose fsync had not returned.
func TestPipelineOverlapsAndBounds(t *testing.T) {
	dir := tempDir(t)
	s := openT(t, Config{Dir: dir, TimePrecision: time.Nanosecond, Writeout: time.Hour})
	// syncing is the data file's size when an fsync of it begins (every
	// block appended by then is in it); synced is that size once the
	// fsync has returned (the index step comes only after it).
	var writes, syncs, syncing, synced atomic.Int64
	hold, held := make(chan struct{}), make(chan struct{})
	var holdOnce sync.Once
	setFault(s, func(op, path string) error {
		switch op {
		case "write":
			writes.Add(1)
		case "sync":
			fi, err := os.Stat(path)
			if err != nil {
				return err
			}
			syncing.Store(fi.Size())
			if syncs.Add(1) == 2 { // the second block's fsync: held
				holdOnce.Do(func() { close(held) })
				<-hold
			}
		case "index":
			synced.Store(syncing.Load())
		}
		return nil
	})
	r, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	stop, readerDone := make(chan struct{}), make(chan struct{})
	var listings atomic.Int64
	go func() { // a reader: never a block beyond the fsyncs that returned
		defer close(readerDone)
		var c Columns
		for {
			select {
			case <-stop:
				return
			default:
			}
			bl, err := r.Blocks(-1<<63, 0, nil)
			done := synced.Load() // after the listing: at least what had returned then
			if err != nil {
				t.Error(err)
				return
			}
			if n := len(bl); n > 0 && bl[n-1].Offset+int64(bl[n-1].Size) > done {
				t.Errorf("a reader lists a block ending at byte %d, fsyncs returned cover %d", bl[n-1].Offset+int64(bl[n-1].Size), done)
				return
			}
			for i := range bl {
				if err := r.ReadBlock(&bl[i], ColAll, &c); err != nil {
					t.Errorf("reader: %v", err)
					return
				}
			}
			listings.Add(1)
			time.Sleep(time.Millisecond)
		}
	}()
	seq := uint64(0)
	block := func() {
		s.Write(mkRecs(30, seq, "a", t0+int64(seq)))
		seq += 30
	}
	block()
	if err := s.Flush(); err != nil { // block 1: committed
		t.Fatal(err)
	}
	block()
	if err := s.FlushAsync(); err != nil { // block 2: its fsync is held
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the committer never reached the second block's fsync")
	}
	if bl, err := r.Blocks(-1<<63, 0, nil); err != nil || len(bl) != 1 {
		t.Fatalf("with the second block's fsync held a reader lists %d blocks (%v), want 1", len(bl), err)
	}
	// While it is held: the writer lock is free for Write, FlushAsync
	// and Pending (blocks 3 on fill the pipeline: maxInFlight outstanding).
	for i := 0; i < maxInFlight-1; i++ {
		block()
		if err := s.FlushAsync(); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	s.Pending(func(*flow.Record) { n++ })
	if n != maxInFlight*30 {
		t.Fatalf("Pending gave %d rows, want the %d of the blocks in flight", n, maxInFlight*30)
	}
	flushed := make(chan error, 1)
	go func() {
		block() // one more: waits for room, then is encoded and appended
		if err := s.FlushAsync(); err != nil {
			flushed <- err
			return
		}
		flushed <- s.Flush()
	}()
	waitFor(t, 30*time.Second, "the pipeline's blocks were never appended", func() bool { return writes.Load() == maxInFlight+1 })
	l0 := listings.Load()
	waitFor(t, 30*time.Second, "the reader stopped while an fsync was held", func() bool { return listings.Load() > l0+3 })
	select {
	case err := <-flushed:
		t.Fatalf("FlushAsync/Flush returned (%v) while the pipeline was full and an fsync held", err)
	case <-time.After(200 * time.Millisecond):
	}
	if w := writes.Load(); w != maxInFlight+1 {
		t.Fatalf("%d blocks appended with an fsync held: the pipeline is not bounded at %d", w, maxInFlight)
	}
	close(hold)
	select {
	case err := <-flushed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Flush did not return after the fsync was released")
	}
	close(stop)
	<-readerDone
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rows, st := rowsIn(t, dir)
	if uint64(len(rows)) != seq || len(seqs(rows)) != len(rows) || st.CorruptBlocks != 0 {
		t.Fatalf("%d rows (%d distinct), want %d; %+v", len(rows), len(seqs(rows)), seq, st)
	}
}

// TestPipelineFsyncErrorReturned: a block file's fsync failing in the
// committer reaches the caller (the next Flush returns it, counted by
// reason), the blocks handed over after it are not committed past it,
// and every row is written exactly once by the retry: none lost.
func TestPipelineFsyncErrorReturned(t *testing.T) {
	for _, op := range []string{"sync", "index sync"} {
		t.Run(op, func(t *testing.T) {
			dir := tempDir(t)
			var l logged
			s := openT(t, Config{Dir: dir, TimePrecision: time.Nanosecond, Writeout: time.Hour, Log: l.log})
			var n atomic.Int64
			setFault(s, func(o, path string) error {
				if o == op && n.Add(1) == 3 {
					return &os.PathError{Op: "fsync", Path: path, Err: syscall.EIO}
				}
				return nil
			})
			seq := uint64(0)
			returned := 0 // by FlushAsync when it settled the failed commit, else by Flush
			for i := 0; i < 6; i++ {
				s.Write(mkRecs(25, seq, []string{"a", "b"}[i%2], t0+int64(seq)))
				seq += 25
				if err := s.FlushAsync(); errors.Is(err, syscall.EIO) {
					returned++
				} else if err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Flush(); errors.Is(err, syscall.EIO) {
				returned++
			} else if err != nil {
				t.Fatalf("Flush: %v", err)
			}
			if returned != 1 {
				t.Fatalf("the failed commit was returned %d times, want once", returned)
			}
			st := s.Stats()
			if st.WriteErrors["io"] != 1 || strings.Count(l.all(), "input/output error") != 1 {
				t.Fatalf("not counted or said once: %+v\n%s", st.WriteErrors, l.all())
			}
			if err := s.Flush(); err != nil { // the retry
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			st = s.Stats()
			rows, rst := rowsIn(t, dir)
			if uint64(len(rows)) != seq || len(seqs(rows)) != len(rows) || rst.CorruptBlocks != 0 || st.DroppedRows != 0 || st.RowsWritten != int64(seq) {
				t.Fatalf("%d rows (%d distinct), want %d; written %d dropped %d", len(rows), len(seqs(rows)), seq, st.RowsWritten, st.DroppedRows)
			}
		})
	}
}

// TestPipelineKeepsBuffers: with every commit slot in flight, each
// committed writeout's row buffer is kept for a later one (not only 2 of
// them: the others were new 1.5 MB buffers a block), and the next
// writeouts take them; the rows kept stay within maxSpareRows.
func TestPipelineKeepsBuffers(t *testing.T) {
	s := openT(t, Config{NoSync: true, Writeout: time.Hour})
	defer s.Close()
	// Commits wait at the gate until every slot is taken.
	var gmu sync.Mutex
	gate := make(chan struct{})
	open := func() {
		gmu.Lock()
		defer gmu.Unlock()
		select {
		case <-gate:
		default:
			close(gate)
		}
	}
	shut := func() {
		gmu.Lock()
		gate = make(chan struct{})
		gmu.Unlock()
	}
	defer open()
	setFault(s, func(op, _ string) error {
		if op == "index" {
			gmu.Lock()
			g := gate
			gmu.Unlock()
			<-g
		}
		return nil
	})
	seq := uint64(0)
	round := func() {
		for range maxInFlight {
			if err := s.Write(mkRecs(500, seq, "a", t0+int64(seq))); err != nil {
				t.Fatal(err)
			}
			seq += 500
			if err := s.FlushAsync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	spares := func() (n, rows, sum int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, b := range s.spare {
			sum += cap(b)
		}
		return len(s.spare), s.spareRows, sum
	}
	round()
	open()
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	n, rows, sum := spares()
	if n != maxInFlight || rows != sum {
		t.Fatalf("after %d commits: %d buffers kept (%d rows counted, %d held), want %d", maxInFlight, n, rows, sum, maxInFlight)
	}
	shut()
	round() // every writeout takes a kept buffer
	if n, rows, sum = spares(); n != 0 || rows != 0 || sum != 0 {
		t.Fatalf("after %d more writeouts: %d buffers kept (%d rows counted, %d held), want none", maxInFlight, n, rows, sum)
	}
	open()
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, rows, sum = spares(); n != maxInFlight || rows != sum {
		t.Fatalf("again: %d buffers kept (%d rows counted, %d held)", n, rows, sum)
	}
	if got := s.Stats().RowsWritten; got != int64(seq) {
		t.Fatalf("%d rows written, want %d", got, seq)
	}
	// The bound: buffers of 2^16 rows, 20 MB each, fill maxSpareRows at two.
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spare, s.spareRows = nil, 0
	for range 3 {
		s.keepSpare(make([]flow.Record, 0, 1<<16))
	}
	s.keepSpare(nil)
	if len(s.spare) != 2 || s.spareRows != maxSpareRows {
		t.Fatalf("%d buffers of 2^16 rows kept (%d rows), want 2 (%d)", len(s.spare), s.spareRows, maxSpareRows)
	}
	s.spare, s.spareRows = nil, 0
}
