// Package craft builds real, checksummed frames for tests, benchmarks and
// sample captures, and generates a ground-truth traffic scenario (see
// Scenario) whose expected flow records are computed from what was built,
// never from a decoder.
//
// craft does not depend on weir's decoder: it writes bytes from the specs
// (RFC 791, 8200, 9293, 768, 9260, 792, 4443, IEEE 802.1Q/ad, Linux
// SLL/SLL2, libpcap's LINKTYPE_NULL/LOOP/NFLOG/PPP/C_HDLC, RFC 1662 PPP,
// 2516 PPPoE, 3032 MPLS, 4448 Ethernet pseudowires, 7348 VXLAN, 8926
// Geneve, 2784/2890 GRE, 2003/4213 IP-in-IP), so a decoder tested against
// it is checked by a second opinion (and its frames by tshark's).
//
// craft is a test tool, not a hot path: it allocates freely.
package craft

import (
	"encoding/binary"
	"hash/crc32"
	"net/netip"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
)

// Packet describes one IP packet and the link header around it.
//
// The address family is taken from Src (an IPv4-mapped address counts as
// IPv4); Dst should be of the same family (otherwise it is written as
// zeros). The zero TTL means 64. Keep IPLen under 65536: the IP length
// fields are 16 bits wide.
type Packet struct {
	Link     packet.LinkType // LinkEthernet, LinkSLL, LinkSLL2, LinkRaw, LinkIPv4, LinkIPv6, LinkNull, LinkLoop, LinkNFLOG, LinkPPP, LinkPPPHDLC, LinkPPPoE or LinkCHDLC
	VLANs    []uint16        // 802.1Q VLAN IDs, outermost first (Ethernet only)
	QinQ     bool            // the outermost tag uses TPID 0x88a8 (802.1ad), the others 0x8100
	Outgoing bool            // SLL/SLL2 packet type PACKET_OUTGOING (4) instead of PACKET_HOST (0)
	ARPHRD   uint16          // SLL/SLL2 ARPHRD type; 0 means 1 (Ethernet). The protocol field is the ethertype either way
	AF6      uint32          // LinkNull/LinkLoop: the IPv6 address family; 0 means 30 (macOS) for NULL, 24 (OpenBSD) for LOOP

	// Encapsulations (encap.go). PPPoE and MPLS are for Ethernet only.
	PPPoE  bool     // a PPPoE session header (RFC 2516) after the VLAN tags
	MPLS   []uint32 // an MPLS label stack (RFC 3032), outermost first, after the VLAN tags (and PPPoE)
	PW     bool     // with MPLS: an Ethernet pseudowire (RFC 4448 control word and Ethernet header) after the labels
	PWNoCW bool     // with PW: no control word, the Ethernet header right after the labels
	Tunnel *Tunnel  // the IP packet travels in this tunnel
	Shim   Shim     // Ethernet only: a header after the VLAN tags (LLC/SNAP, VN-Tag, 802.1ah, FabricPath, MACsec)

	Src, Dst netip.Addr
	Proto    uint8 // flow.ProtoTCP, ProtoUDP, ProtoSCTP, ProtoICMP, ProtoICMPv6, or any other number (no transport header)

	SrcPort, DstPort   uint16 // TCP, UDP, SCTP
	TCPFlags           uint8
	Seq, Ack           uint32 // TCP sequence/ack numbers; SCTP: Seq is the DATA chunk's TSN, Ack the verification tag; ICMP echo: identifier<<16 | sequence
	ICMPType, ICMPCode uint8

	Payload int    // payload bytes after the transport header, filled with Pattern
	Body    []byte // if non-nil, the payload itself (Payload is then ignored)

	IPv4Options []byte // raw IPv4 options, zero-padded (EOL) to 4 bytes; at most 40 bytes are used
	IPv6Ext     []Ext  // IPv6 extension headers in order
	ID          uint32 // IPv4 identification (low 16 bits) / IPv6 fragment identification
	TTL         uint8  // IPv4 TTL / IPv6 hop limit; 0 means 64
}

