package nflog

import (
	"fmt"
	"io"

	"github.com/weir-dev/weir/internal/format"
)

// WriteStats writes the source's --stats lines, one per group.
func (s *Source) WriteStats(w io.Writer) { writeStats(w, s.Stats()) }

// writeStats writes one --stats line per group of gs.
func writeStats(w io.Writer, gs []GroupStats) {
	n := format.Count
	for _, g := range gs {
		var bad uint64
		for _, e := range g.Aggregator.Errors {
			bad += e
		}
		fmt.Fprintf(w, "nflog       group %d: %s packets in %s deny-flow records, %s rejected, %s lost (gaps %s, overruns %s), %s prefixes cut to %d bytes\n",
			g.Group, n(g.Aggregator.Packets), n(g.Exported), n(bad), n(g.Aggregator.SeqGaps+g.Socket.ENOBUFS), n(g.Aggregator.SeqGaps), n(g.Socket.ENOBUFS),
			n(g.Aggregator.PrefixCut), MaxPrefixLen)
	}
}
