package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/weir-dev/weir/internal/enrich"
)

// runServicesExplain is 'weir services explain VIP'.
func runServicesExplain(args []string, stdout, stderr io.Writer) int {
	var c enrich.ExplainConfig
	fs := helpFlagSet("services explain")
	fs.StringVar(&c.Inventory, "inventory", "", "inventory file (YAML or JSON; see docs/enrich.md)")
	fs.StringVar(&c.Stress, "stress", "", "instead of a file, the lb-group-stress topology with N nodes and M load balancers (N,M)")
	fs.BoolVar(&c.NoGroups, "no-groups", false, "compile without datapath groups (rows copied per datapath)")
	fs.IntVar(&c.MaxDatapaths, "max-datapaths", 10, "datapath names listed per row before a count")
	pos, done, code := parseInterleaved(fs, args, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 1 || (c.Inventory == "") == (c.Stress == "") {
		fmt.Fprintln(stderr, "weir services explain: give one VIP (last), and one of --inventory or --stress")
		return exitUsage
	}
	c.VIP = pos[0]
	if err := enrich.Explain(stdout, c); err != nil {
		fmt.Fprintf(stderr, "weir services explain: %v\n", err)
		if errors.Is(err, enrich.ErrExplainUsage) {
			return exitUsage
		}
		return exitFailure
	}
	return exitOK
}
