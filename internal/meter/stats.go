package meter

import (
	"fmt"
	"io"
	"strings"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/rusage"
)

// writeStats writes a replay's --stats report: everything that moved,
// every error by reason, and the memory the table holds.
func writeStats(w io.Writer, st *Stats, p *Meter) {
	n := format.Count
	secs := st.Elapsed.Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(st.Frames) / secs / 1e6
	}
	fmt.Fprintf(w, "frames      %s read in %.3fs (%.2f M/s)\n", n(st.Frames), secs, rate)
	WriteCounters(w, &st.Decoder, &st.Table, st.Records)
	if st.TunnelOverflow > 0 {
		fmt.Fprintf(w, "tunnels     %s packets past %d tunnels: their records carry no tunnel endpoints\n", n(st.TunnelOverflow), flow.MaxTunnels)
	}
	fmt.Fprintf(w, "memory      table %s for %s flows (%d B/slot, %.1f B/flow); max RSS %s\n",
		format.Bytes(uint64(p.TableMemory())), n(uint64(p.TableCap())), flow.SlotSize(),
		float64(p.TableMemory())/float64(p.TableCap()), format.Bytes(rusage.MaxRSS()))
}

// WriteCounters writes the decoder's and the table's --stats lines (a
// replay's and a live capture's).
func WriteCounters(w io.Writer, d *packet.Stats, t *flow.Stats, records uint64) {
	n := format.Count
	fmt.Fprintf(w, "decoded     %s (ipv4 %s, ipv6 %s); ip length from frame %s; headers cut by the snap length %s\n",
		n(d.Decoded), n(d.IPv4), n(d.IPv6), n(d.IPLengthFromFrame), n(d.CutHeaders))
	if in, out := decapPairs(&d.Decap); in != "" || out != "" {
		fmt.Fprintf(w, "decap       keyed by the inner packet%s; by the outer header%s\n", orNone(in), orNone(out))
	}
	fmt.Fprintf(w, "errors      %s%s\n", n(d.TotalErrors()), pairs(d.EachError))
	fmt.Fprintf(w, "non-ip      %s%s\n", n(d.NonIP), pairs(d.EachNonIP))
	f := &d.Fragments
	fmt.Fprintf(w, "fragments   first %s, attributed %s, unattributed %s, table evictions %s\n",
		n(f.First), n(f.Attributed), n(f.Unattributed), n(f.Evicted))
	fmt.Fprintf(w, "table       %s packets, %s; %s flows created; %s port reuses; %s orientation flips\n",
		n(t.Packets), format.Bytes(t.Bytes), n(t.FlowsCreated), n(t.PortReuses), n(t.RoleFlips))
	fmt.Fprintf(w, "records     %s%s\n", n(records), reasons(&t.Records))
	fmt.Fprintf(w, "evicted     %s%s; %s full-table passes; %s empty deltas skipped; %s counter-wrap reports\n",
		n(sum(&t.Evicted)), reasons(&t.Evicted), n(t.FullPasses), n(t.EmptyDeltasSkipped), n(t.WrapReports))
}

// decapPairs lists the tunnels keyed by their inner packet and those left
// to their outer header, by kind.
func decapPairs(s *packet.DecapStats) (in, out string) {
	list := func(a *[packet.NumTunnels]uint64) string {
		return pairs(func(fn func(string, uint64)) {
			for i, c := range a {
				fn(packet.Tunnel(i).String(), c)
			}
		})
	}
	return list(&s.Inner), list(&s.Outer)
}

func orNone(pairs string) string {
	if pairs == "" {
		return ": none"
	}
	return pairs
}

func pairs(each func(func(string, uint64))) string {
	var b strings.Builder
	each(func(name string, c uint64) {
		if c > 0 {
			fmt.Fprintf(&b, ", %s %s", name, format.Count(c))
		}
	})
	if b.Len() == 0 {
		return ""
	}
	return ":" + b.String()[1:]
}

func reasons(a *[flow.NumReasons]uint64) string {
	var b strings.Builder
	for i, c := range a {
		if c > 0 {
			fmt.Fprintf(&b, ", %s %s", flow.EndReason(i), format.Count(c))
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return ":" + b.String()[1:]
}

func sum(a *[flow.NumReasons]uint64) (s uint64) {
	for _, c := range a {
		s += c
	}
	return s
}
