package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/weir-dev/weir/internal/cli"
	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/gendb"
)

func runGendb(args []string, stdout_, stderr io.Writer) int {
	var (
		cfg    gendb.Config
		dir    string
		ifaces string
		noSync bool
		csvOut string
	)
	fs := helpFlagSet("bench gendb")
	fs.StringVar(&dir, "data-dir", "", "the store to write (created; must not be in use by a capture)")
	fs.IntVar(&cfg.Days, "days", 7, "days of data")
	fs.IntVar(&cfg.BlocksPerDay, "blocks-per-day", 288, "time blocks per day (288: one per 5 minutes)")
	fs.IntVar(&cfg.FlowsPerBlock, "flows-per-block", 5000, "records per time block")
	fs.IntVar(&cfg.Clients, "clients", 20000, "distinct client hosts")
	fs.IntVar(&cfg.Servers, "servers", 2000, "distinct server hosts")
	fs.Float64Var(&cfg.IPv6Share, "ipv6", 0.05, "share of IPv6 flows")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "random seed: the same flags give the same records")
	fs.StringVar(&ifaces, "ifaces", "eth0", "comma-separated interfaces the records are spread over")
	fs.BoolVar(&noSync, "no-sync", false, "skip fsync (faster; a crash may lose blocks)")
	fs.StringVar(&csvOut, "csv", "", "also write the same rows as CSV to this file (created, 0600), for other engines to load")
	if done, code := parseFlags(fs, args, stdout_, stderr); done {
		return code
	}
	if dir == "" {
		fmt.Fprintln(stderr, "weir bench gendb: --data-dir is required")
		return exitUsage
	}
	cfg.Ifaces = strings.Split(ifaces, ",")
	rows := cfg.Rows()
	if rows == 0 {
		fmt.Fprintln(stderr, "weir bench gendb: the flags ask for no rows, or out-of-range sizes")
		return exitUsage
	}
	var csv *gendb.CSV
	if csvOut != "" {
		f, err := os.OpenFile(csvOut, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600) // O_EXCL: never through a symlink
		if err != nil {
			fmt.Fprintf(stderr, "weir bench gendb: --csv: %v (give a file that does not exist yet)\n", err)
			return exitUsage
		}
		defer f.Close()
		csv = gendb.NewCSV(f)
	}
	bar := cli.NewProgress(progressOut, rows, "rows")
	w, err := gendb.WriteStore(cfg, dir, noSync, func(n int64) { bar.Set(n) }, csv.Tee())
	bar.Finish()
	if err == nil && csv != nil {
		err = csv.Flush()
	}
	if err != nil {
		fmt.Fprintf(stderr, "weir bench gendb: %v\n", err)
		return exitFailure
	}
	s := w.Stats
	fmt.Fprintf(stdout_, "%s rows in %s blocks written to %s in %v: %s on disk, %.2f B/row; writing (encode, compress, append, fsync) %.3f µs/row\n",
		cli.Count(s.RowsWritten), cli.Count(int64(s.BlocksWritten)), dir, w.Elapsed.Round(time.Millisecond), format.Bytes(uint64(s.BytesOnDisk)),
		float64(s.BytesOnDisk)/float64(max(1, s.RowsWritten)), w.Writing.Seconds()*1e6/float64(max(1, s.RowsWritten)))
	return exitOK
}
