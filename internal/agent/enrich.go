package agent

import (
	"time"

	"github.com/weir-dev/weir/internal/caps"
	"github.com/weir-dev/weir/internal/enrich"
	"github.com/weir-dev/weir/internal/sink"
)

// Enrich labels every record with workloads and services before the
// fan-out, from an inventory file reloaded while the agent runs.
type Enrich struct {
	Watched *enrich.Watched // the inventory and its file
	Reload  time.Duration   // how often the file is looked at (0: never)
}

// wrap returns next behind the enricher and starts watching the file;
// closing the returned sink stops that.
func (e *Enrich) wrap(next sink.Sink) sink.Sink { return e.Watched.Wrap(next, e.Reload) }

// Needs are the files a running agent still touches, for what it keeps
// of its privileges: the store's directory, and the inventory at
// enrichPath when it is reloaded.
func (s *Sinks) Needs(enrichPath string) []caps.Need {
	var f []caps.Need
	if s.Store != nil {
		f = append(f, caps.Need{Path: s.Store.Dir, Dir: true})
	}
	if s.Enrich != nil && s.Enrich.Reload > 0 && enrichPath != "" {
		f = append(f, caps.Need{Path: enrichPath})
	}
	return f
}
