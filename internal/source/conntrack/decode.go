// Package conntrack reads the kernel's connection tracking table over
// ctnetlink (NETLINK_NETFILTER, subsystem NFNL_SUBSYS_CTNETLINK).
//
// This file is the platform-neutral decoder: one netlink message in, one
// reusable Conn out, without allocating. The socket and the dump loop are
// Linux-only (socket_linux.go).
package conntrack

import (
	"encoding/binary"
	"errors"
	"net/netip"

	"github.com/weir-dev/weir/internal/nfnetlink"
)

// Sentinel errors of the decoder. Every malformed message returns one of
// them (test with errors.Is); the Decoder also counts the finer Reason.
var (
	// ErrTruncated: the message or an attribute is shorter than its header
	// or its length field says.
	ErrTruncated = errors.New("conntrack: truncated message")
	// ErrBadAttr: an attribute has an impossible length or a value of the
	// wrong size.
	ErrBadAttr = errors.New("conntrack: malformed attribute")
	// ErrNotConntrack: the message is not a ctnetlink conntrack message.
	ErrNotConntrack = errors.New("conntrack: not a ctnetlink conntrack message")
)

// Reason is why a message was rejected, finer than the sentinel error.
type Reason uint8

// Reasons, counted in Decoder.Errors.
const (
	ReasonNone         Reason = iota // no error
	ReasonShortHeader                // shorter than nlmsghdr + nfgenmsg
	ReasonLength                     // nlmsg_len out of range of the buffer
	ReasonNotCtnetlink               // another netlink subsystem or message type
	ReasonAttrHeader                 // an attribute header is cut off
	ReasonAttrLength                 // an attribute's length is < 4 or runs past its parent
	ReasonAttrSize                   // a fixed-size value has the wrong size
	NumReasons                       // number of reasons (array size)
)

var reasonNames = [NumReasons]string{"none", "short_header", "length", "not_ctnetlink", "attr_header", "attr_length", "attr_size"}

// String returns the reason's label for metrics.
func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// errFor maps a reason to its sentinel error.
func errFor(r Reason) error {
	switch r {
	case ReasonNone:
		return nil
	case ReasonNotCtnetlink:
		return ErrNotConntrack
	case ReasonShortHeader, ReasonLength, ReasonAttrHeader:
		return ErrTruncated
	default:
		return ErrBadAttr
	}
}

// MsgType is the ctnetlink message type of a decoded message.
type MsgType uint8

// Message types. A dump answers with MsgNew messages; events are MsgNew
// (new or updated entry) and MsgDelete (destroyed entry).
const (
	MsgNew    MsgType = ipctnlMsgCtNew
	MsgGet    MsgType = ipctnlMsgCtGet
	MsgDelete MsgType = ipctnlMsgCtDelete
)

// Status is the conntrack status bit set (enum ip_conntrack_status).
type Status uint32

// Status bits.
const (
	StatusExpected     Status = 1 << 0
	StatusSeenReply    Status = 1 << 1
	StatusAssured      Status = 1 << 2
	StatusConfirmed    Status = 1 << 3
	StatusSrcNAT       Status = 1 << 4
	StatusDstNAT       Status = 1 << 5
	StatusSeqAdjust    Status = 1 << 6
	StatusSrcNATDone   Status = 1 << 7
	StatusDstNATDone   Status = 1 << 8
	StatusDying        Status = 1 << 9
	StatusFixedTimeout Status = 1 << 10
	StatusTemplate     Status = 1 << 11
	StatusHelper       Status = 1 << 13
	StatusOffload      Status = 1 << 14
	StatusHWOffload    Status = 1 << 15
)

// Dying reports whether the entry is being destroyed.
func (s Status) Dying() bool { return s&StatusDying != 0 }

// Assured reports whether the entry saw traffic both ways and is kept
// under table pressure.
func (s Status) Assured() bool { return s&StatusAssured != 0 }

// SNAT reports whether the source is translated (the reply tuple's
// destination differs from the original source).
func (s Status) SNAT() bool { return s&StatusSrcNAT != 0 }

// DNAT reports whether the destination is translated (the reply tuple's
// source differs from the original destination).
func (s Status) DNAT() bool { return s&StatusDstNAT != 0 }

// TCP connection tracking states (enum tcp_conntrack), as in Conn.TCPState.
const (
	TCPNone        = 0
	TCPSynSent     = 1
	TCPSynRecv     = 2
	TCPEstablished = 3
	TCPFinWait     = 4
	TCPCloseWait   = 5
	TCPLastAck     = 6
	TCPTimeWait    = 7
	TCPClose       = 8
	TCPSynSent2    = 9
)

// Has bits say which optional attributes a message carried.
type Has uint32

