package agent

import (
	"context"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"
)

// StopGrace is how long the agent still waits for its sinks after SIGINT
// or SIGTERM before it gives up on them: with the producers' own
// shutdown, it keeps the exit within 5 seconds of the signal whatever a
// sink does.
const StopGrace = 2 * time.Second

// lifecycle is how a run ends. ctx is done at SIGINT or SIGTERM, after
// the duration, or when the parent is done; stop is closed StopGrace after
// the first signal, or at a second one: then the sink queues stop waiting
// (a blocked write drops, Close returns) and count what their sinks never
// took as lost. Without a signal (end of input, duration) the sinks get
// all the time they need.
type lifecycle struct {
	ctx    context.Context
	cancel context.CancelFunc
	stop   chan struct{}
	sigs   chan os.Signal
	quit   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
}

// newLifecycle starts listening for signals; Close stops it.
func newLifecycle(parent context.Context, duration time.Duration) *lifecycle {
	l := &lifecycle{stop: make(chan struct{}), sigs: make(chan os.Signal, 2), quit: make(chan struct{})}
	signal.Notify(l.sigs, os.Interrupt, syscall.SIGTERM)
	if duration > 0 {
		l.ctx, l.cancel = context.WithTimeout(parent, duration)
	} else {
		l.ctx, l.cancel = context.WithCancel(parent)
	}
	l.wg.Add(1)
	go l.watch()
	return l
}

func (l *lifecycle) watch() {
	defer l.wg.Done()
	select {
	case <-l.sigs:
	case <-l.quit:
		return
	}
	l.cancel()
	t := time.NewTimer(StopGrace)
	defer t.Stop()
	select {
	case <-t.C:
	case <-l.sigs: // a second signal: stop waiting now
	case <-l.quit:
		return
	}
	close(l.stop)
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

// startCPUProfile starts a Go CPU profile into the file at path; stop
// ends it and closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		return nil, usagef("--cpuprofile: %v", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
