package main

import (
	"fmt"
	"io"
	"os"

	"github.com/weir-dev/weir/internal/bench/report"
	"github.com/weir-dev/weir/internal/bench/result"
)

// runBenchCompare is `weir bench compare A.json B.json [...]`.
func runBenchCompare(args []string, stdout_, stderr io.Writer) int {
	var html string
	fs := newFlagSet("bench compare", "weir bench compare [--html FILE] A.json B.json [C.json ...]",
		`Put 'weir bench run --json' results side by side: each metric (throughput,
transaction and flow-op rates and latencies, interface rates, CPU,
calibration), its value in every run and its change from the first run,
better or worse. A change smaller than twice the runs' own spread (the
variation of their traffic from interval to interval) is marked as within
noise; runs of different profiles, hosts or options are flagged.
--html also writes one self-contained page with charts (throughput per run,
latency per run, throughput over time) and the table.`, `  weir bench compare before.json after.json
  weir bench compare --html report.html v1.json v2.json v3.json
`)
	fs.StringVar(&html, "html", "", "also write the report with charts to `file`")
	files, done, code := parseInterleaved(fs, args, stdout_, stderr)
	if done {
		return code
	}
	if len(files) < 2 {
		fmt.Fprintln(stderr, "weir bench compare: want at least two result files\nRun 'weir bench compare --help' for usage.")
		return exitUsage
	}
	var runs []*result.Run
	for _, f := range files {
		r, err := readResult(f)
		if err != nil {
			fmt.Fprintf(stderr, "weir bench compare: %s: %v\n", f, err)
			return exitFailure
		}
		r.ProfileFile = f + ": " + r.ProfileFile
		runs = append(runs, r)
	}
	c := report.Compare(runs)
	if err := report.WriteCompare(stdout_, c); err != nil {
		fmt.Fprintf(stderr, "weir bench compare: %v\n", err)
		return exitFailure
	}
	if html != "" {
		f, err := os.Create(html)
		if err == nil {
			err = report.WriteHTML(f, c)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "weir bench compare: %v\n", err)
			return exitFailure
		}
		fmt.Fprintf(stderr, "weir bench compare: report written to %s\n", html)
	}
	return exitOK
}

func readResult(path string) (*result.Run, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return result.Read(f)
}
