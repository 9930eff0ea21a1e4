// Package wire is weir's record format on Kafka: one flow.Record as one
// ClickHouse RowBinary row of the columns in Columns, version 1.
//
// RowBinary is what ClickHouse's Kafka engine reads without a schema file on
// every server version weir supports (18.16, whose formats have no Protobuf,
// to current ones), so the broker's records go into ClickHouse through the
// server's own consumer with no weir process in between; docs/fleet.md gives
// the reasons and the layout field by field. Columns is the one definition:
// the encoder writes it, the decoder reads it, and internal/clickhouse
// creates the Kafka engine table from it, so they cannot drift apart.
//
// Version rules: the first column is the version (1). A version's layout
// never changes; a new layout is a new version, on a new topic.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/weir-dev/weir/internal/flow"
)

// Version is the layout Append writes, the first byte of every row.
const Version = 1

// Column is one field of a row: its name, its ClickHouse type and what it
// holds.
type Column struct {
	Name, Type, Doc string
}

// Columns are the fields of a row, in order.
var Columns = []Column{
	{"schema", "UInt8", "layout version: 1"},
	{"node", "String", "where the record was observed (`node`)"},
	{"iface", "String", "interface the flow was first seen on (`iface`)"},
	{"start_ns", "Int64", "first packet of this record, Unix nanoseconds (`start`)"},
	{"end_ns", "Int64", "last packet of this record, Unix nanoseconds (`end`)"},
	{"ip_version", "UInt8", "4 or 6"},
	{"src_addr", "FixedString(16)", "initiator address, IPv4 as IPv4-mapped IPv6 (::ffff:a.b.c.d) (`src_ip`)"},
	{"dst_addr", "FixedString(16)", "responder address, likewise (`dst_ip`)"},
	{"src_port", "UInt16", "`src_port`"},
	{"dst_port", "UInt16", "`dst_port`"},
	{"proto", "UInt8", "`proto`"},
	{"icmp_type", "UInt8", "`icmp_type` (0 unless proto is 1 or 58)"},
	{"icmp_code", "UInt8", "`icmp_code`"},
	{"packets", "UInt64", "`packets`"},
	{"bytes", "UInt64", "`bytes`"},
	{"rev_packets", "UInt64", "`rev_packets`"},
	{"rev_bytes", "UInt64", "`rev_bytes`"},
	{"tcp_flags", "UInt8", "`tcp_flags`"},
	{"rev_tcp_flags", "UInt8", "`rev_tcp_flags`"},
	{"end_reason", "UInt8", "`end_reason`: 0 none, 1 idle, 2 active, 3 end, 4 full, 5 eof, 6 shutdown"},
	{"vlan", "UInt16", "`vlan` (0: untagged)"},
	{"sampling", "UInt32", "`sampling` (0 or 1: unsampled)"},
	{"drop_packets", "UInt64", "`drop_packets`"},
	{"drop_bytes", "UInt64", "`drop_bytes`"},
	{"drop_reason", "String", "`drop_reason` (at most 64 bytes)"},
	{"nat_ip_version", "UInt8", "0: not translated, else the post-NAT key's IP version"},
	{"nat_src_addr", "FixedString(16)", "`nat_src_ip` (:: when not translated)"},
	{"nat_dst_addr", "FixedString(16)", "`nat_dst_ip`"},
	{"nat_src_port", "UInt16", "`nat_src_port` (0 when not translated)"},
	{"nat_dst_port", "UInt16", "`nat_dst_port`"},
	{"verdict", "UInt8", "`verdict`: 0 none, 1 deny"},
	{"rule", "String", "`rule` (at most 64 bytes)"},
	{"ct_mark", "UInt32", "`ct_mark`"},
	{"ct_zone", "UInt16", "`ct_zone`"},
	{"src_workload", "String", "`src_workload` (\"\": not known; strings at most 4096 bytes)"},
	{"src_namespace", "String", "`src_namespace`"},
	{"src_node", "String", "`src_node`"},
	{"dst_workload", "String", "`dst_workload`"},
	{"dst_namespace", "String", "`dst_namespace`"},
	{"dst_node", "String", "`dst_node`"},
	{"service", "String", "`service`"},
	{"service_backends", "String", "`service_backends`"},
	{"service_group", "String", "`service_group`"},
	{"service_match", "UInt8", "`service_match`: 0 none, 1 vip, 2 nat, 3 backend, 4 ambiguous"},
}

