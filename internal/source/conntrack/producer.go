package conntrack

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/metrics"
)

// Collector returns a metrics.Collector of the source's counters.
func (s *Source) Collector() metrics.Collector { return newCollector(s.Stats, s.capacity) }

// WriteStats writes the source's --stats lines.
func (s *Source) WriteStats(w io.Writer) {
	n := format.Count
	st := s.Stats()
	fmt.Fprintf(w, "conntrack   %s polls (%s failed, %s early after lost events), last %s; %s dump messages, %s events, %s rejected\n",
		n(st.Polls), n(st.PollErrors), n(st.Resyncs), st.PollTime.Round(time.Microsecond),
		n(st.Dump.Messages), n(st.Events.Messages), n(st.Dump.Rejected+st.Events.Rejected))
	c := st.Store
	var parts []string
	for r := ExportReason(0); r < NumExportReasons; r++ {
		parts = append(parts, fmt.Sprintf("%s %s", r, n(c.Exported[r])))
	}
	fmt.Fprintf(w, "connections %s held, %s new, %s evicted (%s records lost), %s counter resets, %s filtered; records: %s\n",
		n(uint64(c.Conns)), n(c.New), n(c.Evicted), n(c.EvictedUnexported), n(c.CounterResets), n(c.Filtered), strings.Join(parts, ", "))
	fmt.Fprintf(w, "ended       %s gone from a dump before their destroy event; forgotten past --ct-max-conns/4 remembered: %s live, %s ended (counted again if seen)\n",
		n(c.Vanished), n(c.Forgotten), n(c.ForgottenEnded))
	if st.Untracked {
		fmt.Fprintf(w, "conntrack   %s\n", UntrackedHelp(s.Namespace(), st.UntrackedPackets, st.UntrackedEstablished))
	}
}
