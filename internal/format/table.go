package format

import (
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/termsafe"
)

// MaxTopKeys bounds the flows a Table ranks in top-N mode. Records of flows
// beyond it are still counted in the totals and reported as unranked.
const MaxTopKeys = 1 << 20

// Table writes records as an aligned table for people.
//
// With Top > 0 it aggregates records per flow (key and interface, so the
// active-timeout deltas of one flow add up) and prints the Top flows by
// bytes at Close, with totals and each flow's share. With Top == 0 it
// prints one row per record as records arrive.
type Table struct {
	w        io.Writer
	top      int
	agg      map[topKey]*topRow
	unranked uint64
	total    topRow
	records  uint64
	header   bool
}

type topKey struct {
	key   flow.Key
	iface string
}

type topRow struct {
	flow.Record
	records int
}

// NewTable returns a table sink writing to w; see Table for top.
func NewTable(w io.Writer, top int) *Table {
	return &Table{w: w, top: top, agg: make(map[topKey]*topRow)}
}

// Write adds recs to the table (top mode) or prints them (streaming mode).
func (t *Table) Write(recs []flow.Record) error {
	if t.top <= 0 {
		return t.stream(recs)
	}
	for i := range recs {
		r := &recs[i]
		t.records++
		addCounts(&t.total.Record, r)
		k := topKey{r.Key, r.Iface}
		row, ok := t.agg[k]
		if !ok {
			if len(t.agg) >= MaxTopKeys {
				t.unranked++
				continue
			}
			row = &topRow{Record: *r}
			row.Packets, row.Bytes, row.RevPackets, row.RevBytes = 0, 0, 0, 0
			t.agg[k] = row
		}
		addCounts(&row.Record, r)
		row.records++
	}
	return nil
}

func addCounts(dst, r *flow.Record) {
	dst.Packets += r.Packets
	dst.Bytes += r.Bytes
	dst.RevPackets += r.RevPackets
	dst.RevBytes += r.RevBytes
	dst.TCPFlags |= r.TCPFlags
	dst.RevTCPFlags |= r.RevTCPFlags
	if dst.Start == 0 || r.Start < dst.Start {
		dst.Start = r.Start
	}
	if r.End > dst.End {
		dst.End = r.End
	}
	dst.EndReason = r.EndReason // the last record's reason is the flow's
}

var columns = "PROTO\tSOURCE\tDESTINATION\tPACKETS\tBYTES\tREV PACKETS\tREV BYTES\tFLAGS\tDURATION\tREASON\tIFACE"

func (t *Table) stream(recs []flow.Record) error {
	tw := tabwriter.NewWriter(t.w, 0, 0, 2, ' ', 0)
	if !t.header {
		fmt.Fprintln(tw, columns)
		t.header = true
	}
	for i := range recs {
		writeRow(tw, &recs[i], "")
	}
	return tw.Flush()
}

// Close prints the top-N table (top mode) and totals.
func (t *Table) Close() error {
	if t.top <= 0 {
		return nil
	}
	rows := make([]*topRow, 0, len(t.agg))
	for _, r := range t.agg {
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool {
		bi, bj := rows[i].Bytes+rows[i].RevBytes, rows[j].Bytes+rows[j].RevBytes
		if bi != bj {
			return bi > bj
		}
		return rows[i].Start < rows[j].Start
	})
	if len(rows) > t.top {
		rows = rows[:t.top]
	}
	tot := t.total.Bytes + t.total.RevBytes
	tw := tabwriter.NewWriter(t.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, columns+"\tSHARE")
	for _, r := range rows {
		share := 0.0
		if tot > 0 {
			share = 100 * float64(r.Bytes+r.RevBytes) / float64(tot)
		}
		writeRow(tw, &r.Record, fmt.Sprintf("\t%.1f%%", share))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(t.w, "\n%d flows (%d records), top %d shown; total %s packets, %s\n",
		len(t.agg), t.records, len(rows),
		Count(t.total.Packets+t.total.RevPackets), Bytes(tot))
	if t.unranked > 0 && err == nil {
		_, err = fmt.Fprintf(t.w, "%d records of flows beyond the first %d were counted in the totals but not ranked\n", t.unranked, MaxTopKeys)
	}
	return err
}

// writeRow prints one record. A translated endpoint shows where NAT took
// it ("10.96.0.10:443 → 10.244.1.5:8443"), and a deny flow's REASON its
// verdict and rule ("idle, deny weir-deny"); other columns are as for
// any record. An enriched endpoint shows its workload in parentheses
// ("10.0.0.1:40000 (shop/web-1)"), and the destination the service the
// flow reached and how ("[shop/cart vip]"). Names from outside (interface,
// rule, workloads, service) are escaped for the terminal (termsafe).
func writeRow(w io.Writer, r *flow.Record, extra string) {
	k := &r.Key
	src, dst := endpoint(k.Src(), k.SrcPort, k), endpoint(k.Dst(), k.DstPort, k)
	if r.NATed() {
		n := &r.PostNAT
		if n.SrcAddr != k.SrcAddr || n.SrcPort != k.SrcPort {
			src += " → " + endpoint(n.Src(), n.SrcPort, k)
		}
		if n.DstAddr != k.DstAddr || n.DstPort != k.DstPort {
			dst += " → " + endpoint(n.Dst(), n.DstPort, k)
		}
	}
	src += workloadLabel(r.SrcWorkload)
	dst += workloadLabel(r.DstWorkload)
	if r.Service != nil && r.Service.Name != "" {
		dst += " [" + termsafe.String(r.Service.Name)
		if r.ServiceMatch != flow.ServiceMatchNone {
			dst += " " + r.ServiceMatch.String()
		}
		dst += "]"
	}
	reason := r.EndReason.String()
	if r.Verdict != flow.VerdictNone {
		reason += ", " + strings.TrimSpace(r.Verdict.String()+" "+termsafe.String(r.Rule))
	}
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s%s\n",
		protoName(k), src, dst,
		Count(r.Packets), Bytes(r.Bytes), Count(r.RevPackets), Bytes(r.RevBytes),
		Flags(r.TCPFlags)+"/"+Flags(r.RevTCPFlags),
		time.Duration(r.End-r.Start).Round(time.Millisecond), reason, termsafe.String(r.Iface), extra)
}