// Has bits.
const (
	HasStatus Has = 1 << iota
	HasTimeout
	HasMark
	HasCountersOrig
	HasCountersReply
	HasUse
	HasID
	HasZone
	HasLabels
	HasTCP
	HasTimestampStart
	HasTimestampStop
	HasOrig
	HasReply
)

// Tuple is one direction of a connection. Addresses are 16 bytes; IPv4
// addresses are IPv4-mapped (::ffff:a.b.c.d), so one code path serves both.
type Tuple struct {
	Src, Dst         [16]byte
	SrcPort, DstPort uint16 // TCP, UDP, SCTP, DCCP, UDP-Lite
	Proto            uint8  // IP protocol number
	V6               bool   // addresses came as IPv6 attributes
	ICMPType         uint8  // ICMP or ICMPv6 type
	ICMPCode         uint8  // ICMP or ICMPv6 code
	ICMPID           uint16 // ICMP or ICMPv6 echo identifier
	Zone             uint16 // CTA_TUPLE_ZONE, if the tuple has its own zone
}

// Counters are one direction's packets and IP-layer bytes.
type Counters struct {
	Packets, Bytes uint64
}

// Conn is one decoded conntrack entry. Decode overwrites all of it, so one
// Conn can be reused for every message.
type Conn struct {
	Type   MsgType // MsgNew, MsgDelete, ...
	Flags  uint16  // netlink flags of the message (NLM_F_*)
	Family uint8   // nfgenmsg address family
	Has    Has     // which optional attributes were present

	Orig, Reply Tuple

	Status   Status
	Mark     uint32
	Zone     uint16
	ID       uint32
	Timeout  uint32 // seconds until the entry expires
	Use      uint32 // reference count
	Labels   [labelsLen]byte
	LabelLen uint8 // bytes of Labels that were present (≤ 16)

	CountersOrig, CountersReply Counters

	TCPState                      uint8 // TCP* constant
	TCPWscaleOrig, TCPWscaleReply uint8 // window scale per direction
	TCPFlagsOrig, TCPFlagsReply   uint8 // IP_CT_TCP_FLAG_* bits per direction (flags byte of nf_ct_tcp_flags)

	Start, Stop uint64 // CTA_TIMESTAMP: ns since the epoch (0: not present)
}

// Created reports whether an event message announces a new entry
// (NLM_F_CREATE on a MsgNew); a dump reply never has it.
func (c *Conn) Created() bool { return c.Type == MsgNew && c.Flags&nfnetlink.FlagCreate != 0 }

// Decoder decodes ctnetlink messages and counts the rejected ones by
// reason. Its zero value is ready; it is not safe for concurrent use.
type Decoder struct {
	// Errors counts rejected messages per Reason.
	Errors [NumReasons]uint64
}

// Decode decodes one netlink message (nlmsghdr included) into c. A
// rejected message is counted in d.Errors and c must not be used.
func (d *Decoder) Decode(c *Conn, msg []byte) error {
	r := decode(c, msg)
	if r != ReasonNone {
		d.Errors[r]++
	}
	return errFor(r)
}

// Decode decodes one netlink message (nlmsghdr included) into c, without a
// Decoder to count errors.
func Decode(c *Conn, msg []byte) error { return errFor(decode(c, msg)) }

// NextMessage splits the first netlink message off buf (several messages
// share one datagram). It returns the message and the rest after its
// alignment padding, or ErrTruncated if buf does not hold a whole message.
func NextMessage(buf []byte) (msg, rest []byte, err error) {
	msg, rest, ok := nfnetlink.NextMessage(buf)
	if !ok {
		return nil, nil, ErrTruncated
	}
	return msg, rest, nil
}

// attrReason names nfnetlink.Attr's verdict with this package's Reason.
// The walks call nfnetlink.Attr directly: it inlines there, a wrapper
// around it would not.
func attrReason(e nfnetlink.AttrErr) Reason {
	switch e {
	case nfnetlink.AttrOK:
		return ReasonNone
	case nfnetlink.AttrCut:
		return ReasonAttrHeader
	}
	return ReasonAttrLength
}

// be16/be32/be64 read a fixed-size big-endian value, with the size checked.
func be16(v []byte) (uint16, Reason) {
	if len(v) != 2 {
		return 0, ReasonAttrSize
	}
	return binary.BigEndian.Uint16(v), ReasonNone
}

func be32(v []byte) (uint32, Reason) {
	if len(v) != 4 {
		return 0, ReasonAttrSize
	}
	return binary.BigEndian.Uint32(v), ReasonNone
}

func be64(v []byte) (uint64, Reason) {
	if len(v) != 8 {
		return 0, ReasonAttrSize
	}
	return binary.BigEndian.Uint64(v), ReasonNone
}

