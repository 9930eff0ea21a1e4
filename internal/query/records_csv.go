package query

import (
	"bufio"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/termsafe"
)

// RecordCSVHeader names the columns of RecordCSV, in order: the JSON
// record's fields (docs/record.md) but the tunnel endpoints, which the
// store does not keep.
var RecordCSVHeader = []string{"src_ip", "dst_ip", "src_port", "dst_port", "proto", "icmp_type", "icmp_code",
	"packets", "bytes", "rev_packets", "rev_bytes", "tcp_flags", "rev_tcp_flags", "start", "end", "end_reason",
	"iface", "node", "vlan", "sampling", "drop_packets", "drop_bytes", "drop_reason",
	"nat_src_ip", "nat_src_port", "nat_dst_ip", "nat_dst_port", "verdict", "rule", "ct_mark", "ct_zone",
	"src_workload", "src_namespace", "src_node", "dst_workload", "dst_namespace", "dst_node",
	"service", "service_backends", "service_group", "service_match"}

// RecordCSV is a sink writing one CSV line per record (RFC 4180, a
// header line first), every field a column: numbers exact, times as in
// the JSON records, the NAT columns empty for records not translated.
// Strings from the network or files (interface, node, drop reason, rule,
// workload and service names) are escaped as termsafe.String does (a
// backslash doubled, a control character as \xNN), so the output is safe
// on a terminal.
type RecordCSV struct {
	w      *bufio.Writer
	b      []byte
	header bool
}

// NewRecordCSV writes CSV records to w.
func NewRecordCSV(w io.Writer) *RecordCSV {
	return &RecordCSV{w: bufio.NewWriterSize(w, 64<<10)}
}

// Write writes recs, after the header line on the first call.
func (c *RecordCSV) Write(recs []flow.Record) error {
	if !c.header {
		c.header = true
		if _, err := c.w.WriteString(strings.Join(RecordCSVHeader, ",") + "\n"); err != nil {
			return err
		}
	}
	for i := range recs {
		c.b = AppendRecordCSV(c.b[:0], &recs[i])
		if _, err := c.w.Write(c.b); err != nil {
			return err
		}
	}
	return nil
}

// Close flushes what is buffered (it does not close the writer).
func (c *RecordCSV) Close() error { return c.w.Flush() }

// AppendRecordCSV appends r as one CSV line (RecordCSVHeader's columns)
// with its newline.
func AppendRecordCSV(b []byte, r *flow.Record) []byte {
	k := &r.Key
	b = appendAddrCSV(b, k.SrcAddr, k.IPVersion)
	b = append(b, ',')
	b = appendAddrCSV(b, k.DstAddr, k.IPVersion)
	b = appendUints(b, uint64(k.SrcPort), uint64(k.DstPort), uint64(k.Proto), uint64(k.ICMPType), uint64(k.ICMPCode),
		r.Packets, r.Bytes, r.RevPackets, r.RevBytes, uint64(r.TCPFlags), uint64(r.RevTCPFlags))
	b = append(b, ',')
	b = format.AppendTime(b, r.Start)
	b = append(b, ',')
	b = format.AppendTime(b, r.End)
	b = append(b, ',')
	b = append(b, r.EndReason.String()...)
	b = appendStrCSV(b, r.Iface)
	b = appendStrCSV(b, r.Node)
	b = appendUints(b, uint64(r.VLAN), uint64(r.Sampling), r.DropPackets, r.DropBytes)
	b = appendStrCSV(b, r.DropReason)
	if n := &r.PostNAT; n.IPVersion != 0 {
		b = append(b, ',')
		b = appendAddrCSV(b, n.SrcAddr, n.IPVersion)
		b = appendUints(b, uint64(n.SrcPort))
		b = append(b, ',')
		b = appendAddrCSV(b, n.DstAddr, n.IPVersion)
		b = appendUints(b, uint64(n.DstPort))
	} else {
		b = append(b, ",,,,"...)
	}
	b = append(b, ',')
	if r.Verdict != flow.VerdictNone {
		b = append(b, r.Verdict.String()...)
	}
	b = appendStrCSV(b, r.Rule)
	b = appendUints(b, uint64(r.Mark), uint64(r.Zone))
	for _, w := range [2]*flow.Workload{r.SrcWorkload, r.DstWorkload} {
		if w == nil {
			b = append(b, ",,,"...)
			continue
		}
		b = appendStrCSV(b, w.Name)
		b = appendStrCSV(b, w.Namespace)
		b = appendStrCSV(b, w.Node)
	}
	if s := r.Service; s != nil {
		b = appendStrCSV(b, s.Name)
		b = appendStrCSV(b, s.Backends)
		b = appendStrCSV(b, s.Group)
	} else {
		b = append(b, ",,,"...)
	}
	b = append(b, ',')
	b = append(b, r.ServiceMatch.String()...)
	return append(b, '\n')
}

// appendUints appends ",v" for each v.
func appendUints(b []byte, vs ...uint64) []byte {
	for _, v := range vs {
		b = append(b, ',')
		b = strconv.AppendUint(b, v, 10)
	}
	return b
}

// appendAddrCSV appends a stored address (IPv4-mapped for version 4).
func appendAddrCSV(b []byte, a [16]byte, ver uint8) []byte {
	x := netip.AddrFrom16(a)
	if ver == 4 {
		x = x.Unmap()
	}
	return x.AppendTo(b)
}

// appendStrCSV appends ",s": escaped for a terminal, quoted when it holds
// a comma, a quote or a leading or trailing space (RFC 4180; escaping
// has already removed line breaks).
func appendStrCSV(b []byte, s string) []byte {
	b = append(b, ',')
	s = termsafe.String(s)
	if !strings.ContainsAny(s, `,"`) && (s == "" || s[0] != ' ' && s[len(s)-1] != ' ') {
		return append(b, s...)
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			b = append(b, '"')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}
