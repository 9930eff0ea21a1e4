package nfnetlink

import "encoding/binary"

// The wire layout shared by every nfnetlink subsystem, from the kernel's
// uapi headers linux/netlink.h and linux/netfilter/nfnetlink.h. The netlink
// and attribute headers are in host byte order; values inside attributes
// are big-endian (network order).

// Netlink message header (struct nlmsghdr): 16 bytes.
const (
	MsgLenOff   = 0  // u32 length of the message, header included
	MsgTypeOff  = 4  // u16 type: subsystem<<8 | message
	MsgFlagsOff = 6  // u16 NLM_F_* flags
	MsgSeqOff   = 8  // u32 sequence number
	MsgPidOff   = 12 // u32 port id of the sender
	MsgHdrLen   = 16 // struct nlmsghdr
	align4      = 4  // NLMSG_ALIGNTO and NLA_ALIGNTO
)

// Netlink control message types (linux/netlink.h).
const (
	MsgNoop    = 0x1
	MsgError   = 0x2
	MsgDone    = 0x3
	MsgOverrun = 0x4

	ErrorLen = 4 // struct nlmsgerr starts with an s32 negative errno
)

// Netlink message flags (NLM_F_*).
const (
	FlagRequest = 0x1
	FlagMulti   = 0x2
	FlagAck     = 0x4
	FlagDump    = 0x300 // NLM_F_ROOT | NLM_F_MATCH
	FlagExcl    = 0x200 // on a new-message: the entry did not exist before (event)
	FlagCreate  = 0x400 // on a new-message: the entry was created (event)
)

// nfgenmsg follows the netlink header of every nfnetlink message: 4 bytes.
const (
	GenFamilyOff  = 0 // u8 address family (NFPROTO_*)
	GenVersionOff = 1 // u8 NFNETLINK_V0
	GenResIDOff   = 2 // be16 resource id (conntrack: 0; NFLOG: the group)
	GenLen        = 4
	HdrLen        = MsgHdrLen + GenLen // nlmsghdr + nfgenmsg: where attributes start

	version0 = 0 // NFNETLINK_V0
)

// Address families carried in nfgenmsg (NFPROTO_*).
const (
	FamilyUnspec = 0
	FamilyInet   = 2
	FamilyBridge = 7
	FamilyInet6  = 10
)

// Attribute header (struct nlattr): u16 length (header included), u16 type.
// The two high bits of the type are flags, not part of the type.
const (
	AttrLenOff      = 0
	AttrTypeOff     = 2
	AttrHdrLen      = 4
	AttrFNested     = 0x8000
	AttrFNetByteord = 0x4000
	AttrTypeMask    = 0x3fff
)

// Align rounds n up to netlink's 4-byte alignment.
func Align(n int) int { return (n + align4 - 1) &^ (align4 - 1) }

// NextMessage splits the first netlink message off buf (a datagram may
// hold several). ok is false when buf is cut inside a message.
func NextMessage(buf []byte) (msg, rest []byte, ok bool) {
	if len(buf) < MsgHdrLen {
		return nil, nil, false
	}
	n := int(binary.NativeEndian.Uint32(buf[MsgLenOff:]))
	if n < MsgHdrLen || n > len(buf) {
		return nil, nil, false
	}
	return buf[:n], buf[min(Align(n), len(buf)):], true
}

// AttrErr says why an attribute could not be split off.
type AttrErr uint8

// Attribute errors.
const (
	AttrOK     AttrErr = iota
	AttrCut            // fewer bytes left than an attribute header
	AttrLength         // the length is below the header's or runs past the parent
)

// Attr splits the first attribute off b: its type (flag bits masked off),
// its value, and the rest after its padding. It inlines into a decoder's
// walk (small on purpose: a call per attribute cost ~20% of a decode).
func Attr(b []byte) (typ uint16, val, rest []byte, e AttrErr) {
	if len(b) < AttrHdrLen {
		return 0, nil, nil, AttrCut
	}
	n := int(binary.NativeEndian.Uint16(b[AttrLenOff:]))
	if n < AttrHdrLen || n > len(b) {
		return 0, nil, nil, AttrLength
	}
	return binary.NativeEndian.Uint16(b[AttrTypeOff:]) & AttrTypeMask, b[AttrHdrLen:n], b[min(Align(n), len(b)):], AttrOK
}

// PutHeader writes a request's nlmsghdr and nfgenmsg into b[:HdrLen]: the
// message length is len(b), the type subsys<<8|msg, port id 0 (the kernel).
func PutHeader(b []byte, subsys, msg uint8, flags uint16, seq uint32, family uint8, resID uint16) {
	binary.NativeEndian.PutUint32(b[MsgLenOff:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[MsgTypeOff:], uint16(subsys)<<8|uint16(msg))
	binary.NativeEndian.PutUint16(b[MsgFlagsOff:], flags)
	binary.NativeEndian.PutUint32(b[MsgSeqOff:], seq)
	binary.NativeEndian.PutUint32(b[MsgPidOff:], 0)
	b[MsgHdrLen+GenFamilyOff] = family
	b[MsgHdrLen+GenVersionOff] = version0
	binary.BigEndian.PutUint16(b[MsgHdrLen+GenResIDOff:], resID)
}

// AppendAttr appends one attribute with its padding.
func AppendAttr(b []byte, typ uint16, val ...byte) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(AttrHdrLen+len(val)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, val...)
	for len(b)%align4 != 0 {
		b = append(b, 0)
	}
	return b
}

// Errno reads the error code of an NLMSG_ERROR message (0: an ack);
// ok is false when msg is too short to hold one.
func Errno(msg []byte) (errno int32, ok bool) {
	if len(msg) < MsgHdrLen+ErrorLen {
		return 0, false
	}
	return -int32(binary.NativeEndian.Uint32(msg[MsgHdrLen:])), true
}