// String bounds, as the embedded store keeps them: a longer string is cut
// at a UTF-8 rune start, so that both stores answer alike.
const (
	MaxShortString = 64   // drop_reason, rule
	MaxString      = 4096 // every other string
)

// MaxRow bounds an encoded row: the fixed fields and every string at its
// bound, with its length prefix.
const MaxRow = 256 + 2*(MaxShortString+1) + 12*(MaxString+2)

// Append appends r as one row to b. With b's capacity reused it does not
// allocate.
func Append(b []byte, r *flow.Record) []byte {
	k := &r.Key
	b = append(b, Version)
	b = appendStr(b, r.Node, MaxString)
	b = appendStr(b, r.Iface, MaxString)
	// The fixed-width runs are written at fixed offsets of one grown
	// span: one capacity check and no bounds checks instead of one per field.
	b, f := grow(b, fixedA)
	p := (*[fixedA]byte)(f)
	le := binary.LittleEndian
	le.PutUint64(p[0:], uint64(r.Start))
	le.PutUint64(p[8:], uint64(r.End))
	p[16] = k.IPVersion
	*(*[16]byte)(p[17:]) = k.SrcAddr
	*(*[16]byte)(p[33:]) = k.DstAddr
	le.PutUint16(p[49:], k.SrcPort)
	le.PutUint16(p[51:], k.DstPort)
	p[53], p[54], p[55] = k.Proto, k.ICMPType, k.ICMPCode
	le.PutUint64(p[56:], r.Packets)
	le.PutUint64(p[64:], r.Bytes)
	le.PutUint64(p[72:], r.RevPackets)
	le.PutUint64(p[80:], r.RevBytes)
	p[88], p[89], p[90] = r.TCPFlags, r.RevTCPFlags, uint8(r.EndReason)
	le.PutUint16(p[91:], r.VLAN)
	le.PutUint32(p[93:], r.Sampling)
	le.PutUint64(p[97:], r.DropPackets)
	le.PutUint64(p[105:], r.DropBytes)
	b = appendStr(b, r.DropReason, MaxShortString)
	b, f = grow(b, fixedB)
	q := (*[fixedB]byte)(f)
	if n := &r.PostNAT; n.IPVersion != 0 {
		q[0] = n.IPVersion
		*(*[16]byte)(q[1:]) = n.SrcAddr
		*(*[16]byte)(q[17:]) = n.DstAddr
		le.PutUint16(q[33:], n.SrcPort)
		le.PutUint16(q[35:], n.DstPort)
	} else { // not translated: version 0, :: and port 0, as the store keeps it
		clear(q[:37])
	}
	q[37] = uint8(r.Verdict)
	b = appendStr(b, r.Rule, MaxShortString)
	b, f = grow(b, 6)
	le.PutUint32(f[0:4], r.Mark)
	le.PutUint16(f[4:6], r.Zone)
	b = appendWorkload(b, r.SrcWorkload)
	b = appendWorkload(b, r.DstWorkload)
	if s := r.Service; s != nil {
		b = appendStr(b, s.Name, MaxString)
		b = appendStr(b, s.Backends, MaxString)
		b = appendStr(b, s.Group, MaxString)
	} else {
		b = append(b, 0, 0, 0)
	}
	return append(b, uint8(r.ServiceMatch))
}

// The fixed-width runs of a row: start_ns to drop_bytes, and
// nat_ip_version to verdict.
const (
	fixedA = 8 + 8 + 1 + 16 + 16 + 2 + 2 + 3 + 4*8 + 3 + 2 + 4 + 8 + 8
	fixedB = 1 + 16 + 16 + 2 + 2 + 1
)

// grow extends b by n bytes and returns it and those n bytes, for the
// caller to fill (they hold whatever b's capacity held before).
func grow(b []byte, n int) ([]byte, []byte) {
	b = slices.Grow(b, n)
	o := len(b)
	b = b[:o+n]
	return b, b[o:]
}

var zeros [64]byte

func appendWorkload(b []byte, w *flow.Workload) []byte {
	if w == nil {
		return append(b, 0, 0, 0) // three empty strings
	}
	b = appendStr(b, w.Name, MaxString)
	b = appendStr(b, w.Namespace, MaxString)
	return appendStr(b, w.Node, MaxString)
}