func u8(v []byte) (uint8, Reason) {
	if len(v) != 1 {
		return 0, ReasonAttrSize
	}
	return v[0], ReasonNone
}

// decode is Decode returning the reason. The walk is non-recursive: each
// nesting level ctnetlink defines has its own loop, so depth is bounded.
func decode(c *Conn, msg []byte) Reason {
	*c = Conn{} // Conn holds no pointers: this is a plain memory clear
	if len(msg) < nfnetlink.HdrLen {
		return ReasonShortHeader
	}
	n := int(binary.NativeEndian.Uint32(msg[nfnetlink.MsgLenOff:]))
	if n < nfnetlink.HdrLen || n > len(msg) {
		return ReasonLength
	}
	msg = msg[:n]
	typ := binary.NativeEndian.Uint16(msg[nfnetlink.MsgTypeOff:])
	if typ>>8 != nfnlSubsysCtnetlink || typ&0xff > ipctnlMsgCtDelete {
		return ReasonNotCtnetlink
	}
	c.Type = MsgType(typ & 0xff)
	c.Flags = binary.NativeEndian.Uint16(msg[nfnetlink.MsgFlagsOff:])
	c.Family = msg[nfnetlink.MsgHdrLen+nfnetlink.GenFamilyOff]
	b := msg[nfnetlink.HdrLen:]
	for len(b) > 0 {
		t, v, rest, e := nfnetlink.Attr(b)
		r := attrReason(e)
		if r != ReasonNone {
			return r
		}
		b = rest
		if r = c.top(t, v); r != ReasonNone {
			return r
		}
	}
	return ReasonNone
}

// top decodes one top-level attribute.
func (c *Conn) top(t uint16, v []byte) (r Reason) {
	switch t {
	case ctaTupleOrig:
		c.Has |= HasOrig
		return tuple(&c.Orig, v)
	case ctaTupleReply:
		c.Has |= HasReply
		return tuple(&c.Reply, v)
	case ctaStatus:
		var s uint32
		s, r = be32(v)
		c.Status, c.Has = Status(s), c.Has|HasStatus
	case ctaTimeout:
		c.Timeout, r = be32(v)
		c.Has |= HasTimeout
	case ctaMark:
		c.Mark, r = be32(v)
		c.Has |= HasMark
	case ctaUse:
		c.Use, r = be32(v)
		c.Has |= HasUse
	case ctaID:
		c.ID, r = be32(v)
		c.Has |= HasID
	case ctaZone:
		c.Zone, r = be16(v)
		c.Has |= HasZone
	case ctaLabels:
		if len(v) > labelsLen {
			return ReasonAttrSize
		}
		c.LabelLen = uint8(copy(c.Labels[:], v))
		c.Has |= HasLabels
	case ctaCountersOrig:
		c.Has |= HasCountersOrig
		return counters(&c.CountersOrig, v)
	case ctaCountersReply:
		c.Has |= HasCountersReply
		return counters(&c.CountersReply, v)
	case ctaProtoinfo:
		return c.protoinfo(v)
	case ctaTimestamp:
		return c.timestamp(v)
	}
	return r // unknown and unused attributes are skipped
}

// tuple decodes CTA_TUPLE_ORIG or CTA_TUPLE_REPLY.
func tuple(tp *Tuple, b []byte) Reason {
	for len(b) > 0 {
		t, v, rest, e := nfnetlink.Attr(b)
		r := attrReason(e)
		if r != ReasonNone {
			return r
		}
		b = rest
		switch t {
		case ctaTupleIP:
			r = tupleIP(tp, v)
		case ctaTupleProto:
			r = tupleProto(tp, v)
		case ctaTupleZone:
			tp.Zone, r = be16(v)
		}
		if r != ReasonNone {
			return r
		}
	}
	return ReasonNone
}

// tupleIP decodes CTA_TUPLE_IP: IPv4 lands IPv4-mapped in the 16-byte
// address, IPv6 as is.
func tupleIP(tp *Tuple, b []byte) Reason {
	for len(b) > 0 {
		t, v, rest, e := nfnetlink.Attr(b)
		r := attrReason(e)
		if r != ReasonNone {
			return r
		}
		b = rest
		switch t {
		case ctaIPv4Src, ctaIPv4Dst:
			if len(v) != 4 {
				return ReasonAttrSize
			}
			a := &tp.Src
			if t == ctaIPv4Dst {
				a = &tp.Dst
			}
			*a = [16]byte{10: 0xff, 11: 0xff}
			copy(a[12:], v)
		case ctaIPv6Src, ctaIPv6Dst:
			if len(v) != 16 {
				return ReasonAttrSize
			}
			a := &tp.Src
			if t == ctaIPv6Dst {
				a = &tp.Dst
			}
			copy(a[:], v)
			tp.V6 = true
		}
	}
	return ReasonNone
}

