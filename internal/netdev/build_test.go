package netdev

import "encoding/binary"

// Test helpers that build rtnetlink messages byte by byte, following the
// layouts of linux/netlink.h and linux/rtnetlink.h (independent of the
// decoder under test, apart from the shared wire constants' values, which
// are checked against golang.org/x/sys/unix in the Linux tests).

var hostEndian = binary.NativeEndian

// attr is one rtattr: typ and payload (padding is added by the builder).
type attr struct {
	typ uint16
	val []byte
}

// strAttr is a NUL-terminated string attribute, as the kernel sends them.
func strAttr(typ uint16, s string) attr { return attr{typ, append([]byte(s), 0)} }

// u32Attr is a 4-byte host-order integer attribute.
func u32Attr(typ uint16, v uint32) attr {
	return attr{typ, hostEndian.AppendUint32(nil, v)}
}

// nested packs attributes into one nested attribute (with NLA_F_NESTED,
// 0x8000, set as recent kernels do for IFLA_LINKINFO).
func nested(typ uint16, as ...attr) attr { return attr{typ | 0x8000, attrs(as...)} }

// attrs encodes attributes, each padded to 4 bytes.
func attrs(as ...attr) []byte {
	var b []byte
	for _, a := range as {
		b = hostEndian.AppendUint16(b, uint16(4+len(a.val)))
		b = hostEndian.AppendUint16(b, a.typ)
		b = append(b, a.val...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	return b
}

// ifinfo encodes struct ifinfomsg followed by attributes.
func ifinfo(family uint8, arphrd uint16, index int32, flags uint32, as ...attr) []byte {
	b := []byte{family, 0}
	b = hostEndian.AppendUint16(b, arphrd)
	b = hostEndian.AppendUint32(b, uint32(index))
	b = hostEndian.AppendUint32(b, flags)
	b = hostEndian.AppendUint32(b, 0xffffffff) // ifi_change
	return append(b, attrs(as...)...)
}

// nlmsg encodes one netlink message with body, padded to 4 bytes.
func nlmsg(typ, flags uint16, seq, pid uint32, body []byte) []byte {
	b := hostEndian.AppendUint32(nil, uint32(16+len(body)))
	b = hostEndian.AppendUint16(b, typ)
	b = hostEndian.AppendUint16(b, flags)
	b = hostEndian.AppendUint32(b, seq)
	b = hostEndian.AppendUint32(b, pid)
	b = append(b, body...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// concat joins messages into one datagram.
func concat(msgs ...[]byte) []byte {
	var b []byte
	for _, m := range msgs {
		b = append(b, m...)
	}
	return b
}

// Kernel values used by the tests (linux/if_arp.h, linux/if.h).
const (
	tARPHRDEther    = 1
	tARPHRDLoopback = 772
	tFlagUp         = 0x1
	tFlagLoopback   = 0x8
	tFlagRunning    = 0x40
	tFlagLowerUp    = 0x10000
	tAFBridge       = 7
)

// vethMsg is a typical RTM_NEWLINK for an up and running veth enslaved to
// bridge 7.
func vethMsg(typ uint16, index int32, name string) []byte {
	return nlmsg(typ, 0, 0, 0, ifinfo(0, tARPHRDEther, index, tFlagUp|tFlagRunning|tFlagLowerUp,
		strAttr(iflaIfname, name),
		u32Attr(4, 1500), // IFLA_MTU: skipped
		u32Attr(iflaMaster, 7),
		nested(iflaLinkinfo, strAttr(iflaInfoKind, "veth"), nested(2 /* IFLA_INFO_DATA */)),
	))
}
