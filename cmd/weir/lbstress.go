package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/weir-dev/weir/internal/cli"
	"github.com/weir-dev/weir/internal/enrich/services"
	"github.com/weir-dev/weir/internal/format"
)

func runLBStress(args []string, stdout, stderr io.Writer) int {
	var (
		nodesFlag string
		lbs       int
		groups    string
		repeat    int
		asJSON    bool
	)
	fs := helpFlagSet("bench lbstress")
	fs.StringVar(&nodesFlag, "nodes", "20,120,250,500", "node counts, comma-separated")
	fs.IntVar(&lbs, "lbs", 3000, "load balancers added before the measured one")
	fs.StringVar(&groups, "groups", "both", "datapath groups: on, off or both")
	fs.IntVar(&repeat, "repeat", 50, "add/remove repetitions for the median last-add time")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object per configuration instead of the table")
	if done, code := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	ns, modes, err := services.StressPlan(nodesFlag, groups, lbs, repeat)
	if err != nil {
		fmt.Fprintf(stderr, "weir bench lbstress: %v\n", err)
		return exitUsage
	}
	var results []services.StressResult
	bar := cli.NewProgress(progressOut, int64(len(ns)*len(modes)), "configurations")
	defer bar.Finish()
	for _, g := range modes {
		for _, n := range ns {
			r, err := lbStressRun(len(ns)*len(modes) == 1, n, lbs, g, repeat)
			if err != nil {
				fmt.Fprintf(stderr, "weir bench lbstress: nodes=%s groups=%v: %v\n", format.Int(int64(n)), g, err)
				return exitFailure
			}
			bar.Add(1)
			if asJSON {
				b, _ := json.Marshal(r)
				fmt.Fprintf(stdout, "%s\n", b)
			}
			results = append(results, r)
		}
	}
	bar.Finish()
	if !asJSON {
		services.WriteStressTable(stdout, results)
	}
	return exitOK
}

// lbStressRun runs one configuration here when it is the only one, else in
// a fresh weir process so each starts from an empty heap.
func lbStressRun(only bool, n, lbs int, groups bool, repeat int) (services.StressResult, error) {
	if only {
		return services.RunStress(n, lbs, groups, repeat)
	}
	exe, err := os.Executable()
	if err != nil {
		return services.StressResult{}, err
	}
	return services.RunStressChild(exe, n, lbs, groups, repeat)
}
