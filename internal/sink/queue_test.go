package sink

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// gate is a sink that blocks until released and remembers what it got.
type gate struct {
	release chan struct{}
	mu      sync.Mutex
	got     int
	err     error
	closed  bool
}

func (g *gate) Write(recs []flow.Record) error {
	<-g.release
	g.mu.Lock()
	defer g.mu.Unlock()
	g.got += len(recs)
	return g.err
}

func (g *gate) Close() error { g.closed = true; return nil }

func recs(n int) []flow.Record { return make([]flow.Record, n) }

// TestQueueDropsWhenFull: a stuck sink holds one batch in its Write and
// the queue holds depth-1 more; every further batch is dropped and
// counted, and after release exactly what was queued is written.
func TestQueueDropsWhenFull(t *testing.T) {
	g := &gate{release: make(chan struct{})}
	q := NewQueue("test", g, 4, 10)
	for range 10 {
		if err := q.Write(recs(10)); err != nil {
			t.Fatal(err)
		}
	}
	st := q.Stats()
	// 4 buffers: all four taken (one may be in the sink's Write already).
	if st.Dropped != 60 || st.DroppedBatches != 6 {
		t.Fatalf("dropped %d records in %d batches, want 60 in 6", st.Dropped, st.DroppedBatches)
	}
	close(g.release)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if g.got != 40 || !g.closed || q.Stats().Written != 40 {
		t.Fatalf("sink got %d (closed %v), written %d; want 40", g.got, g.closed, q.Stats().Written)
	}
	if err := q.Write(recs(1)); !errors.Is(err, ErrQueueClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
}

// TestQueueSplitsAndMerges: batches larger than the buffer are split;
// concurrent writers all land (race detector checks the merging).
func TestQueueSplitsAndMerges(t *testing.T) {
	g := &gate{release: make(chan struct{})}
	close(g.release)
	q := NewQueue("test", g, 1024, 8)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				_ = q.Write(recs(20)) // 3 pieces of ≤ 8
			}
		}()
	}
	wg.Wait()
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	st := q.Stats()
	if g.got+int(st.Dropped) != 4000 || st.Written != uint64(g.got) {
		t.Fatalf("got %d + dropped %d, want 4000 in all", g.got, st.Dropped)
	}
	if st.Dropped != 0 {
		t.Logf("dropped %d under contention", st.Dropped)
	}
}

// TestQueueError: the sink's first error comes back from Close and every
// failed batch is counted.
func TestQueueError(t *testing.T) {
	g := &gate{release: make(chan struct{}), err: errors.New("disk full")}
	close(g.release)
	q := NewQueue("test", g, 2, 5)
	_ = q.Write(recs(5))
	err := q.Close()
	if err == nil || err.Error() != "disk full" || q.Stats().Errors != 1 {
		t.Fatalf("Close: %v, errors %d; want disk full, 1", err, q.Stats().Errors)
	}
}

// flaky is a sink whose writes fail while fail is set, each after delay.
type flaky struct {
	delay atomic.Int64 // ns
	fail  atomic.Bool
	got   atomic.Int64
}

func (f *flaky) Write(recs []flow.Record) error {
	time.Sleep(time.Duration(f.delay.Load()))
	if f.fail.Load() {
		return errors.New("disk full")
	}
	f.got.Add(int64(len(recs)))
	return nil
}

func (f *flaky) Close() error { return nil }

// TestQueueBlockWaitsForSlowSink: a blocking queue (file replay) in front
// of a slow but healthy sink drops nothing: Write waits for room.
func TestQueueBlockWaitsForSlowSink(t *testing.T) {
	f := &flaky{}
	f.delay.Store(int64(time.Millisecond))
	q := NewQueueOpts("slow", f, 2, 10, QueueOptions{Block: true})
	for range 50 {
		if err := q.Write(recs(25)); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); f.got.Load() != 1250 || st.Written != 1250 || st.Dropped != 0 || st.Lost != 0 {
		t.Fatalf("sink got %d; stats %+v; want all 1250 written", f.got.Load(), st)
	}
}