// tupleProto decodes CTA_TUPLE_PROTO.
func tupleProto(tp *Tuple, b []byte) Reason {
	for len(b) > 0 {
		t, v, rest, e := nfnetlink.Attr(b)
		r := attrReason(e)
		if r != ReasonNone {
			return r
		}
		b = rest
		switch t {
		case ctaProtoNum:
			tp.Proto, r = u8(v)
		case ctaProtoSrcPort:
			tp.SrcPort, r = be16(v)
		case ctaProtoDstPort:
			tp.DstPort, r = be16(v)
		case ctaProtoICMPID, ctaProtoICMPv6ID:
			tp.ICMPID, r = be16(v)
		case ctaProtoICMPType, ctaProtoICMPv6Type:
			tp.ICMPType, r = u8(v)
		case ctaProtoICMPCode, ctaProtoICMPv6Code:
			tp.ICMPCode, r = u8(v)
		}
		if r != ReasonNone {
			return r
		}
	}
	return ReasonNone
}

// counters decodes CTA_COUNTERS_ORIG or CTA_COUNTERS_REPLY, 64-bit or the
// old 32-bit form.
func counters(cn *Counters, b []byte) Reason {
	for len(b) > 0 {
		t, v, rest, e := nfnetlink.Attr(b)
		r := attrReason(e)
		if r != ReasonNone {
			return r
		}
		b = rest
		var x uint32
		switch t {
		case ctaCountersPackets:
			cn.Packets, r = be64(v)
		case ctaCountersBytes:
			cn.Bytes, r = be64(v)
		case ctaCounters32Packets:
			x, r = be32(v)
			cn.Packets = uint64(x)
		case ctaCounters32Bytes:
			x, r = be32(v)
			cn.Bytes = uint64(x)
		}
		if r != ReasonNone {
			return r
		}
	}
	return ReasonNone
}

// protoinfo decodes CTA_PROTOINFO; only its TCP part is kept.
func (c *Conn) protoinfo(b []byte) Reason {
	for len(b) > 0 {
		t, v, rest, e := nfnetlink.Attr(b)
		r := attrReason(e)
		if r != ReasonNone {
			return r
		}
		b = rest
		if t != ctaProtoinfoTCP {
			continue
		}
		c.Has |= HasTCP
		for len(v) > 0 {
			tt, vv, vrest, e := nfnetlink.Attr(v)
			r := attrReason(e)
			if r != ReasonNone {
				return r
			}
			v = vrest
			switch tt {
			case ctaProtoinfoTCPState:
				c.TCPState, r = u8(vv)
			case ctaProtoinfoTCPWscaleOrig:
				c.TCPWscaleOrig, r = u8(vv)
			case ctaProtoinfoTCPWscaleReply:
				c.TCPWscaleReply, r = u8(vv)
			case ctaProtoinfoTCPFlagsOrig, ctaProtoinfoTCPFlagsReply:
				// struct nf_ct_tcp_flags { __u8 flags; __u8 mask; }
				if len(vv) != 2 {
					return ReasonAttrSize
				}
				if tt == ctaProtoinfoTCPFlagsOrig {
					c.TCPFlagsOrig = vv[0]
				} else {
					c.TCPFlagsReply = vv[0]
				}
			}
			if r != ReasonNone {
				return r
			}
		}
	}
	return ReasonNone
}

// timestamp decodes CTA_TIMESTAMP.
func (c *Conn) timestamp(b []byte) Reason {
	for len(b) > 0 {
		t, v, rest, e := nfnetlink.Attr(b)
		r := attrReason(e)
		if r != ReasonNone {
			return r
		}
		b = rest
		switch t {
		case ctaTimestampStart:
			c.Start, r = be64(v)
			c.Has |= HasTimestampStart
		case ctaTimestampStop:
			c.Stop, r = be64(v)
			c.Has |= HasTimestampStop
		}
		if r != ReasonNone {
			return r
		}
	}
	return ReasonNone
}

// SrcAddr returns the tuple's source address (IPv4 unmapped).
func (t *Tuple) SrcAddr() netip.Addr { return addr(t.Src, t.V6) }

// DstAddr returns the tuple's destination address (IPv4 unmapped).
func (t *Tuple) DstAddr() netip.Addr { return addr(t.Dst, t.V6) }

func addr(a [16]byte, v6 bool) netip.Addr {
	if v6 {
		return netip.AddrFrom16(a)
	}
	return netip.AddrFrom16(a).Unmap()
}
