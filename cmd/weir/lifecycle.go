package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/sink"
)

// stopGrace is how long weir still waits for its sinks after SIGINT or
// SIGTERM before it gives up on them: with the sources' own shutdown, it
// keeps the exit within 5 seconds of the signal whatever a sink does.
const stopGrace = 2 * time.Second

// lifecycle is how a capture or collection ends. ctx is done at SIGINT or
// SIGTERM, or after --duration; stop is closed stopGrace after the first
// signal, or at a second one: then the sink queues stop waiting (a blocked
// write drops, Close returns) and count what their sinks never took as
// lost. Without a signal (end of file, --duration) the sinks get all the
// time they need.
type lifecycle struct {
	ctx    context.Context
	stop   chan struct{}
	sigs   chan os.Signal
	cancel context.CancelFunc
	quit   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
}

// newLifecycle starts listening for signals; Close stops it.
func newLifecycle(duration time.Duration) *lifecycle {
	l := &lifecycle{stop: make(chan struct{}), sigs: make(chan os.Signal, 2), quit: make(chan struct{})}
	signal.Notify(l.sigs, os.Interrupt, syscall.SIGTERM)
	var sigCtx context.Context
	sigCtx, l.cancel = context.WithCancel(context.Background())
	l.ctx = sigCtx
	if duration > 0 {
		var cancelRun context.CancelFunc
		l.ctx, cancelRun = context.WithTimeout(sigCtx, duration)
		cancelSig := l.cancel
		l.cancel = func() { cancelRun(); cancelSig() }
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		select {
		case <-l.sigs:
		case <-l.quit:
			return
		}
		l.cancel()
		t := time.NewTimer(stopGrace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-l.sigs: // a second signal: stop waiting now
		case <-l.quit:
			return
		}
		close(l.stop)
	}()
	return l
}

// Close stops listening for signals (they are fatal again) and cancels ctx.
func (l *lifecycle) Close() {
	l.once.Do(func() {
		signal.Stop(l.sigs)
		close(l.quit)
		l.cancel()
		l.wg.Wait()
	})
}

// printQueueStats prints each sink queue's counters (--stats).
func printQueueStats(w io.Writer, queues []*sink.Queue) {
	n := format.Count
	for _, q := range queues {
		qs := q.Stats()
		fmt.Fprintf(w, "sink queue  %s: %s records written, %s dropped", q.Name(), n(qs.Written), n(qs.Dropped))
		if qs.Lost > 0 {
			fmt.Fprintf(w, ", %s lost at shutdown", n(qs.Lost))
		}
		if qs.Errors > 0 {
			fmt.Fprintf(w, "; %s failed writes", n(qs.Errors))
		}
		fmt.Fprintln(w)
	}
}
