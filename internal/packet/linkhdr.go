package packet

import (
	"encoding/binary"
	"math/bits"

	"github.com/weir-dev/weir/internal/flow"
)

// Linux cooked captures (SLL, SLL2): ARPHRD types and the protocol values
// below 0x0600 that are Linux's own (libpcap's sll.h).
const (
	arphrdNetlink = 824    // nlmon: the protocol field is a netlink family
	sllPPPHDLC    = 0x0007 // LINUX_SLL_P_PPPHDLC: a PPP frame in HDLC framing follows
)

// BSD loopback (LINKTYPE_NULL, LINKTYPE_LOOP): address families.
const (
	nullHeaderLen = 4
	afInet        = 2
	afInet6BSD    = 24 // NetBSD, OpenBSD, BSD/OS (and what Npcap writes)
	afInet6FBSD   = 28 // FreeBSD, DragonFly BSD
	afInet6Darwin = 30 // macOS, iOS
	maxLLCLength  = 1500
)

// PPP (RFC 1661, 1662) and Cisco HDLC.
const (
	pppAddress   = 0xff
	pppControl   = 0x03
	pppIPv4      = 0x0021
	pppIPv6      = 0x0057
	pppMPLS      = 0x0281
	pppMPLSMC    = 0x0283
	chdlcUnicast = 0x0f
	chdlcBcast   = 0x8f
	chdlcHdrLen  = 4 // address, control, ethertype
)

// NFLOG (LINKTYPE_NFLOG, libpcap's pcap/nflog.h): a 4-byte header (family,
// version, resource ID) and TLVs whose length and type are in the byte
// order of the host that captured, each padded to 4 bytes.
const (
	nflogHdrLen    = 4
	nflogTLVHdrLen = 4
	nflogPacketHdr = 1 // NFULA_PACKET_HDR: hw_protocol (an ethertype), hook
	nflogPayload   = 9 // NFULA_PAYLOAD: the packet from its network header on
	nflogTypeMask  = 0x3fff
	afInet6Linux   = 10
)

// cooked decodes the Linux cooked captures (SLL or SLL2) whose protocol
// field is not an ethertype: a netlink capture, or Linux's PPP-in-HDLC.
// For every other ARPHRD type that carries IP (Ethernet, PPP, IP tunnels,
// tun devices; GRE devices' own protocol types are ethertypes too, 0x6558
// being a bridged Ethernet frame) Decode reads it as an ethertype.
func (d *Decoder) cooked(data []byte, proto, hatype uint16, off, wireLen int, p *flow.Packet) bool {
	if hatype == arphrdNetlink {
		return d.nonIPLink()
	}
	return d.ppp(data, off, wireLen, p) // proto is sllPPPHDLC
}

// otherLink decodes the link types off the hot path.
func (d *Decoder) otherLink(link LinkType, data []byte, wireLen int, p *flow.Packet) bool {
	switch link {
	case LinkNull, LinkLoop:
		return d.loopback(data, wireLen, p)
	case LinkNFLOG:
		return d.nflog(data, wireLen, p)
	case LinkPPP:
		return d.ppp(data, 0, wireLen, p)
	case LinkPPPHDLC:
		if len(data) > 0 && (data[0] == chdlcUnicast || data[0] == chdlcBcast) {
			return d.chdlc(data, wireLen, p) // Cisco HDLC, which LINKTYPE_PPP_HDLC also covers
		}
		return d.ppp(data, 0, wireLen, p)
	case LinkCHDLC:
		return d.chdlc(data, wireLen, p)
	case LinkPPPoE:
		return d.pppoe(data, 0, wireLen, p, 0)
	}
	return d.fail(ReasonUnknownLinkType)
}

// loopback decodes BSD loopback: a 4-byte address family, taken in either
// byte order (families are small: a value with high bits set is swapped).
// As in Wireshark, a frame starting ff 03 is PPP (BSD/OS put PPP there)
// and a "family" above 1500 is an ethertype.
func (d *Decoder) loopback(data []byte, wireLen int, p *flow.Packet) bool {
	if len(data) >= 2 && data[0] == pppAddress && data[1] == pppControl {
		return d.ppp(data, 0, wireLen, p)
	}
	if len(data) < nullHeaderLen {
		return d.fail(ReasonTruncatedLink)
	}
	fam := binary.LittleEndian.Uint32(data)
	if fam > 0xffff {
		fam = bits.ReverseBytes32(fam)
	}
	switch {
	case fam == afInet:
		return d.ipv4(data, nullHeaderLen, wireLen, p)
	case fam == afInet6BSD || fam == afInet6FBSD || fam == afInet6Darwin:
		return d.ipv6(data, nullHeaderLen, wireLen, p)
	case fam > maxLLCLength && fam <= 0xffff:
		return d.ether(data, uint16(fam), nullHeaderLen, wireLen, p, 0)
	}
	return d.nonIPLink()
}

