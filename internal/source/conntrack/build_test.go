package conntrack

import (
	"encoding/binary"
	"net/netip"

	"github.com/weir-dev/weir/internal/nfnetlink"
)

// builder assembles ctnetlink messages by hand, for tests: a netlink
// header, nfgenmsg, then attributes, nested with begin/end.
type builder struct {
	b     []byte
	stack []int
}

// newMsg starts a ctnetlink message of type msg with netlink flags and
// the nfgenmsg family.
func newMsg(msg uint8, flags uint16, family uint8) *builder {
	m := &builder{b: make([]byte, nfnetlink.HdrLen)}
	binary.NativeEndian.PutUint16(m.b[nfnetlink.MsgTypeOff:], nfnlSubsysCtnetlink<<8|uint16(msg))
	binary.NativeEndian.PutUint16(m.b[nfnetlink.MsgFlagsOff:], flags)
	binary.NativeEndian.PutUint32(m.b[nfnetlink.MsgSeqOff:], 7)
	m.b[nfnetlink.MsgHdrLen+nfnetlink.GenFamilyOff] = family
	return m
}

// begin opens a nested attribute (NLA_F_NESTED set, as the kernel does).
func (m *builder) begin(t uint16) *builder {
	m.stack = append(m.stack, len(m.b))
	m.b = binary.NativeEndian.AppendUint16(m.b, 0)
	m.b = binary.NativeEndian.AppendUint16(m.b, t|nfnetlink.AttrFNested)
	return m
}

// end closes the innermost nested attribute.
func (m *builder) end() *builder {
	at := m.stack[len(m.stack)-1]
	m.stack = m.stack[:len(m.stack)-1]
	binary.NativeEndian.PutUint16(m.b[at:], uint16(len(m.b)-at))
	return m
}

// attr appends one attribute with value v and its padding.
func (m *builder) attr(t uint16, v []byte) *builder {
	m.b = nfnetlink.AppendAttr(m.b, t, v...)
	return m
}

func (m *builder) u8(t uint16, v uint8) *builder { return m.attr(t, []byte{v}) }
func (m *builder) be16(t uint16, v uint16) *builder {
	return m.attr(t, binary.BigEndian.AppendUint16(nil, v))
}
func (m *builder) be32(t uint16, v uint32) *builder {
	return m.attr(t, binary.BigEndian.AppendUint32(nil, v))
}
func (m *builder) be64(t uint16, v uint64) *builder {
	return m.attr(t, binary.BigEndian.AppendUint64(nil, v))
}

// bytes finishes the message: its length goes into the netlink header.
func (m *builder) bytes() []byte {
	binary.NativeEndian.PutUint32(m.b[nfnetlink.MsgLenOff:], uint32(len(m.b)))
	return m.b
}

// tuple appends a CTA_TUPLE_* attribute the way the kernel lays it out.
func (m *builder) tuple(t uint16, src, dst netip.Addr, proto uint8, sport, dport uint16) *builder {
	m.begin(t).begin(ctaTupleIP)
	if src.Is4() {
		m.attr(ctaIPv4Src, src.AsSlice()).attr(ctaIPv4Dst, dst.AsSlice())
	} else {
		m.attr(ctaIPv6Src, src.AsSlice()).attr(ctaIPv6Dst, dst.AsSlice())
	}
	m.end().begin(ctaTupleProto).u8(ctaProtoNum, proto)
	switch proto {
	case 1: // ICMP: sport carries the id, dport type<<8|code
		m.be16(ctaProtoICMPID, sport).u8(ctaProtoICMPType, uint8(dport>>8)).u8(ctaProtoICMPCode, uint8(dport))
	case 58:
		m.be16(ctaProtoICMPv6ID, sport).u8(ctaProtoICMPv6Type, uint8(dport>>8)).u8(ctaProtoICMPv6Code, uint8(dport))
	default:
		m.be16(ctaProtoSrcPort, sport).be16(ctaProtoDstPort, dport)
	}
	return m.end().end()
}

// counters appends CTA_COUNTERS_* in the 64-bit form.
func (m *builder) counters(t uint16, pkts, bytes uint64) *builder {
	return m.begin(t).be64(ctaCountersPackets, pkts).be64(ctaCountersBytes, bytes).end()
}
