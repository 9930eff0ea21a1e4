package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/weir-dev/weir/internal/agent"
	"github.com/weir-dev/weir/internal/enrich"
	"github.com/weir-dev/weir/internal/termsafe"
)

// enrichOpts are --enrich and --enrich-reload (capture and collect): an
// inventory file whose workloads and services label every record before
// the fan-out to the sinks, reloaded when it changes.
type enrichOpts struct {
	path   string
	reload time.Duration
	logw   io.Writer // reload messages; nil: stderr

	e    *enrich.Enricher // nil without --enrich
	live *enrich.Watched
}

func (o *enrichOpts) flags(fs *flag.FlagSet) {
	fs.Var(enrichFlag{o}, "enrich", "label records with workloads and services from the inventory `file` (YAML or JSON: docs/enrich.md), read now and reloaded when it changes")
	fs.DurationVar(&o.reload, "enrich-reload", 5*time.Second, "check the --enrich file for changes this often (0: never); a bad file is logged and counted, and the previous inventory kept")
}

// enrichFlag loads the inventory as the flag is parsed, so that a bad
// file is a command-line error (exit 2) that names the file and line.
type enrichFlag struct{ o *enrichOpts }

func (f enrichFlag) String() string {
	if f.o == nil {
		return ""
	}
	return f.o.path
}

func (f enrichFlag) Set(path string) error {
	live, err := enrich.LoadWatched(path, f.o.logf)
	if err != nil {
		return err
	}
	f.o.path, f.o.e, f.o.live = path, live.E, live
	return nil
}

func (o *enrichOpts) logf(format string, a ...any) {
	w := o.logw
	if w == nil {
		w = os.Stderr
	}
	fmt.Fprintf(w, "weir: %s\n", termsafe.Message(fmt.Sprintf(format, a...))) // one line, whatever the file held
}

// agent is the agent's enrichment, nil without --enrich.
func (o *enrichOpts) agent() *agent.Enrich {
	if o.e == nil {
		return nil
	}
	return &agent.Enrich{Watched: o.live, Reload: o.reload}
}