// workloadLabel is " (namespace/name)" for a known workload with a name,
// " (name)" outside namespaces, "" otherwise.
func workloadLabel(w *flow.Workload) string {
	if w == nil || w.Name == "" {
		return ""
	}
	if w.Namespace == "" {
		return " (" + termsafe.String(w.Name) + ")"
	}
	return " (" + termsafe.String(w.Namespace) + "/" + termsafe.String(w.Name) + ")"
}

func protoName(k *flow.Key) string {
	switch k.Proto {
	case flow.ProtoTCP:
		return "tcp"
	case flow.ProtoUDP:
		return "udp"
	case flow.ProtoSCTP:
		return "sctp"
	case flow.ProtoICMP:
		return fmt.Sprintf("icmp %d/%d", k.ICMPType, k.ICMPCode)
	case flow.ProtoICMPv6:
		return fmt.Sprintf("icmp6 %d/%d", k.ICMPType, k.ICMPCode)
	}
	return strconv.Itoa(int(k.Proto))
}

func endpoint(a netip.Addr, port uint16, k *flow.Key) string {
	switch k.Proto {
	case flow.ProtoTCP, flow.ProtoUDP, flow.ProtoSCTP, 33, 136:
		return netip.AddrPortFrom(a, port).String()
	}
	return a.String()
}

// Flags renders TCP flags tcpdump-style (F S R P . U E W), or "-" for none.
func Flags(f uint8) string {
	if f == 0 {
		return "-"
	}
	const names = "FSRP.UEW"
	var b strings.Builder
	for i := 0; i < 8; i++ {
		if f&(1<<i) != 0 {
			b.WriteByte(names[i])
		}
	}
	return b.String()
}

// Bytes renders n bytes in IEC units (B, KiB, MiB, …) with three significant digits.
func Bytes(n uint64) string {
	if n < 1024 {
		return strconv.FormatUint(n, 10) + " B"
	}
	f := float64(n)
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := -1
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	switch {
	case f < 10:
		return fmt.Sprintf("%.2f %s", f, units[i])
	case f < 100:
		return fmt.Sprintf("%.1f %s", f, units[i])
	}
	return fmt.Sprintf("%.0f %s", f, units[i])
}

// Int renders n with thousands separators and its sign: -1,234,567.
func Int(n int64) string {
	if n < 0 {
		return "-" + Count(uint64(-(n+1))+1) // -(n+1)+1: no overflow at math.MinInt64
	}
	return Count(uint64(n))
}

// Count renders n with thousands separators.
func Count(n uint64) string {
	s := strconv.FormatUint(n, 10)
	if len(s) <= 3 {
		return s
	}
	var b strings.Builder
	pre := len(s) % 3
	if pre > 0 {
		b.WriteString(s[:pre])
	}
	for i := pre; i < len(s); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return b.String()
}

// WriteFlows prints recs as an aligned table under a title line: the live
// view of a running capture (flows still in the table: REASON is "none").
func WriteFlows(w io.Writer, title string, recs []flow.Record) error {
	if _, err := fmt.Fprintln(w, title); err != nil {
		return err
	}
	if len(recs) == 0 {
		_, err := fmt.Fprintln(w, "(no live flows)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, columns)
	for i := range recs {
		writeRow(tw, &recs[i], "")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w)
	return err
}
