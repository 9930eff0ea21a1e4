package main

import (
	"fmt"
	"io"

	"github.com/weir-dev/weir/internal/enrich"
	"github.com/weir-dev/weir/internal/enrich/services"
)

// runServicesExplain is 'weir services explain VIP'.
func runServicesExplain(args []string, stdout, stderr io.Writer) int {
	var (
		inv      string
		stress   string
		noGroups bool
		max      int
	)
	fs := helpFlagSet("services explain")
	fs.StringVar(&inv, "inventory", "", "inventory file (YAML or JSON; see docs/enrich.md)")
	fs.StringVar(&stress, "stress", "", "instead of a file, the lb-group-stress topology with N nodes and M load balancers (N,M)")
	fs.BoolVar(&noGroups, "no-groups", false, "compile without datapath groups (rows copied per datapath)")
	fs.IntVar(&max, "max-datapaths", 10, "datapath names listed per row before a count")
	pos, done, code := parseInterleaved(fs, args, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 1 || (inv == "") == (stress == "") {
		fmt.Fprintln(stderr, "weir services explain: give one VIP (last), and one of --inventory or --stress")
		return exitUsage
	}
	vip := pos[0]
	addr, port, err := services.ParseVIP(vip)
	if err != nil {
		fmt.Fprintf(stderr, "weir services explain: %v\n", err)
		return exitUsage
	}
	var in enrich.Inventory
	if inv != "" {
		if in, err = enrich.ReadInventoryFile(inv); err != nil {
			fmt.Fprintf(stderr, "weir services explain: %v\n", err)
			return exitFailure
		}
	} else if in.Nodes, in.LBs, in.Groups, err = services.StressTopology(stress); err != nil {
		fmt.Fprintf(stderr, "weir services explain: --stress: %v\n", err)
		return exitUsage
	}
	m, err := services.Build(services.Config{NoGroups: noGroups}, in.Nodes, in.LBs, in.Groups)
	if err != nil {
		fmt.Fprintf(stderr, "weir services explain: %v\n", err)
		return exitFailure
	}
	rows := m.Explain(addr, port)
	if len(rows) == 0 {
		fmt.Fprintf(stderr, "weir services explain: no load balancer has VIP %s\n", vip)
		return exitFailure
	}
	st := m.Stats()
	fmt.Fprintf(stdout, "VIP %s: %d rows (model: %d nodes, %d load balancers, %d rows, %d datapath groups, %d address sets)\n\n",
		vip, len(rows), st.Nodes, st.LBs, st.Rows, st.DPGroups, st.AddrSets)
	if err := services.WriteExplain(stdout, rows, max); err != nil {
		return exitFailure
	}
	return exitOK
}
