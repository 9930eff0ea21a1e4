//go:build linux

package netdev

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/testhost"
)

func TestCloseUnblocksNext(t *testing.T) {
	leakCheck(t)
	p := testhost.NewPair(t)
	w := watchIn(t, p.A, watchRcvBuf)
	type result struct {
		err error
		at  time.Time
	}
	res := make(chan result, 1)
	started := make(chan struct{})
	go func() {
		close(started)
		_, err := w.Next() // nothing changes in A: blocks until Close
		res <- result{err, time.Now()}
	}()
	<-started
	time.Sleep(100 * time.Millisecond) // let Next reach poll
	select {
	case r := <-res:
		t.Fatalf("Next returned before Close: %v", r.err)
	default:
	}
	closedAt := time.Now()
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case r := <-res:
		if !errors.Is(r.err, ErrClosed) {
			t.Errorf("blocked Next returned %v, want ErrClosed", r.err)
		}
		if d := r.at.Sub(closedAt); d > time.Second {
			t.Errorf("Next returned %v after Close, want within 1s", d)
		}
	case <-time.After(time.Second):
		t.Fatal("Next still blocked 1s after Close")
	}
	if _, err := w.Next(); !errors.Is(err, ErrClosed) {
		t.Errorf("Next after Close: %v, want ErrClosed", err)
	}
	if _, err := w.List(); !errors.Is(err, ErrClosed) {
		t.Errorf("List after Close: %v, want ErrClosed", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v, want nil", err)
	}
	if st := w.Stats(); st.Events != 0 || st.Malformed != 0 {
		t.Errorf("Stats after Close %+v, want no events, nothing malformed", st)
	}
}

// Close racing with Next, List and other Closes: run with -race. Every
// Next ends with ErrClosed (or an event), nothing hangs or panics.
func TestCloseConcurrent(t *testing.T) {
	leakCheck(t)
	p := testhost.NewPair(t)
	for range 20 {
		w := watchIn(t, p.A, watchRcvBuf)
		var wg sync.WaitGroup
		errc := make(chan error, 16)
		for range 2 {
			wg.Go(func() {
				for {
					if _, err := w.Next(); err != nil {
						if !errors.Is(err, ErrClosed) {
							errc <- err
						}
						return
					}
				}
			})
		}
		wg.Go(func() {
			if _, err := w.List(); err != nil && !errors.Is(err, ErrClosed) {
				errc <- err
			}
		})
		for range 3 {
			wg.Go(func() {
				if err := w.Close(); err != nil {
					errc <- err
				}
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(waitLimit):
			t.Fatal("Next, List or Close still running 5s after Close")
		}
		close(errc)
		for err := range errc {
			t.Errorf("unexpected error: %v", err)
		}
	}
}

// A zero Watcher is refused; in particular Close does not close
// descriptor 0.
func TestZeroWatcher(t *testing.T) {
	var w Watcher
	if _, err := w.Next(); err == nil || errors.Is(err, ErrClosed) {
		t.Errorf("Next on a zero Watcher: %v, want errZero", err)
	}
	if _, err := w.List(); err == nil {
		t.Error("List on a zero Watcher: nil error")
	}
	if err := w.Close(); err == nil {
		t.Error("Close on a zero Watcher: nil error")
	}
}
