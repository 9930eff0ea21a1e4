package api

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/query"
	"github.com/weir-dev/weir/internal/termsafe"
)

// WriteIfaces writes the stored interfaces with their spans as 'weir
// query --list' shows them: a table, a JSON array or CSV. Interface names
// come from the network: the table escapes them for the terminal.
func WriteIfaces(w io.Writer, spans []IfaceSpan, f query.Format) error {
	switch f {
	case query.JSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if spans == nil {
			spans = []IfaceSpan{}
		}
		return enc.Encode(spans)
	case query.CSV:
		var b strings.Builder
		b.WriteString("iface,first,last,days,blocks,flows,bytes,nodes\n")
		for _, s := range spans {
			fmt.Fprintf(&b, "%s,%s,%s,%d,%d,%d,%d,%s\n", csvField(s.Iface), s.First.Format(time.RFC3339Nano), s.Last.Format(time.RFC3339Nano), s.Days, s.Blocks, s.Flows, s.Bytes,
				csvField(strings.Join(s.Nodes, ",")))
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "iface\tfirst\tlast\tdays\tblocks\tflows\tsize\tnodes\t")
	for _, s := range spans {
		nodes := make([]string, len(s.Nodes))
		for i, n := range s.Nodes {
			nodes[i] = termsafe.String(n)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t\n", termsafe.String(s.Iface), s.First.Format(time.RFC3339), s.Last.Format(time.RFC3339),
			s.Days, s.Blocks, format.Count(uint64(s.Flows)), format.Bytes(uint64(s.Bytes)), strings.Join(nodes, ","))
	}
	return tw.Flush()
}

// csvField quotes s when CSV needs it.
func csvField(s string) string {
	if strings.ContainsAny(s, ",\"\n\r") {
		return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
	}
	return s
}
