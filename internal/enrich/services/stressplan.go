package services

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// StressPlan checks the flags of 'weir bench lbstress': the comma-separated
// node counts, the group modes (on, off or both), the load balancers added
// before the measured one and the repetitions.
func StressPlan(nodes, groups string, lbs, repeat int) (ns []int, modes []bool, err error) {
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

// RunStressChild runs one configuration of RunStress in a fresh process of
// exe ('weir bench lbstress --json' with one node count), so each
// configuration's memory figures start from an empty heap.
func RunStressChild(exe string, n, lbs int, groups bool, repeat int) (StressResult, error) {
	g := "on"
	if !groups {
		g = "off"
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(exe, "bench", "lbstress", "--json", "--nodes", strconv.Itoa(n), "--lbs", strconv.Itoa(lbs), "--groups", g, "--repeat", strconv.Itoa(repeat))
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return StressResult{}, fmt.Errorf("%v: %s", err, strings.TrimSpace(errb.String()))
	}
	var r StressResult
	sc := bufio.NewScanner(&out)
	if !sc.Scan() {
		return r, fmt.Errorf("child printed nothing")
	}
	return r, json.Unmarshal(sc.Bytes(), &r)
}
