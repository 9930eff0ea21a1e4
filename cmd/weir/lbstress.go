package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

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
	ns, modes, err := lbStressPlan(nodesFlag, groups, lbs, repeat)
	if err != nil {
		fmt.Fprintf(stderr, "weir bench lbstress: %v\n", err)
		return exitUsage
	}
	var results []services.StressResult
	bar := cli.NewProgress(progressOut, int64(len(ns)*len(modes)), "configurations")
	defer bar.Finish()
	for _, g := range modes {
		for _, n := range ns {
			run := lbStressChild
			if len(ns)*len(modes) == 1 {
				run = services.RunStress
			}
			r, err := run(n, lbs, g, repeat)
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

// lbStressPlan checks the flags: the node counts and the group modes.
func lbStressPlan(nodes, groups string, lbs, repeat int) (ns []int, modes []bool, err error) {
	for _, f := range strings.Split(nodes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 100000 {
			return nil, nil, fmt.Errorf("--nodes: bad count %q", f)
		}
		ns = append(ns, n)
	}
	switch groups {
	case "on":
		modes = []bool{true}
	case "off":
		modes = []bool{false}
	case "both":
		modes = []bool{true, false}
	default:
		return nil, nil, fmt.Errorf("--groups must be on, off or both")
	}
	if lbs < 1 || lbs > 65000 || repeat < 1 {
		return nil, nil, fmt.Errorf("--lbs must be 1…65,000 and --repeat ≥ 1")
	}
	return ns, modes, nil
}

// lbStressChild runs one configuration in a fresh weir process.
func lbStressChild(n, lbs int, groups bool, repeat int) (services.StressResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return services.StressResult{}, err
	}
	g := "on"
	if !groups {
		g = "off"
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(exe, "bench", "lbstress", "--json", "--nodes", strconv.Itoa(n), "--lbs", strconv.Itoa(lbs), "--groups", g, "--repeat", strconv.Itoa(repeat))
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return services.StressResult{}, fmt.Errorf("%v: %s", err, strings.TrimSpace(errb.String()))
	}
	var r services.StressResult
	sc := bufio.NewScanner(&out)
	if !sc.Scan() {
		return r, fmt.Errorf("child printed nothing")
	}
	return r, json.Unmarshal(sc.Bytes(), &r)
}
