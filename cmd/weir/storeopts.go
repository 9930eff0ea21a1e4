package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/query"
	"github.com/weir-dev/weir/internal/store"
)

// defaultDataDir is where capture writes and query reads unless told
// otherwise: $WEIR_DATA_DIR, else ./weir-data.
func defaultDataDir() string {
	if d := os.Getenv("WEIR_DATA_DIR"); d != "" {
		return d
	}
	return "./weir-data"
}

// durationFlag is a duration that also takes days: 30d, 1d12h.
type durationFlag time.Duration

func (d *durationFlag) String() string {
	if *d == 0 {
		return "0"
	}
	if x := time.Duration(*d); x%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", x/(24*time.Hour))
	}
	return time.Duration(*d).String()
}

func (d *durationFlag) Set(v string) error {
	if v == "0" {
		*d = 0
		return nil
	}
	x, err := query.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%q is not a duration (examples: 30d, 12h, 1d12h)", v)
	}
	*d = durationFlag(x)
	return nil
}

// bytesFlag is a byte count up to 1 PiB: 20GiB, 500MiB.
type bytesFlag int64

func (b *bytesFlag) String() string {
	if *b == 0 {
		return "0"
	}
	return fmt.Sprint(int64(*b))
}

func (b *bytesFlag) Set(v string) error {
	if v == "0" {
		*b = 0
		return nil
	}
	n, err := parseBytes(v, 1<<50)
	*b = bytesFlag(n)
	return err
}

// storeOpts are capture's store flags.
type storeOpts struct {
	dir       string
	retention durationFlag
	maxSize   bytesFlag
	writeout  time.Duration
	precision time.Duration
	mode      string
	// log receives the store's messages as they happen (damage, write
	// errors, dropped records), one line each; nil means os.Stderr.
	log io.Writer
}

func (o *storeOpts) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.dir, "data-dir", defaultDataDir(), "write every record to the flow store in `dir` for 'weir query' ('off' disables; default $WEIR_DATA_DIR or ./weir-data)")
	fs.Var(&o.retention, "retention", "delete stored blocks whose records all ended longer ago than this `age` (30d, 12h; 0 keeps everything)")
	fs.Var(&o.maxSize, "max-size", "delete the oldest stored blocks while the store takes more disk than this `size` (20GiB; 0: no limit)")
	fs.DurationVar(&o.writeout, "writeout", store.DefaultWriteout, "write buffered records to the store this often (and at exit)")
	fs.DurationVar(&o.precision, "time-precision", store.DefaultTimePrecision, "store start and end times at this resolution (start rounded down, end up; 1ns keeps them exact); counts are always exact")
	fs.StringVar(&o.mode, "store-mode", "private", "who may read the store's files: private (directories 0700, files 0600) or group (0750, 0640: for 'weir query' as members of the data directory's group); the umask applies too")
}

// open opens the store, or returns nil when disabled. A directory held by
// another writer is a run failure with a hint.
func (o *storeOpts) open() (*store.Store, error) {
	if o.dir == "off" || o.dir == "" {
		return nil, nil
	}
	if o.writeout <= 0 {
		return nil, errUsage("--writeout must be positive")
	}
	if o.precision <= 0 || o.precision > time.Hour {
		return nil, errUsage("--time-precision must be within 1ns..1h")
	}
	var mode store.Mode
	switch o.mode {
	case "private":
	case "group":
		mode = store.ModeGroup
	default:
		return nil, errUsage(fmt.Sprintf("--store-mode %q: use private or group", o.mode))
	}
	log := o.log
	if log == nil {
		log = os.Stderr
	}
	s, err := store.Open(store.Config{Dir: o.dir, Writeout: o.writeout, Mode: mode,
		Retention: time.Duration(o.retention), MaxSize: int64(o.maxSize), TimePrecision: o.precision,
		Log: func(msg string) { fmt.Fprintf(log, "store: %s\n", msg) }})
	if errors.Is(err, store.ErrLocked) {
		return nil, fmt.Errorf("--data-dir %s: another weir capture is writing there; give this one another --data-dir, or 'off'", o.dir)
	}
	return s, err
}

// errUsage marks a command-line mistake (exit 2) among run errors (exit 1).
type errUsage string

func (e errUsage) Error() string { return string(e) }

// printStoreStats says what went to the store, at exit (its problems were
// said as they happened): what it wrote, what it dropped (full buffer
// while writes failed, or given up on at Close), failed writes by reason,
// and the records still buffered when weir stopped waiting for it (a
// signal's grace ended before the store's Close did): lost at exit.
func printStoreStats(w io.Writer, s *store.Store, dir string) {
	st := s.Stats()
	fmt.Fprintf(w, "store: %d records in %d blocks (%s) written to %s; %s on disk; %d corrupt blocks skipped, %d damaged indexes rebuilt, %d records dropped",
		st.RowsWritten, st.BlocksWritten, format.Bytes(uint64(st.BytesWritten)), dir, format.Bytes(uint64(st.BytesOnDisk)),
		st.CorruptBlocks, st.CorruptIndexes, st.DroppedRows)
	if lost := st.PendingRows; lost > 0 && !st.Abandoned { // abandoned: already in DroppedRows
		fmt.Fprintf(w, ", %d records still buffered at exit (lost)", lost)
	}
	var errs int64
	for _, n := range st.WriteErrors {
		errs += n
	}
	fmt.Fprintf(w, ", %d failed writes", errs)
	for _, r := range store.WriteErrorReasons {
		if n := st.WriteErrors[r]; n > 0 {
			fmt.Fprintf(w, " (%s %d)", r, n)
		}
	}
	if st.PrunedBlocks > 0 {
		fmt.Fprintf(w, "; retention deleted %d blocks (%d records)", st.PrunedBlocks, st.PrunedRows)
	}
	fmt.Fprintln(w)
}