// Ext is one IPv6 extension header. Len is the number of bytes of option
// data it carries; the builder adds the header fields and padding:
//
//   - 0 (hop-by-hop) and 60 (destination options): one experimental option
//     (type 0x1e, RFC 4727) with Len bytes of data (capped at 255), then
//     Pad1/PadN to a multiple of 8 bytes.
//   - 43 (routing): a segment routing header (type 4, RFC 8754) with
//     segments left 0 and max(1, ceil(Len/16)) segments, the first of which
//     is Dst, as on the last hop.
//   - 51 (authentication header, RFC 4302): SPI 0x100, sequence 1 and an
//     ICV of Len bytes (default 12 when Len is 0), padded to 8 bytes.
//   - 44 (fragment): an atomic fragment (offset 0, no M flag) with ID. Do not
//     list it when calling Fragments, which adds its own.
//   - anything else: laid out like destination options with raw pattern
//     data.
type Ext struct {
	Type uint8
	Len  int
}

// IPv6 extension header numbers.
const (
	ExtHopByHop = 0
	ExtRouting  = 43
	ExtFragment = 44
	ExtAH       = 51
	ExtDestOpts = 60
)

// Link header sizes written by Append.
const (
	EthernetHeaderLen = 14 // plus 4 per VLAN tag
	SLLHeaderLen      = 16
	SLL2HeaderLen     = 20
	MinEthernetFrame  = 60 // frames are zero-padded to this length (no FCS)
	SLL2IfIndex       = 2  // interface index written in SLL2 headers
)

// Transport header sizes. SCTP counts its 12-byte common header plus the
// 16-byte DATA chunk header.
const (
	TCPHeaderLen  = 20
	UDPHeaderLen  = 8
	SCTPHeaderLen = 28
	ICMPHeaderLen = 8
)

// Pattern returns byte i of the deterministic payload pattern.
func Pattern(i int) byte { return byte('A' + i%26) }

// is4 reports whether the packet is IPv4.
func (p *Packet) is4() bool { return p.Src.Is4() || p.Src.Is4In6() }

func (p *Packet) ttl() uint8 {
	if p.TTL == 0 {
		return 64
	}
	return p.TTL
}

// payloadLen is the number of payload bytes after the transport header.
func (p *Packet) payloadLen() int {
	if p.Body != nil {
		return len(p.Body)
	}
	if p.Payload < 0 {
		return 0
	}
	return p.Payload
}

// transportHeaderLen is the transport header length for Proto.
func (p *Packet) transportHeaderLen() int {
	switch p.Proto {
	case flow.ProtoTCP:
		return TCPHeaderLen
	case flow.ProtoUDP:
		return UDPHeaderLen
	case flow.ProtoSCTP:
		return SCTPHeaderLen
	case flow.ProtoICMP, flow.ProtoICMPv6:
		return ICMPHeaderLen
	}
	return 0
}

// transportLen is the transport header, payload and any SCTP chunk padding.
func (p *Packet) transportLen() int {
	n := p.transportHeaderLen() + p.payloadLen()
	if p.Proto == flow.ProtoSCTP {
		n = pad(n, 4)
	}
	return n
}

// ipHeaderLen is the IPv4 header with options, or the IPv6 header with all
// extension headers.
func (p *Packet) ipHeaderLen() int {
	if p.is4() {
		return 20 + len(p.v4Options())
	}
	n := 40
	for _, e := range p.IPv6Ext {
		n += extLen(e)
	}
	return n
}

// IPLen returns the IP total length this packet has: IP header (with options
// or extension headers), transport header and payload. It is what weir must
// count as the packet's bytes.
func (p *Packet) IPLen() int { return p.ipHeaderLen() + p.transportLen() }

// Append appends the full frame to dst: link header, encapsulations, the
// IP packet (in its tunnel, if any) and, for Ethernet, zero padding up to
// 60 bytes (the IP length does not change).
func (p *Packet) Append(dst []byte) []byte {
	return p.appendFrame(dst, p.AppendIP(nil))
}

// LinkHeaderLen returns the length of what Append writes before the
// outermost IP header: the link header, and PPPoE, MPLS and pseudowire
// headers.
func (p *Packet) LinkHeaderLen() int {
	n := p.encapLen()
	switch p.Link {
	case packet.LinkEthernet:
		return n + EthernetHeaderLen + 4*len(p.VLANs) + p.shimLen()
	case packet.LinkSLL:
		return n + SLLHeaderLen
	case packet.LinkSLL2:
		return n + SLL2HeaderLen
	case packet.LinkRaw, packet.LinkIPv4, packet.LinkIPv6:
		return n
	}
	return n + len(p.appendOtherLink(nil, 0))
}