// appendStr appends s, cut to max bytes at a rune start, as a RowBinary
// String: its length as a uvarint, then its bytes.
func appendStr(b []byte, s string, max int) []byte {
	s = Clip(s, max)
	if len(s) < 0x80 { // the usual case: a one-byte length
		return append(append(b, byte(len(s))), s...)
	}
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Clip cuts s to at most max bytes, backing up to a rune start so that a
// cut UTF-8 string stays valid (as the embedded store cuts its strings).
func Clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Decoding errors.
var (
	ErrShort   = errors.New("wire: row cut short")
	ErrVersion = errors.New("wire: unknown layout version")
	ErrString  = errors.New("wire: string longer than its bound")
)

// Decode reads one row from b into r and returns the bytes after it. It
// allocates the strings and workloads (the hot path is Append); a row from
// another version is ErrVersion, a short or malformed one ErrShort or
// ErrString, and r is then partly filled.
func Decode(b []byte, r *flow.Record) ([]byte, error) {
	d := decoder{b: b}
	*r = flow.Record{}
	if v := d.u8(); d.err == nil && v != Version {
		return b, fmt.Errorf("%w %d (this weir reads %d)", ErrVersion, v, Version)
	}
	k := &r.Key
	r.Node = d.str(MaxString)
	r.Iface = d.str(MaxString)
	r.Start, r.End = int64(d.u64()), int64(d.u64())
	k.IPVersion = d.u8()
	d.addr(&k.SrcAddr)
	d.addr(&k.DstAddr)
	k.SrcPort, k.DstPort = d.u16(), d.u16()
	k.Proto, k.ICMPType, k.ICMPCode = d.u8(), d.u8(), d.u8()
	r.Packets, r.Bytes, r.RevPackets, r.RevBytes = d.u64(), d.u64(), d.u64(), d.u64()
	r.TCPFlags, r.RevTCPFlags, r.EndReason = d.u8(), d.u8(), flow.EndReason(d.u8())
	r.VLAN, r.Sampling = d.u16(), d.u32()
	r.DropPackets, r.DropBytes = d.u64(), d.u64()
	r.DropReason = d.str(MaxShortString)
	n := &r.PostNAT
	n.IPVersion = d.u8()
	d.addr(&n.SrcAddr)
	d.addr(&n.DstAddr)
	n.SrcPort, n.DstPort = d.u16(), d.u16()
	if n.IPVersion != 0 { // the post-NAT key's protocol and ICMP fields are the key's (conntrack source)
		n.Proto, n.ICMPType, n.ICMPCode = k.Proto, k.ICMPType, k.ICMPCode
	}
	r.Verdict = flow.Verdict(d.u8())
	r.Rule = d.str(MaxShortString)
	r.Mark, r.Zone = d.u32(), d.u16()
	r.SrcWorkload = d.workload()
	r.DstWorkload = d.workload()
	if s := (flow.Service{Name: d.str(MaxString), Backends: d.str(MaxString), Group: d.str(MaxString)}); s != (flow.Service{}) {
		r.Service = &s
	}
	r.ServiceMatch = flow.ServiceMatch(d.u8())
	if d.err != nil {
		return b, d.err
	}
	return d.b, nil
}

// decoder reads fields off b; after the first error every read yields zero.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil || len(d.b) < n {
		if d.err == nil {
			d.err = ErrShort
		}
		return zeros[:n]
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) u8() uint8   { return d.take(1)[0] }
func (d *decoder) u16() uint16 { return binary.LittleEndian.Uint16(d.take(2)) }
func (d *decoder) u32() uint32 { return binary.LittleEndian.Uint32(d.take(4)) }
func (d *decoder) u64() uint64 { return binary.LittleEndian.Uint64(d.take(8)) }
func (d *decoder) addr(a *[16]byte) {
	copy(a[:], d.take(16))
}

func (d *decoder) str(max int) string {
	if d.err != nil {
		return ""
	}
	n, k := binary.Uvarint(d.b)
	switch {
	case k <= 0:
		d.err = ErrShort
		return ""
	case n > uint64(max):
		d.err = ErrString
		return ""
	}
	d.b = d.b[k:]
	if uint64(len(d.b)) < n {
		d.err = ErrShort
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) workload() *flow.Workload {
	w := flow.Workload{Name: d.str(MaxString), Namespace: d.str(MaxString), Node: d.str(MaxString)}
	if w == (flow.Workload{}) {
		return nil
	}
	return &w
}
