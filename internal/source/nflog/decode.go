// Package nflog reads packets that firewall rules log to an NFLOG group
// (nftables "log group N", iptables "-j NFLOG") over netlink
// (NETLINK_NETFILTER, subsystem NFNL_SUBSYS_ULOG) and aggregates the dropped
// ones into deny flows.
//
// What the kernel delivers, per logged packet, is one NFULNL_MSG_PACKET:
// nfgenmsg carries the packet's protocol family (AF_INET or AF_INET6 for an
// inet table) and the group; NFULA_PACKET_HDR the hardware protocol
// (0x0800, 0x86dd) and the netfilter hook (NF_INET_LOCAL_IN = 1 for an input
// chain); NFULA_PREFIX the rule's log prefix exactly as written in the rule,
// trailing spaces included, plus a terminating NUL (which Decode strips);
// NFULA_PAYLOAD the packet from its IP header on, cut to the copy range;
// NFULA_IFINDEX_INDEV/OUTDEV the interfaces; NFULA_TIMESTAMP only when the
// packet was timestamped on receive; NFULA_UID/GID only when the packet
// already has a local socket.
//
// This file is the platform-neutral decoder: one netlink message in, one
// reusable Packet out, without allocating. The socket is Linux-only
// (socket_linux.go).
package nflog

import (
	"encoding/binary"
	"errors"

	"github.com/weir-dev/weir/internal/nfnetlink"
)

// Sentinel errors of the decoder (test with errors.Is); the Decoder also
// counts the finer Reason.
var (
	// ErrTruncated: the message or an attribute is shorter than its header
	// or its length field says.
	ErrTruncated = errors.New("nflog: truncated message")
	// ErrBadAttr: an attribute has an impossible length or a value of the
	// wrong size.
	ErrBadAttr = errors.New("nflog: malformed attribute")
	// ErrNotPacket: the message is not an NFLOG packet message.
	ErrNotPacket = errors.New("nflog: not an NFLOG packet message")
	// ErrPayload: the message carries no payload, or one the packet
	// decoder rejected (its Stats say why).
	ErrPayload = errors.New("nflog: missing or undecodable payload")
)

// Reason is why a message was rejected, finer than the sentinel error.
type Reason uint8

// Reasons, counted in Decoder.Errors and Aggregator.Stats.Errors.
const (
	ReasonNone        Reason = iota // no error
	ReasonShortHeader               // shorter than nlmsghdr + nfgenmsg
	ReasonLength                    // nlmsg_len out of range of the buffer
	ReasonNotPacket                 // another subsystem or message type
	ReasonAttrHeader                // an attribute header is cut off
	ReasonAttrLength                // an attribute's length is < 4 or runs past the message
	ReasonAttrSize                  // a fixed-size value has the wrong size
	ReasonNoPayload                 // no NFULA_PAYLOAD (copy mode is not "packet")
	ReasonBadPayload                // the packet decoder rejected the payload
	NumReasons                      // number of reasons (array size)
)

var reasonNames = [NumReasons]string{"none", "short_header", "length", "not_packet", "attr_header", "attr_length", "attr_size", "no_payload", "bad_payload"}

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
	case ReasonNotPacket:
		return ErrNotPacket
	case ReasonShortHeader, ReasonLength, ReasonAttrHeader:
		return ErrTruncated
	case ReasonNoPayload, ReasonBadPayload:
		return ErrPayload
	default:
		return ErrBadAttr
	}
}

// MaxPrefixLen bounds the log prefix kept per packet; longer prefixes
// (nftables allows 127 bytes) are cut here and counted in
// Decoder.PrefixCut.
const MaxPrefixLen = 64

// Has bits say which optional attributes a message carried.
type Has uint16

// Has bits.
const (
	HasHdr Has = 1 << iota
	HasMark
	HasTimestamp
	HasInDev
	HasOutDev
	HasPhysInDev
	HasPhysOutDev
	HasPrefix
	HasPayload
	HasUID
	HasGID
	HasSeq
)

// Packet is one decoded NFLOG message. Prefix and Payload alias the
// message buffer; Decode overwrites everything, so one Packet can be reused.
type Packet struct {
	Group      uint16 // NFLOG group (nfgenmsg resource id)
	Family     uint8  // protocol family: 2 (IPv4), 10 (IPv6), 7 (bridge), ...
	Hook       uint8  // netfilter hook (NF_INET_PRE_ROUTING 0, LOCAL_IN 1, FORWARD 2, LOCAL_OUT 3, POST_ROUTING 4)
	HWProto    uint16 // hardware protocol (ethertype) of the packet
	Has        Has
	Mark       uint32
	InDev      uint32 // input interface index (0: none)
	OutDev     uint32 // output interface index (0: none)
	PhysInDev  uint32 // bridge port in
	PhysOutDev uint32 // bridge port out
	UID, GID   uint32
	Seq        uint32 // per-group sequence number (with NFULNL_CFG_F_SEQ)
	Time       int64  // NFULA_TIMESTAMP in Unix ns (0: absent)
	Prefix     []byte // log prefix without its NUL, at most MaxPrefixLen bytes
	Payload    []byte // the packet from the network header, cut to the copy range
}

