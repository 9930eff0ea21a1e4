package main

import (
	"flag"
	"time"

	"github.com/weir-dev/weir/internal/agent"
	"github.com/weir-dev/weir/internal/enrich"
)

// enrichOpts are --enrich and --enrich-reload (capture and collect): an
// inventory file whose workloads and services label every record before
// the fan-out to the sinks, reloaded when it changes.
type enrichOpts struct {
	file   enrich.FileFlag
	reload time.Duration
}

func (o *enrichOpts) flags(fs *flag.FlagSet) {
	fs.Var(&o.file, "enrich", "label records with workloads and services from the inventory `file` (YAML or JSON: docs/enrich.md), read now and reloaded when it changes")
	fs.DurationVar(&o.reload, "enrich-reload", 5*time.Second, "check the --enrich file for changes this often (0: never); a bad file is logged and counted, and the previous inventory kept")
}

// agent is the agent's enrichment, nil without --enrich.
func (o *enrichOpts) agent() *agent.Enrich {
	if o.file.Watched == nil {
		return nil
	}
	return &agent.Enrich{Watched: o.file.Watched, Reload: o.reload}
}
