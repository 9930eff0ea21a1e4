package sink

import (
	"errors"
	"sync"
	"testing"

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
