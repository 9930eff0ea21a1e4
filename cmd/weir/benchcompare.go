package main

import (
	"fmt"
	"io"

	"github.com/weir-dev/weir/internal/bench/report"
	"github.com/weir-dev/weir/internal/bench/result"
)

// runBenchCompare is `weir bench compare A.json B.json [...]`.
func runBenchCompare(args []string, stdout_, stderr io.Writer) int {
	var html string
	fs := helpFlagSet("bench compare")
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
		r, err := result.ReadFile(f)
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
		if err := report.WriteHTMLFile(html, c); err != nil {
			fmt.Fprintf(stderr, "weir bench compare: %v\n", err)
			return exitFailure
		}
		fmt.Fprintf(stderr, "weir bench compare: report written to %s\n", html)
	}
	return exitOK
}
