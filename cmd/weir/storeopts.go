package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/weir-dev/weir/internal/agent"
	"github.com/weir-dev/weir/internal/cli"
	"github.com/weir-dev/weir/internal/query"
	"github.com/weir-dev/weir/internal/store"
)

// defaultDataDir is where capture writes and query reads unless told
// otherwise: $WEIR_DATA_DIR, else ./weir-data.
var defaultDataDir = cli.DefaultDataDir

// storeOpts are the store flags of capture and collect.
type storeOpts struct {
	dir       string
	retention cli.Days
	maxSize   cli.Bytes
	writeout  time.Duration
	precision time.Duration
	mode      string
	log       io.Writer // the store's messages, one line each
	fs        *flag.FlagSet
}

func (o *storeOpts) flags(fs *flag.FlagSet) {
	o.fs = fs
	o.retention.Parse = query.ParseDuration
	fs.StringVar(&o.dir, "data-dir", defaultDataDir(), "write every record to the flow store in `dir` for 'weir query' ('off' disables; default $WEIR_DATA_DIR or ./weir-data; "+
		"--read and --synthetic write only to a --data-dir given)")
	fs.Var(&o.retention, "retention", "delete stored blocks whose records all ended longer ago than this `age` (30d, 12h; 0 keeps everything)")
	fs.Var(&o.maxSize, "max-size", "delete the oldest stored blocks while the store takes more disk than this `size` (20GiB; 0: no limit)")
	fs.DurationVar(&o.writeout, "writeout", store.DefaultWriteout, "write buffered records to the store this often (and at exit)")
	fs.DurationVar(&o.precision, "time-precision", store.DefaultTimePrecision, "store start and end times at this resolution (start rounded down, end up; 1ns keeps them exact); counts are always exact")
	fs.StringVar(&o.mode, "store-mode", "private", "who may read the store's files: private (directories 0700, files 0600) or group (0750, 0640: for 'weir query' as members of the data directory's group); the umask applies too")
}

// given reports whether --data-dir was given.
func (o *storeOpts) given() bool { return isSet(o.fs, "data-dir") }

// config is the store's configuration, nil when it is off.
func (o *storeOpts) config() (*store.Config, error) {
	if o.dir == "off" || o.dir == "" {
		return nil, nil
	}
	if o.writeout <= 0 {
		return nil, agent.Usagef("--writeout must be positive")
	}
	if o.precision <= 0 || o.precision > time.Hour {
		return nil, agent.Usagef("--time-precision must be within 1ns..1h")
	}
	var mode store.Mode
	switch o.mode {
	case "private":
	case "group":
		mode = store.ModeGroup
	default:
		return nil, agent.Usagef("--store-mode %q: use private or group", o.mode)
	}
	log := o.log
	return &store.Config{Dir: o.dir, Writeout: o.writeout, Mode: mode,
		Retention: o.retention.D, MaxSize: int64(o.maxSize), TimePrecision: o.precision,
		Log: func(msg string) { fmt.Fprintf(log, "store: %s\n", msg) }}, nil
}