// appendFrame appends the link header, the encapsulations, ip (an IP
// packet or fragment, wrapped in the tunnel) and Ethernet padding.
func (p *Packet) appendFrame(dst, ip []byte) []byte {
	start := len(dst)
	ip = p.wrap(ip)
	dst = p.appendLink(dst, len(ip))
	dst = p.appendEncap(dst, len(ip))
	dst = append(dst, ip...)
	switch {
	case p.Link != packet.LinkEthernet:
	case p.Shim == ShimMACsec:
		dst = append(dst, make([]byte, MACsecICVLen)...) // the integrity check value, not computed
	case p.Shim == ShimFabricPath:
		dst = binary.LittleEndian.AppendUint32(dst, crc32.ChecksumIEEE(dst[start:])) // FabricPath frames keep their FCS (Wireshark expects it)
	}
	if p.Link == packet.LinkEthernet {
		for len(dst)-start < MinEthernetFrame {
			dst = append(dst, 0)
		}
	}
	return dst
}

// etherType is the ethertype of the (inner) IP packet.
func (p *Packet) etherType() uint16 {
	if p.is4() {
		return 0x0800
	}
	return 0x86dd
}

// MAC returns the locally administered MAC address craft uses for a: 02:00
// followed by the address's last four bytes.
func MAC(a netip.Addr) [6]byte {
	b := addr16(a)
	return [6]byte{0x02, 0x00, b[12], b[13], b[14], b[15]}
}

// appendLink appends the link-layer header for p.Link; ipLen is the
// length of the (outermost) IP packet that follows.
func (p *Packet) appendLink(dst []byte, ipLen int) []byte {
	et := p.linkEtherType()
	hatype := p.ARPHRD
	if hatype == 0 {
		hatype = arphrdEther
	}
	src, dmac := MAC(p.Src), MAC(p.Dst)
	ptype := uint16(0) // PACKET_HOST
	if p.Outgoing {
		ptype = 4 // PACKET_OUTGOING
	}
	switch p.Link {
	case packet.LinkEthernet:
		dst = append(dst, dmac[:]...)
		dst = append(dst, src[:]...)
		for i, v := range p.VLANs {
			tpid := uint16(0x8100)
			if i == 0 && p.QinQ {
				tpid = 0x88a8
			}
			dst = be16(dst, tpid)
			dst = be16(dst, v&0x0fff)
		}
		if p.Shim != ShimNone {
			return p.appendShim(dst, et, p.encapLen()+ipLen)
		}
		dst = be16(dst, et)
	case packet.LinkSLL:
		dst = be16(dst, ptype)
		dst = be16(dst, hatype)
		dst = be16(dst, 6) // address length
		dst = append(dst, src[:]...)
		dst = append(dst, 0, 0) // address field is 8 bytes
		dst = be16(dst, et)
	case packet.LinkSLL2:
		dst = be16(dst, et)
		dst = be16(dst, 0) // reserved
		dst = be32(dst, SLL2IfIndex)
		dst = be16(dst, hatype)
		dst = append(dst, byte(ptype), 6)
		dst = append(dst, src[:]...)
		dst = append(dst, 0, 0)
	default:
		dst = p.appendOtherLink(dst, ipLen)
	}
	return dst
}

// addr4 returns a as 4 bytes, or zeros if it is not IPv4.
func addr4(a netip.Addr) [4]byte {
	if a.Is4() || a.Is4In6() {
		return a.Unmap().As4()
	}
	return [4]byte{}
}

// addr16 returns a as 16 bytes, or zeros if it is not valid.
func addr16(a netip.Addr) [16]byte {
	if !a.IsValid() {
		return [16]byte{}
	}
	return a.As16()
}

func be16(b []byte, v uint16) []byte { return append(b, byte(v>>8), byte(v)) }
func be32(b []byte, v uint32) []byte {
	return append(b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}
func put16(b []byte, v uint16) { b[0], b[1] = byte(v>>8), byte(v) }

// pad rounds n up to a multiple of m.
func pad(n, m int) int { return (n + m - 1) / m * m }
