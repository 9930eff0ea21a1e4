package agent

import (
	"context"
	"sync"
	"time"

	"github.com/weir-dev/weir/internal/enrich"
	"github.com/weir-dev/weir/internal/sink"
)

// Enrich labels every record with workloads and services before the
// fan-out, from an inventory file reloaded while the agent runs.
type Enrich struct {
	Enricher *enrich.Enricher
	Watcher  *enrich.Watcher // reloads the file; nil: never
	Reload   time.Duration   // how often the watcher looks (0: never)
}

// wrap returns next behind the enricher and starts watching the file;
// closing the returned sink stops that.
func (e *Enrich) wrap(next sink.Sink) sink.Sink {
	ctx, cancel := context.WithCancel(context.Background())
	s := &enrichSink{Sink: enrich.NewSink(e.Enricher, next), stop: cancel}
	if e.Watcher != nil && e.Reload > 0 {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); e.Watcher.Run(ctx, e.Reload) }()
	}
	return s
}

// enrichSink stops the watcher when the sinks are closed.
type enrichSink struct {
	*enrich.Sink
	stop context.CancelFunc
	wg   sync.WaitGroup
}

func (s *enrichSink) Close() error {
	s.stop()
	s.wg.Wait()
	return s.Sink.Close()
}
