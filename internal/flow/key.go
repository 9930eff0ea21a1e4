// Package flow owns weir's one flow type end to end: the Key that identifies a
// conversation, the Packet that one observation adds to it, the Record that
// leaves the table, and the Table that aggregates packets into records.
//
// flow depends on nothing else in weir: sources, the decoder and sinks all
// speak in these types.
package flow

import (
	"encoding/binary"
	"net/netip"
)

// Key identifies a flow by its 5-tuple plus ICMP type and code.
//
// IPv4 and IPv6 share one layout: IPv4 addresses are stored IPv4-mapped
// (::ffff:a.b.c.d) and IPVersion says which family the packet carried. The
// struct is exactly 40 bytes with no padding, so it hashes and compares as
// five 64-bit words.
//
// In a Packet the Key is in wire orientation (Src is the sender). In a Record
// it is in initiator orientation (Src is the endpoint that opened the flow).
type Key struct {
	SrcAddr   [16]byte
	DstAddr   [16]byte
	SrcPort   uint16 // TCP, UDP and SCTP only; 0 otherwise
	DstPort   uint16
	Proto     uint8 // IANA protocol number of the transport header
	ICMPType  uint8 // ICMP and ICMPv6 only; 0 otherwise
	ICMPCode  uint8
	IPVersion uint8 // 4 or 6
}

// Protocol numbers used across weir.
const (
	ProtoICMP   = 1
	ProtoTCP    = 6
	ProtoUDP    = 17
	ProtoICMPv6 = 58
	ProtoSCTP   = 132
)

// v4Prefix is the IPv4-mapped IPv6 prefix ::ffff:0:0/96.
var v4Prefix = [12]byte{10: 0xff, 11: 0xff}

// SetAddr4 stores an IPv4 address (4 bytes, network order) IPv4-mapped into dst.
func SetAddr4(dst *[16]byte, b []byte) {
	_ = b[3] // bounds-check hint
	copy(dst[:12], v4Prefix[:])
	copy(dst[12:], b[:4])
}

// Src returns the source address as a netip.Addr (unmapped for IPv4).
func (k *Key) Src() netip.Addr { return addr(k.SrcAddr, k.IPVersion) }

// Dst returns the destination address as a netip.Addr (unmapped for IPv4).
func (k *Key) Dst() netip.Addr { return addr(k.DstAddr, k.IPVersion) }

func addr(a [16]byte, v uint8) netip.Addr {
	ip := netip.AddrFrom16(a)
	if v == 4 {
		return ip.Unmap()
	}
	return ip
}

// SetSrc sets the source address and IPVersion from a netip.Addr.
func (k *Key) SetSrc(a netip.Addr) { k.SrcAddr, k.IPVersion = a.As16(), version(a) }

// SetDst sets the destination address and IPVersion from a netip.Addr.
func (k *Key) SetDst(a netip.Addr) { k.DstAddr, k.IPVersion = a.As16(), version(a) }

func version(a netip.Addr) uint8 {
	if a.Is4() || a.Is4In6() {
		return 4
	}
	return 6
}

// Reverse returns the key with source and destination swapped.
func (k Key) Reverse() Key {
	k.SrcAddr, k.DstAddr = k.DstAddr, k.SrcAddr
	k.SrcPort, k.DstPort = k.DstPort, k.SrcPort
	return k
}

// srcLess reports whether the (SrcAddr, SrcPort) endpoint orders before
// (DstAddr, DstPort). Comparing big-endian words keeps it branch-light.
func (k *Key) srcLess() bool {
	a0, b0 := binary.BigEndian.Uint64(k.SrcAddr[:8]), binary.BigEndian.Uint64(k.DstAddr[:8])
	if a0 != b0 {
		return a0 < b0
	}
	a1, b1 := binary.BigEndian.Uint64(k.SrcAddr[8:]), binary.BigEndian.Uint64(k.DstAddr[8:])
	if a1 != b1 {
		return a1 < b1
	}
	return k.SrcPort <= k.DstPort
}
