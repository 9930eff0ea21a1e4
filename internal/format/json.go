// Package format writes records for people and scripts: JSON lines (the
// record contract in docs/record.md) and an aligned human table.
package format

import (
	"bufio"
	"io"
	"net/netip"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/weir-dev/weir/internal/flow"
)

// JSON writes one JSON object per record and line. Field names are a
// contract (docs/record.md); encoding appends into a reused buffer, so a
// steady stream of records does not allocate.
type JSON struct {
	w   *bufio.Writer
	buf []byte
}

// NewJSON returns a JSON-lines sink writing to w.
func NewJSON(w io.Writer) *JSON {
	return &JSON{w: bufio.NewWriterSize(w, 64<<10), buf: make([]byte, 0, 512)}
}

// timeLayout is RFC 3339 with nanoseconds, fixed width, always UTC.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// appendTimeSlow is appendTime through the general formatter.
func appendTimeSlow(b []byte, ns int64) []byte {
	return time.Unix(0, ns).UTC().AppendFormat(b, timeLayout)
}

// Write encodes recs and flushes them, so a live capture's records reach a
// pipe as their batch leaves the table (batches are large when traffic is,
// so the flush costs one write per batch).
func (j *JSON) Write(recs []flow.Record) error {
	for i := range recs {
		j.buf = AppendJSON(j.buf[:0], &recs[i])
		j.buf = append(j.buf, '\n')
		if _, err := j.w.Write(j.buf); err != nil {
			return err
		}
	}
	return j.w.Flush()
}

// Close flushes buffered output.
func (j *JSON) Close() error { return j.w.Flush() }

// AppendJSON appends r as one JSON object (no trailing newline) to b.
func AppendJSON(b []byte, r *flow.Record) []byte {
	k := &r.Key
	b = append(b, `{"src_ip":"`...)
	b = appendAddr(b, k.SrcAddr, k.IPVersion)
	b = append(b, `","dst_ip":"`...)
	b = appendAddr(b, k.DstAddr, k.IPVersion)
	b = append(b, `","src_port":`...)
	b = strconv.AppendUint(b, uint64(k.SrcPort), 10)
	b = append(b, `,"dst_port":`...)
	b = strconv.AppendUint(b, uint64(k.DstPort), 10)
	b = append(b, `,"proto":`...)
	b = strconv.AppendUint(b, uint64(k.Proto), 10)
	if k.Proto == flow.ProtoICMP || k.Proto == flow.ProtoICMPv6 {
		b = append(b, `,"icmp_type":`...)
		b = strconv.AppendUint(b, uint64(k.ICMPType), 10)
		b = append(b, `,"icmp_code":`...)
		b = strconv.AppendUint(b, uint64(k.ICMPCode), 10)
	}
	b = append(b, `,"packets":`...)
	b = strconv.AppendUint(b, r.Packets, 10)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendUint(b, r.Bytes, 10)
	b = append(b, `,"rev_packets":`...)
	b = strconv.AppendUint(b, r.RevPackets, 10)
	b = append(b, `,"rev_bytes":`...)
	b = strconv.AppendUint(b, r.RevBytes, 10)
	b = append(b, `,"tcp_flags":`...)
	b = strconv.AppendUint(b, uint64(r.TCPFlags), 10)
	b = append(b, `,"rev_tcp_flags":`...)
	b = strconv.AppendUint(b, uint64(r.RevTCPFlags), 10)
	b = append(b, `,"start":"`...)
	b = appendTime(b, r.Start)
	b = append(b, `","end":"`...)
	b = appendTime(b, r.End)
	b = append(b, `","end_reason":"`...)
	b = append(b, r.EndReason.String()...)
	b = append(b, `","iface":`...)
	b = appendString(b, r.Iface)
	b = appendField(b, `,"node":`, r.Node)
	if r.VLAN != 0 {
		b = append(b, `,"vlan":`...)
		b = strconv.AppendUint(b, uint64(r.VLAN), 10)
	}
	if r.TunnelSrc.IsValid() {
		b = append(b, `,"tunnel_src":"`...)
		b = r.TunnelSrc.AppendTo(b)
		b = append(b, `","tunnel_dst":"`...)
		b = r.TunnelDst.AppendTo(b)
		b = append(b, '"')
	}
	if r.DropPackets != 0 {
		b = append(b, `,"drop_packets":`...)
		b = strconv.AppendUint(b, r.DropPackets, 10)
		b = append(b, `,"drop_bytes":`...)
		b = strconv.AppendUint(b, r.DropBytes, 10)
		b = append(b, `,"drop_reason":`...)
		b = appendString(b, r.DropReason)
	}
	if r.Sampling > 1 {
		b = append(b, `,"sampling":`...)
		b = strconv.AppendUint(b, uint64(r.Sampling), 10)
	}
	if r.NATed() {
		n := &r.PostNAT
		b = append(b, `,"nat_src_ip":"`...)
		b = appendAddr(b, n.SrcAddr, n.IPVersion)
		b = append(b, `","nat_dst_ip":"`...)
		b = appendAddr(b, n.DstAddr, n.IPVersion)
		b = append(b, `","nat_src_port":`...)
		b = strconv.AppendUint(b, uint64(n.SrcPort), 10)
		b = append(b, `,"nat_dst_port":`...)
		b = strconv.AppendUint(b, uint64(n.DstPort), 10)
	}
	if r.Verdict != flow.VerdictNone {
		b = append(b, `,"verdict":`...)
		b = appendString(b, r.Verdict.String())
		b = append(b, `,"rule":`...)
		b = appendString(b, r.Rule)
	}
	if r.Mark != 0 {
		b = append(b, `,"ct_mark":`...)
		b = strconv.AppendUint(b, uint64(r.Mark), 10)
	}
	if r.Zone != 0 {
		b = append(b, `,"ct_zone":`...)
		b = strconv.AppendUint(b, uint64(r.Zone), 10)
	}
	if r.SrcWorkload != nil {
		b = appendWorkload(b, r.SrcWorkload, `,"src_workload":`, `,"src_namespace":`, `,"src_node":`)
	}
	if r.DstWorkload != nil {
		b = appendWorkload(b, r.DstWorkload, `,"dst_workload":`, `,"dst_namespace":`, `,"dst_node":`)
	}
	if s := r.Service; s != nil {
		b = appendField(b, `,"service":`, s.Name)
		b = appendField(b, `,"service_backends":`, s.Backends)
		b = appendField(b, `,"service_group":`, s.Group)
	}
	if r.ServiceMatch != flow.ServiceMatchNone {
		b = append(b, `,"service_match":`...)
		b = appendString(b, r.ServiceMatch.String())
	}
	return append(b, '}')
}

// appendWorkload appends w's name, namespace and node under the given
// keys, each omitted when empty.
func appendWorkload(b []byte, w *flow.Workload, name, ns, node string) []byte {
	b = appendField(b, name, w.Name)
	b = appendField(b, ns, w.Namespace)
	return appendField(b, node, w.Node)
}

// appendField appends key (`,"name":`) and v as a JSON string, or nothing
// when v is empty.
func appendField(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, key...)
	return appendString(b, v)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string: interface names come from
// capture files, so quotes, control bytes and invalid UTF-8 are escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

func appendAddr(b []byte, a [16]byte, version uint8) []byte {
	ip := netip.AddrFrom16(a)
	if version == 4 {
		ip = ip.Unmap()
	}
	return ip.AppendTo(b)
}