// chdlc decodes Cisco HDLC: address, control, then an ethertype.
func (d *Decoder) chdlc(data []byte, wireLen int, p *flow.Packet) bool {
	if len(data) < chdlcHdrLen {
		return d.fail(ReasonTruncatedLink)
	}
	return d.ether(data, binary.BigEndian.Uint16(data[2:]), chdlcHdrLen, wireLen, p, 0)
}

// pppProtocol reads a PPP protocol field at b: two bytes, or one when
// protocol field compression left out a zero high byte (the field's last
// byte is odd, its first even). n is 0 if b is too short.
func pppProtocol(b []byte) (proto uint16, n int) {
	switch {
	case len(b) >= 1 && b[0]&1 == 1:
		return uint16(b[0]), 1
	case len(b) >= 2:
		return binary.BigEndian.Uint16(b), 2
	}
	return 0, 0
}

// ppp decodes a PPP frame at data[off:]: the HDLC address and control
// bytes (ff 03) if present, the protocol field, then IPv4, IPv6 or MPLS.
func (d *Decoder) ppp(data []byte, off, wireLen int, p *flow.Packet) bool {
	if len(data) > off && data[off] == pppAddress { // HDLC address and control
		if len(data) < off+2 {
			return d.fail(ReasonTruncatedLink)
		}
		if data[off+1] == pppControl {
			off += 2
		}
	}
	proto, n := pppProtocol(data[off:])
	if n == 0 {
		return d.fail(ReasonTruncatedLink)
	}
	return d.pppPayload(proto, data, off+n, wireLen, p, 0, ethTypePPP)
}

// pppPayload decodes what a PPP protocol field announces; a non-IP
// protocol (LCP, IPCP, …) is counted under the ethertype bucket.
func (d *Decoder) pppPayload(proto uint16, data []byte, off, wireLen int, p *flow.Packet, depth int, bucket uint16) bool {
	switch proto {
	case pppIPv4:
		return d.ipv4(data, off, wireLen, p)
	case pppIPv6:
		return d.ipv6(data, off, wireLen, p)
	case pppMPLS, pppMPLSMC:
		return d.mpls(data, bucket, off, wireLen, p, depth)
	}
	return d.nonIP(bucket)
}

// nflog decodes an NFLOG record: the packet is the payload TLV's value. Its
// IPv4 or IPv6 header is told by the record's family; other families
// (bridge) use the ethertype of the packet-header TLV when there is one.
func (d *Decoder) nflog(data []byte, wireLen int, p *flow.Packet) bool {
	if len(data) < nflogHdrLen {
		return d.fail(ReasonTruncatedLink)
	}
	if data[1] != 0 {
		return d.fail(ReasonBadNFLOG)
	}
	fam := data[0]
	end := len(data) // where the record ends on the wire
	if wireLen > 0 {
		end = wireLen
	}
	// TLVs are in the capturing host's byte order. Their types are below
	// 256, so the first TLV's type bytes say which order that was.
	le := true
	if len(data) >= nflogHdrLen+nflogTLVHdrLen && data[6] == 0 && data[7] != 0 {
		le = false
	}
	u16 := func(b []byte) int {
		if le {
			return int(binary.LittleEndian.Uint16(b))
		}
		return int(binary.BigEndian.Uint16(b))
	}
	var et uint16
	for off := nflogHdrLen; off < end; {
		if off+nflogTLVHdrLen > len(data) {
			return d.fail(ReasonTruncatedLink) // the snap length cut the TLVs before the packet
		}
		l, typ := u16(data[off:]), u16(data[off+2:])&nflogTypeMask
		// With the wire length unknown, a payload longer than the capture
		// is taken as cut by the snap length.
		if l < nflogTLVHdrLen || (off+l > end && (wireLen > 0 || typ != nflogPayload)) {
			return d.fail(ReasonBadNFLOG)
		}
		v := off + nflogTLVHdrLen
		switch {
		case typ == nflogPayload:
			// The packet ends with its TLV: bytes past it are not its own.
			pkt := data[:min(len(data), off+l)]
			switch fam {
			case afInet:
				return d.ipv4(pkt, v, off+l, p)
			case afInet6Linux:
				return d.ipv6(pkt, v, off+l, p)
			}
			if et != 0 {
				return d.ether(pkt, et, v, off+l, p, 0)
			}
			return d.nonIPLink()
		case typ == nflogPacketHdr && l >= nflogTLVHdrLen+2 && v+2 <= len(data):
			et = binary.BigEndian.Uint16(data[v:])
		}
		off += (l + 3) &^ 3
	}
	return d.fail(ReasonNFLOGNoPayload)
}
