package ipfixrecv

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"

	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/ipfix"
)

// WriteStats writes the collector's --stats lines.
func (c *Collector) WriteStats(w io.Writer) {
	n := format.Count
	st := c.Stats()
	fmt.Fprintf(w, "messages    %s IPFIX, %s NetFlow v9, %s NetFlow v5; %s sequence gaps: %s records lost (%s of them came late), %s NetFlow v9 export packets lost, %s resets\n",
		n(st.Messages[2]), n(st.Messages[1]), n(st.Messages[0]), n(st.SequenceGaps), n(st.LostRecords), n(st.LateRecords), n(st.LostPackets), n(st.SeqResets))
	writeLosses(w, st.LossByExporter)
	fmt.Fprintf(w, "socket      %s datagrams dropped by the kernel (UDP receive buffer full)\n", n(st.SocketDrops))
	fmt.Fprintf(w, "records     %s flows, %s options records; %s templates learnt, %s withdrawn, %s expired, %s held; %s sets skipped\n",
		n(st.Records), n(st.OptionsRecords), n(st.Templates), n(st.Withdrawals), n(st.Expired), n(st.TemplatesLive), n(st.SkippedSets))
	fmt.Fprintf(w, "sessions    %s held, %s of %s template state; forgotten:", n(st.SessionsLive), format.Bytes(uint64(st.BudgetUsed)), format.Bytes(uint64(st.BudgetLimit)))
	for i, c := range st.Evicted {
		fmt.Fprintf(w, " %s %s", ipfix.EvictReason(i), n(c))
	}
	fmt.Fprintf(w, "\nretimed     %s records with times past --max-clock-skew, %s without times\n", n(st.ClockSkew), n(st.NoTime))
	fmt.Fprintf(w, "ifaces      %s names sanitised; records named (other): %s over a session's or the budget's bound, %s over --max-ifaces-per-exporter, %s over the %s names in all\n",
		n(st.NamesSanitised), n(st.NamesRefused), n(st.OtherIfaceExporter), n(st.OtherIfaceGlobal), n(DefaultMaxIfaces))
	fmt.Fprintf(w, "errors     ")
	for i, c := range st.Errors {
		fmt.Fprintf(w, " %s %s", ipfix.DecodeError(i), n(c))
	}
	if st.InternFull > 0 {
		fmt.Fprintf(w, "; enterprise value tables emptied when full %s times", n(st.InternFull))
	}
	fmt.Fprintf(w, "\nconnections %s accepted, %s rejected (%s over --max-conns-per-source), %d open; closed: %s idle, %s handshake timeouts, %s failed handshakes, %s evicted at --max-conns, %s message timeouts (%s partial messages dropped, %s bytes); %s read errors, %s sink errors\n",
		n(st.ConnsAccepted), n(st.ConnsRejected+st.ConnsRejectedPerSource), n(st.ConnsRejectedPerSource), st.ConnsOpen,
		n(st.ConnsIdleClosed), n(st.HandshakeTimeouts), n(st.HandshakeFailures), n(st.ConnsEvicted), n(st.ConnsMessageTimeouts),
		n(st.PartialMessages), n(st.PartialBytes), n(st.ReadErrors), n(st.SinkErrors))
}

// writeLosses names the exporters that lost the most (five at most).
func writeLosses(w io.Writer, l map[netip.Addr]ExporterLoss) {
	if len(l) == 0 {
		return
	}
	n := format.Count
	ex := slices.SortedFunc(maps.Keys(l), func(a, b netip.Addr) int {
		return cmp.Or(cmp.Compare(l[b].Records+l[b].Packets, l[a].Records+l[a].Packets), cmp.Compare(l[b].Gaps, l[a].Gaps), a.Compare(b))
	})
	fmt.Fprintf(w, "lost by    ")
	for i, a := range ex {
		if i == 5 {
			fmt.Fprintf(w, " (%d more exporters)", len(ex)-5)
			break
		}
		name := "other"
		if a != OtherExporter {
			name = a.String()
		}
		fmt.Fprintf(w, " %s %s records", name, n(l[a].Records))
		if l[a].Packets > 0 {
			fmt.Fprintf(w, " %s v9 packets", n(l[a].Packets))
		}
		fmt.Fprintf(w, " (%s gaps)", n(l[a].Gaps))
	}
	fmt.Fprintln(w)
}
