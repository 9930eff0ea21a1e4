package enrich

import (
	"errors"
	"fmt"
	"io"

	"github.com/weir-dev/weir/internal/enrich/services"
)

// ExplainConfig is one 'weir services explain VIP'.
type ExplainConfig struct {
	VIP          string // address:port
	Inventory    string // inventory file; or
	Stress       string // the lb-group-stress topology "N,M" instead
	NoGroups     bool   // compile without datapath groups
	MaxDatapaths int    // datapath names listed per row before a count
}

// ErrExplainUsage marks Explain's errors that are the command line's
// fault (a bad VIP or --stress).
var ErrExplainUsage = errors.New("usage")

// Explain compiles the service model of the inventory (or the stress
// topology) and writes the datapath rows that serve the VIP to w.
func Explain(w io.Writer, c ExplainConfig) error {
	addr, port, err := services.ParseVIP(c.VIP)
	if err != nil {
		return fmt.Errorf("%w%.0w", err, ErrExplainUsage)
	}
	var in Inventory
	if c.Inventory != "" {
		if in, err = ReadInventoryFile(c.Inventory); err != nil {
			return err
		}
	} else if in.Nodes, in.LBs, in.Groups, err = services.StressTopology(c.Stress); err != nil {
		return fmt.Errorf("--stress: %w%.0w", err, ErrExplainUsage)
	}
	m, err := services.Build(services.Config{NoGroups: c.NoGroups}, in.Nodes, in.LBs, in.Groups)
	if err != nil {
		return err
	}
	rows := m.Explain(addr, port)
	if len(rows) == 0 {
		return fmt.Errorf("no load balancer has VIP %s", c.VIP)
	}
	st := m.Stats()
	fmt.Fprintf(w, "VIP %s: %d rows (model: %d nodes, %d load balancers, %d rows, %d datapath groups, %d address sets)\n\n",
		c.VIP, len(rows), st.Nodes, st.LBs, st.Rows, st.DPGroups, st.AddrSets)
	return services.WriteExplain(w, rows, c.MaxDatapaths)
}
