package main

import (
	"flag"

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
	agent.StoreOptions
	retention cli.Days
	maxSize   cli.Bytes
	fs        *flag.FlagSet
}

func (o *storeOpts) flags(fs *flag.FlagSet) {
	o.fs = fs
	o.retention.Parse = query.ParseDuration
	fs.StringVar(&o.Dir, "data-dir", defaultDataDir(), "write every record to the flow store in `dir` for 'weir query' ('off' disables; default $WEIR_DATA_DIR or ./weir-data; "+
		"--read and --synthetic write only to a --data-dir given)")
	fs.Var(&o.retention, "retention", "delete stored blocks whose records all ended longer ago than this `age` (30d, 12h; 0 keeps everything)")
	fs.Var(&o.maxSize, "max-size", "delete the oldest stored blocks while the store takes more disk than this `size` (20GiB; 0: no limit)")
	fs.DurationVar(&o.Writeout, "writeout", store.DefaultWriteout, "write buffered records to the store this often (and at exit)")
	fs.DurationVar(&o.Precision, "time-precision", store.DefaultTimePrecision, "store start and end times at this resolution (start rounded down, end up; 1ns keeps them exact); counts are always exact")
	fs.StringVar(&o.Mode, "store-mode", "private", "who may read the store's files: private (directories 0700, files 0600) or group (0750, 0640: for 'weir query' as members of the data directory's group); the umask applies too")
}

// given reports whether --data-dir was given.
func (o *storeOpts) given() bool { return isSet(o.fs, "data-dir") }

// config is the store's configuration, nil when it is off.
func (o *storeOpts) config() (*store.Config, error) {
	o.Retention, o.MaxSize = o.retention.D, int64(o.maxSize)
	return o.StoreOptions.Config()
}