// TestQueueBlockFailingSinkDoesNotStall: in a synchronous fan-out of
// blocking queues, a sink whose writes fail (slowly) stops being waited
// for after its first failure: the healthy sink gets every record without
// waiting on it, the failing one's records are dropped and counted, and
// once a write succeeds again the queue waits again.
func TestQueueBlockFailingSinkDoesNotStall(t *testing.T) {
	bad := &flaky{}
	bad.delay.Store(int64(20 * time.Millisecond))
	bad.fail.Store(true)
	good := &flaky{}
	qb := NewQueueOpts("store", bad, 2, 10, QueueOptions{Block: true})
	qg := NewQueueOpts("json", good, 2, 10, QueueOptions{Block: true})
	all := Multi{qb, qg}
	const batches = 2000
	start := time.Now()
	for range batches {
		if err := all.Write(recs(10)); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	// Waiting on every failing write would take batches × 20 ms = 40 s.
	if took > 10*time.Second {
		t.Fatalf("%d batches took %v: the failing sink held up the fan-out", batches, took)
	}
	bs := qb.Stats()
	if !bs.Failing || bs.Errors == 0 || bs.Dropped == 0 {
		t.Fatalf("failing sink's queue: %+v; want failing, errors and drops", bs)
	}
	bad.fail.Store(false) // space is back: the next write succeeds
	bad.delay.Store(int64(time.Millisecond))
	deadline, ones := time.Now().Add(20*time.Second), uint64(0)
	for qb.Stats().Failing && time.Now().Before(deadline) {
		_ = qb.Write(recs(1))
		ones++
		time.Sleep(5 * time.Millisecond)
	}
	before := qb.Stats().Dropped
	for range 200 {
		_ = qb.Write(recs(10))
	}
	if err := errors.Join(qb.Close(), qg.Close()); err == nil || err.Error() != "disk full" {
		t.Fatalf("Close: %v; want the failing sink's first error", err)
	}
	bs, gs := qb.Stats(), qg.Stats()
	if bs.Dropped != before {
		t.Errorf("healthy again, the queue still dropped %d", bs.Dropped-before)
	}
	if gs.Written != batches*10 || gs.Dropped != 0 || good.got.Load() != batches*10 {
		t.Errorf("healthy sink: %+v, got %d; want all %d", gs, good.got.Load(), batches*10)
	}
	if bs.Written+bs.Dropped+bs.Lost != uint64(batches*10+200*10)+ones {
		t.Errorf("failing sink: %+v does not add up", bs)
	}
}

// stuck is a sink whose Write (and Close) never return until released.
type stuck struct{ release chan struct{} }

func (s *stuck) Write([]flow.Record) error { <-s.release; return nil }
func (s *stuck) Close() error              { <-s.release; return nil }

// TestQueueStopBoundsClose: with a sink stuck for good, a blocked Write
// and Close both return once Stop is closed; every record is written,
// dropped or lost, and the lost ones are counted and named in the error.
func TestQueueStopBoundsClose(t *testing.T) {
	for _, block := range []bool{false, true} {
		s := &stuck{release: make(chan struct{})}
		stop := make(chan struct{})
		q := NewQueueOpts("store", s, 3, 10, QueueOptions{Block: block, Stop: stop})
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			for range 10 {
				_ = q.Write(recs(10))
			}
		}()
		time.AfterFunc(100*time.Millisecond, func() { close(stop) })
		select {
		case <-wrote:
		case <-time.After(20 * time.Second):
			t.Fatalf("block=%v: Write still blocked after Stop", block)
		}
		start := time.Now()
		err := q.Close()
		if !errors.Is(err, ErrAbandoned) || time.Since(start) > 10*time.Second {
			t.Fatalf("block=%v: Close: %v after %v; want ErrAbandoned at once", block, err, time.Since(start))
		}
		st := q.Stats()
		if st.Written+st.Dropped+st.Lost != 100 || st.Lost < 30 || !strings.Contains(err.Error(), fmt.Sprintf("%d records", st.Lost)) {
			t.Errorf("block=%v: %+v, error %q; want written+dropped+lost = 100, the 3 queued batches lost at least", block, st, err)
		}
		close(s.release) // the stuck write finishes late: not counted twice
		time.Sleep(50 * time.Millisecond)
		if st2 := q.Stats(); st2.Written != st.Written {
			t.Errorf("block=%v: written moved from %d to %d after the records were counted lost", block, st.Written, st2.Written)
		}
	}
}
