package enrich

import (
	"context"
	"sync"
	"time"

	"github.com/weir-dev/weir/internal/sink"
)

// Watched is an inventory file loaded into an Enricher, reloaded while
// sinks wrapped by it are open.
type Watched struct {
	E *Enricher
	w *Watcher

	mu     sync.Mutex
	cancel context.CancelFunc
}

// LoadWatched loads the inventory at path into a new Enricher; reload
// problems later go to logf. A bad file is an error now.
func LoadWatched(path string, logf func(format string, a ...any)) (*Watched, error) {
	e := NewEnricher()
	w := NewWatcher(e, path, logf)
	if err := w.Load(); err != nil {
		return nil, err
	}
	return &Watched{E: e, w: w}, nil
}

// Wrap returns next behind the enricher and starts checking the file
// every reload (0: never), once however many sinks are wrapped; closing a
// returned sink stops the checks.
func (wd *Watched) Wrap(next sink.Sink, reload time.Duration) sink.Sink {
	wd.mu.Lock()
	defer wd.mu.Unlock()
	if wd.cancel == nil {
		ctx, cancel := context.WithCancel(context.Background())
		wd.cancel = cancel
		if reload > 0 {
			go wd.w.Run(ctx, reload)
		}
	}
	return &watchedSink{Sink: NewSink(wd.E, next), stop: wd.cancel}
}

// watchedSink stops the watcher when the sinks are closed.
type watchedSink struct {
	*Sink
	stop context.CancelFunc
}

func (s *watchedSink) Close() error {
	s.stop()
	return s.Sink.Close()
}
