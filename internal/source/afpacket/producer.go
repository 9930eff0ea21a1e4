package afpacket

import (
	"fmt"
	"io"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/meter"
	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/rusage"
	"github.com/weir-dev/weir/internal/termsafe"
)

// Routes are the capture's HTTP routes: GET /flows/live (FlowsHandler).
func (c *Capture) Routes(pending ...func(func(*flow.Record))) []metrics.Route {
	return []metrics.Route{{Pattern: "GET /flows/live", Handler: c.FlowsHandler(pending...)}}
}

// WriteStats writes the capture's --stats lines.
func (c *Capture) WriteStats(w io.Writer) {
	n := format.Count
	st := c.Stats()
	fmt.Fprintf(w, "interfaces  %d opened, %d released, %d failed to open\n", st.Opened, st.Released, st.OpenFails)
	for _, f := range st.Ifaces {
		fmt.Fprintf(w, "  %-15s %s packets, %s; kernel: %s received, %s dropped, %s ring freezes\n",
			termsafe.String(f.Name), n(f.Packets), format.Bytes(f.Bytes), n(f.Kernel.Packets), n(f.Kernel.Drops), n(f.Kernel.FreezeQueue))
	}
	meter.WriteCounters(w, &st.Decoder, &st.Table, st.Records)
	fmt.Fprintf(w, "duplicates  %s (copies of packets already counted at another interface)\n", n(st.Table.Duplicates))
	fmt.Fprintf(w, "memory      %d workers, tables %s for %s flows; max RSS %s\n",
		st.Workers, format.Bytes(uint64(st.TableMem)), n(uint64(st.TableCap)), format.Bytes(rusage.MaxRSS()))
}
