package nfnetlink

import "encoding/binary"

// Netlink message layout (linux/netlink.h), host byte order.
const (
	msgLenOff = 0  // u32 length of the message, header included
	MsgHdrLen = 16 // struct nlmsghdr
	align4    = 4  // NLMSG_ALIGNTO and NLA_ALIGNTO
)

// Align rounds n up to netlink's 4-byte alignment.
func Align(n int) int { return (n + align4 - 1) &^ (align4 - 1) }

// NextMessage splits the first netlink message off buf (a datagram may
// hold several). ok is false when buf is cut inside a message.
func NextMessage(buf []byte) (msg, rest []byte, ok bool) {
	if len(buf) < MsgHdrLen {
		return nil, nil, false
	}
	n := int(binary.NativeEndian.Uint32(buf[msgLenOff:]))
	if n < MsgHdrLen || n > len(buf) {
		return nil, nil, false
	}
	return buf[:n], buf[min(Align(n), len(buf)):], true
}
