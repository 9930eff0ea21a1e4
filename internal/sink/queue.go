package sink

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/weir-dev/weir/internal/flow"
)

// Queue puts a bounded queue and a goroutine of its own in front of a
// sink, so that a slow sink never blocks capture: Write copies the records
// into a free buffer and returns at once; when every buffer is taken the
// batch is dropped and counted. Write is safe for concurrent use (several
// capture workers share one Queue: it merges their streams), Close is not.
type Queue struct {
	name  string
	inner Sink
	free  chan []flow.Record // empty buffers
	full  chan []flow.Record // batches waiting for inner
	done  chan struct{}

	mu     sync.RWMutex // Write holds it shared; Close exclusively, to close full
	closed bool

	written, dropped, batches, dropBatches atomic.Uint64
	errs                                   atomic.Uint64
	errMu                                  sync.Mutex
	firstErr                               error
}

// QueueStats are a Queue's counters.
type QueueStats struct {
	Written        uint64 // records handed to the sink
	Dropped        uint64 // records dropped because the queue was full
	DroppedBatches uint64 // batches dropped
	Errors         uint64 // batches the sink returned an error for
	Depth          int    // batches waiting now
	Capacity       int    // batches the queue holds
}

// NewQueue starts a queue of depth batches of up to batch records each in
// front of inner; name labels it in metrics. Memory is fixed up front:
// depth × batch records.
func NewQueue(name string, inner Sink, depth, batch int) *Queue {
	depth, batch = max(depth, 1), max(batch, 1)
	q := &Queue{name: name, inner: inner, free: make(chan []flow.Record, depth),
		full: make(chan []flow.Record, depth), done: make(chan struct{})}
	for range depth {
		q.free <- make([]flow.Record, 0, batch)
	}
	go q.loop()
	return q
}

// Name returns the queue's label.
func (q *Queue) Name() string { return q.name }

func (q *Queue) loop() {
	defer close(q.done)
	for b := range q.full {
		if err := q.inner.Write(b); err != nil {
			q.errs.Add(1)
			q.errMu.Lock()
			if q.firstErr == nil {
				q.firstErr = err
			}
			q.errMu.Unlock()
		}
		q.written.Add(uint64(len(b)))
		q.free <- b[:0]
	}
}

// Write queues a copy of recs (in batch-sized pieces) and never blocks; what
// does not fit is dropped and counted. It returns ErrQueueClosed after Close.
func (q *Queue) Write(recs []flow.Record) error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		q.dropped.Add(uint64(len(recs)))
		return ErrQueueClosed
	}
	for len(recs) > 0 {
		var b []flow.Record
		select {
		case b = <-q.free:
		default:
			q.dropped.Add(uint64(len(recs)))
			q.dropBatches.Add(1)
			return nil // counted: capture goes on
		}
		n := copy(b[:cap(b)], recs)
		q.full <- b[:n] // never blocks: full has room for every buffer
		q.batches.Add(1)
		recs = recs[n:]
	}
	return nil
}

// ErrQueueClosed is returned by Write after Close.
var ErrQueueClosed = errors.New("sink: queue closed")

// Stats returns the queue's counters.
func (q *Queue) Stats() QueueStats {
	return QueueStats{Written: q.written.Load(), Dropped: q.dropped.Load(), DroppedBatches: q.dropBatches.Load(),
		Errors: q.errs.Load(), Depth: len(q.full), Capacity: cap(q.full)}
}

// Close waits until every queued batch has been written, closes the inner
// sink and returns the first write error, if any, joined with Close's.
func (q *Queue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	close(q.full)
	q.mu.Unlock()
	<-q.done
	q.errMu.Lock()
	first := q.firstErr
	q.errMu.Unlock()
	return errors.Join(first, q.inner.Close())
}