// Decoder decodes NFLOG messages and counts the rejected ones by reason.
// Its zero value is ready; it is not safe for concurrent use.
type Decoder struct {
	Errors    [NumReasons]uint64 // rejected messages per Reason
	PrefixCut uint64             // prefixes cut to MaxPrefixLen
}

// Decode decodes one netlink message (nlmsghdr included) into p. A
// rejected message is counted in d.Errors and p must not be used. A
// message without payload is decoded but returns ErrPayload.
func (d *Decoder) Decode(p *Packet, msg []byte) error {
	r, cut := decode(p, msg)
	if cut {
		d.PrefixCut++
	}
	if r != ReasonNone {
		d.Errors[r]++
	}
	return errFor(r)
}

// NextMessage splits the first netlink message off buf (several messages
// share one datagram when the kernel batches). It returns the message and
// the rest after its padding, or ErrTruncated if buf holds no whole message.
func NextMessage(buf []byte) (msg, rest []byte, err error) {
	msg, rest, ok := nfnetlink.NextMessage(buf)
	if !ok {
		return nil, nil, ErrTruncated
	}
	return msg, rest, nil
}

// IsPacket reports whether msg (at least a netlink header) is an NFLOG
// packet message, as opposed to a control message.
func IsPacket(msg []byte) bool {
	return len(msg) >= nfnetlink.MsgHdrLen && binary.NativeEndian.Uint16(msg[nfnetlink.MsgTypeOff:]) == nfnlSubsysULOG<<8|nfulnlMsgPacket
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

func be32(v []byte) (uint32, Reason) {
	if len(v) != 4 {
		return 0, ReasonAttrSize
	}
	return binary.BigEndian.Uint32(v), ReasonNone
}

// decode is Decode returning the reason and whether the prefix was cut.
func decode(p *Packet, msg []byte) (r Reason, cut bool) {
	*p = Packet{}
	if len(msg) < nfnetlink.HdrLen {
		return ReasonShortHeader, false
	}
	n := int(binary.NativeEndian.Uint32(msg[nfnetlink.MsgLenOff:]))
	if n < nfnetlink.HdrLen || n > len(msg) {
		return ReasonLength, false
	}
	msg = msg[:n]
	if binary.NativeEndian.Uint16(msg[nfnetlink.MsgTypeOff:]) != nfnlSubsysULOG<<8|nfulnlMsgPacket {
		return ReasonNotPacket, false
	}
	p.Family = msg[nfnetlink.MsgHdrLen+nfnetlink.GenFamilyOff]
	p.Group = binary.BigEndian.Uint16(msg[nfnetlink.MsgHdrLen+nfnetlink.GenResIDOff:])
	b := msg[nfnetlink.HdrLen:]
	for len(b) > 0 {
		t, v, rest, e := nfnetlink.Attr(b)
		r := attrReason(e)
		if r != ReasonNone {
			*p = Packet{}
			return r, cut
		}
		b = rest
		switch t {
		case nfulaPacketHdr:
			if len(v) != packetHdrLen {
				r = ReasonAttrSize
				break
			}
			p.HWProto, p.Hook, p.Has = binary.BigEndian.Uint16(v), v[2], p.Has|HasHdr
		case nfulaMark:
			p.Mark, r = be32(v)
			p.Has |= HasMark
		case nfulaTimestamp:
			if len(v) != timestampLen {
				r = ReasonAttrSize
				break
			}
			sec, usec := binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])
			p.Time = int64(sec)*1e9 + int64(usec%1e6)*1e3
			p.Has |= HasTimestamp
		case nfulaIfindexIndev:
			p.InDev, r = be32(v)
			p.Has |= HasInDev
		case nfulaIfindexOutdev:
			p.OutDev, r = be32(v)
			p.Has |= HasOutDev
		case nfulaIfindexPhysin:
			p.PhysInDev, r = be32(v)
			p.Has |= HasPhysInDev
		case nfulaIfindexPhysout:
			p.PhysOutDev, r = be32(v)
			p.Has |= HasPhysOutDev
		case nfulaUID:
			p.UID, r = be32(v)
			p.Has |= HasUID
		case nfulaGID:
			p.GID, r = be32(v)
			p.Has |= HasGID
		case nfulaSeq:
			p.Seq, r = be32(v)
			p.Has |= HasSeq
		case nfulaPayload:
			p.Payload, p.Has = v, p.Has|HasPayload
		case nfulaPrefix:
			for i, c := range v { // the kernel sends strlen+1 bytes; stop at the NUL
				if c == 0 {
					v = v[:i]
					break
				}
			}
			if len(v) > MaxPrefixLen {
				v, cut = v[:MaxPrefixLen], true
			}
			p.Prefix, p.Has = v, p.Has|HasPrefix
		}
		if r != ReasonNone {
			*p = Packet{}
			return r, cut
		}
	}
	if p.Has&HasPayload == 0 {
		return ReasonNoPayload, cut
	}
	return ReasonNone, cut
}
