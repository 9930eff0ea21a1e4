package sink

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/weir-dev/weir/internal/flow"
)

// Queue puts a bounded queue and a goroutine of its own in front of a
// sink, so that one slow or failing sink never holds up capture or the
// other sinks: Write copies the records into a free buffer and returns;
// when every buffer is taken the batch is dropped and counted (or, with
// QueueOptions.Block, waited for). Write is safe for concurrent use
// (several capture workers share one Queue: it merges their streams),
// Close is not.
type Queue struct {
	name  string
	inner Sink
	opts  QueueOptions
	free  chan []flow.Record // empty buffers
	full  chan []flow.Record // batches waiting for inner
	done  chan struct{}      // closed when the loop has drained full and closed inner

	mu     sync.RWMutex // Write holds it shared; Close exclusively, to close full
	closed bool

	// acct orders the loop's accounting of a written batch against Close
	// giving up: a batch is either written or lost, never both.
	acct      sync.Mutex
	abandoned bool
	queued    atomic.Int64 // records in full or in inner.Write now

	written, dropped, lost, batches, dropBatches atomic.Uint64
	errs                                         atomic.Uint64
	failing                                      atomic.Bool // inner's last Write failed
	errMu                                        sync.Mutex
	firstErr, closeErr                           error
}

// QueueOptions change what a Queue does when it is full and at shutdown.
// The zero value is the live-capture behaviour: never wait, drop and count.
type QueueOptions struct {
	// Block makes Write wait for a free buffer instead of dropping, as
	// long as the sink's last write succeeded (file replay: nothing may
	// be dropped). While the sink is failing, Write drops and counts what
	// does not fit, so a failing sink cannot stall the others; it waits
	// again once a write succeeds.
	Block bool
	// Stop, once closed, ends every wait: a Write blocked for room drops
	// its records, and Close stops waiting for the sink; both count the
	// records the sink never took as lost. Nil: wait as long as it takes.
	Stop <-chan struct{}
}

// QueueStats are a Queue's counters.
type QueueStats struct {
	Written        uint64 // records handed to the sink
	Dropped        uint64 // records dropped because the queue was full
	DroppedBatches uint64 // batches dropped
	Lost           uint64 // records the sink never took because Stop ended the wait (shutdown)
	Errors         uint64 // batches the sink returned an error for
	Failing        bool   // the sink's last write returned an error
	Depth          int    // batches waiting now
	Capacity       int    // batches the queue holds
}

// ErrAbandoned is wrapped by Close's error when Stop ended the wait for a
// sink that had not finished: the message says how many records were lost.
var ErrAbandoned = errors.New("sink did not finish in time")

// NewQueue starts a queue of depth batches of up to batch records each in
// front of inner; name labels it in metrics. Memory is fixed up front:
// depth × batch records.
func NewQueue(name string, inner Sink, depth, batch int) *Queue {
	return NewQueueOpts(name, inner, depth, batch, QueueOptions{})
}

// NewQueueOpts is NewQueue with options.
func NewQueueOpts(name string, inner Sink, depth, batch int, opts QueueOptions) *Queue {
	depth, batch = max(depth, 1), max(batch, 1)
	q := &Queue{name: name, inner: inner, opts: opts, free: make(chan []flow.Record, depth),
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
		q.acct.Lock()
		gone := q.abandoned
		q.acct.Unlock()
		if !gone { // after Close gave up, what is left was counted lost
			err := q.inner.Write(b)
			q.failing.Store(err != nil)
			if err != nil {
				q.errs.Add(1)
				q.errMu.Lock()
				if q.firstErr == nil {
					q.firstErr = err
				}
				q.errMu.Unlock()
			}
			q.acct.Lock()
			if !q.abandoned {
				q.written.Add(uint64(len(b)))
				q.queued.Add(-int64(len(b)))
			}
			q.acct.Unlock()
		}
		q.free <- b[:0]
	}
	err := q.inner.Close()
	q.errMu.Lock()
	q.closeErr = err
	q.errMu.Unlock()
}

// Write queues a copy of recs (in batch-sized pieces). What does not fit
// is dropped and counted, unless the queue blocks (QueueOptions.Block) and
// the sink is healthy: then Write waits for room, or for Stop. It returns
// ErrQueueClosed after Close.
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
			if !q.opts.Block || q.failing.Load() {
				q.dropped.Add(uint64(len(recs)))
				q.dropBatches.Add(1)
				return nil // counted: capture goes on
			}
			select {
			case b = <-q.free:
			case <-q.opts.Stop: // nil without Stop: never
				q.lost.Add(uint64(len(recs)))
				return nil // counted; Close says so
			}
		}
		n := copy(b[:cap(b)], recs)
		q.queued.Add(int64(n))
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
		Lost: q.lost.Load(), Errors: q.errs.Load(), Failing: q.failing.Load(), Depth: len(q.full), Capacity: cap(q.full)}
}

// Close waits until every queued batch has been written and the inner
// sink closed, and returns the first write error, if any, joined with
// Close's. If Stop ends the wait first, Close returns at once: the records
// still queued or being written count as lost, and the error (wrapping
// ErrAbandoned) says how many; the sink is left to finish or not in its
// goroutine.
func (q *Queue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	close(q.full)
	q.mu.Unlock()
	select {
	case <-q.done:
	case <-q.opts.Stop:
		select {
		case <-q.done: // finished just in time
		default:
			q.acct.Lock()
			q.abandoned = true
			n := q.queued.Swap(0)
			q.acct.Unlock()
			lost := q.lost.Add(uint64(n))
			q.errMu.Lock()
			first := q.firstErr
			q.errMu.Unlock()
			return errors.Join(first, fmt.Errorf("sink %s: %w: %d records it had not taken are lost (and whatever it still buffered)", q.name, ErrAbandoned, lost))
		}
	}
	q.errMu.Lock()
	defer q.errMu.Unlock()
	return errors.Join(q.firstErr, q.closeErr)
}
