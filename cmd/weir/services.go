package main

import (
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

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
	fs := newFlagSet("services explain", "weir services explain (--inventory FILE | --stress N,M) VIP[:PORT]",
		`Compile the service model (nodes, load balancers, load-balancer groups) into
the logical rows a datapath needs, as OVN generates them for load balancers
(switch pre-stateful and LB stages; router ARP responder, defrag, DNAT and
un-DNAT), and print the rows that serve one VIP: stage, priority, match,
actions, and the datapath group each row is shared by. A VIP without a port
shows the rows of every port it has.`, `  weir services explain --inventory examples/inventory.yaml 10.96.0.10:53
  weir services explain --stress 3,10 42.0.0.1:8080
  weir services explain --stress 3,10 --no-groups 42.0.0.1
`)
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
	addr, port, err := parseVIP(vip)
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
	} else {
		n, m, ok := strings.Cut(stress, ",")
		nn, err1 := strconv.Atoi(n)
		mm, err2 := strconv.Atoi(m)
		if !ok || err1 != nil || err2 != nil || nn < 1 || mm < 1 || nn > 100000 || mm > 65000 {
			fmt.Fprintf(stderr, "weir services explain: --stress wants N,M (e.g. 3,10)\n")
			return exitUsage
		}
		for i := range nn {
			in.Nodes = append(in.Nodes, services.StressNode(i))
		}
		for j := range mm {
			in.LBs = append(in.LBs, services.StressLB(j))
		}
		in.Groups = []services.Group{services.StressGroupOf(mm)}
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

// parseVIP reads ADDR, ADDR:PORT, [V6] or [V6]:PORT.
func parseVIP(s string) (netip.Addr, uint16, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr(), ap.Port(), nil
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("bad VIP %q: want ADDR[:PORT]", s)
	}
	return a, 0, nil
}
