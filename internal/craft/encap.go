package craft

import (
	"encoding/binary"
	"net/netip"

	"github.com/weir-dev/weir/internal/packet"
)

// Tunnel describes the outer IP header and tunnel header a Packet travels
// in (RFC 7348 VXLAN, RFC 8926 Geneve, RFC 2784/2890 GRE, RFC 2003/4213
// IP-in-IP). The outer header's family is Src's.
type Tunnel struct {
	Kind     packet.Tunnel
	Src, Dst netip.Addr // outer addresses (the tunnel endpoints)
	SrcPort  uint16     // VXLAN/Geneve UDP source port; 0 means 49152
	DstPort  uint16     // VXLAN/Geneve UDP destination port; 0 means 4789 / 6081
	VNI      uint32     // VXLAN/Geneve network identifier (24 bits); GRE key when GREKey
	Ethernet bool       // GRE and Geneve: carry an Ethernet frame (0x6558) instead of the bare IP packet (VXLAN always does)
	GREKey   bool       // GRE: key field (VNI)
	GRESeq   bool       // GRE: sequence number field
	GRECsum  bool       // GRE: checksum field, computed
	Options  int        // Geneve: bytes of options (a multiple of 4, at most 252)
	ID       uint16     // outer IPv4 identification
}

// PPP protocol numbers and the ethertypes the encapsulations use.
const (
	pppIPv4       = 0x0021
	pppIPv6       = 0x0057
	ethPPPoE      = 0x8864
	ethMPLS       = 0x8847
	ethBridging   = 0x6558
	udpVXLAN      = 4789
	udpGeneve     = 6081
	tunnelSrcPort = 49152
)

// outerIs4 reports whether the outermost IP header is IPv4.
func (p *Packet) outerIs4() bool {
	if p.Tunnel != nil {
		return p.Tunnel.Src.Is4() || p.Tunnel.Src.Is4In6()
	}
	return p.is4()
}

// OuterIPLen is the IP length of the outermost IP header: IPLen for a
// packet that is not in a tunnel, else the tunnel packet's. It is what
// weir counts without --decap.
func (p *Packet) OuterIPLen() int {
	if p.Tunnel == nil {
		return p.IPLen()
	}
	return len(p.wrap(p.AppendIP(nil)))
}

// innerEthernet is the Ethernet header inside a pseudowire or bridging
// tunnel: the inner packet's MACs and its ethertype.
func (p *Packet) innerEthernet(dst []byte) []byte {
	s, d := MAC(p.Src), MAC(p.Dst)
	dst = append(dst, d[:]...)
	dst = append(dst, s[:]...)
	return be16(dst, p.etherType())
}

// wrap puts ip, the inner packet (or one of its fragments), in the
// tunnel: outer IP header, tunnel header, and an Ethernet header where the
// tunnel carries frames.
func (p *Packet) wrap(ip []byte) []byte {
	t := p.Tunnel
	if t == nil {
		return ip
	}
	var hdr []byte // tunnel header after the outer IP header
	var proto uint8
	eth := t.Ethernet || t.Kind == packet.TunnelVXLAN
	inner := ip
	if eth {
		inner = append(p.innerEthernet(nil), ip...)
	}
	payloadType := p.etherType()
	if eth {
		payloadType = ethBridging
	}
	switch t.Kind {
	case packet.TunnelVXLAN, packet.TunnelGeneve:
		proto = 17
		sp, dp := t.SrcPort, t.DstPort
		if sp == 0 {
			sp = tunnelSrcPort
		}
		if dp == 0 {
			dp = udpVXLAN
			if t.Kind == packet.TunnelGeneve {
				dp = udpGeneve
			}
		}
		var th []byte
		if t.Kind == packet.TunnelVXLAN {
			th = append([]byte{0x08, 0, 0, 0}, byte(t.VNI>>16), byte(t.VNI>>8), byte(t.VNI), 0)
		} else {
			opts := min(t.Options, 252) &^ 3
			th = append([]byte{byte(opts / 4), 0}, byte(payloadType>>8), byte(payloadType))
			th = append(th, byte(t.VNI>>16), byte(t.VNI>>8), byte(t.VNI), 0)
			for i := 0; i < opts; i += 4 { // experimental-class options with no data
				th = append(th, 0xff, 0xff, byte(i), 0)
			}
		}
		hdr = be16(hdr, sp)
		hdr = be16(hdr, dp)
		hdr = be16(hdr, uint16(8+len(th)+len(inner)))
		hdr = be16(hdr, 0) // checksum, below
		hdr = append(hdr, th...)
	case packet.TunnelGRE:
		proto = 47
		var flags uint16
		if t.GRECsum {
			flags |= 0x8000
		}
		if t.GREKey {
			flags |= 0x2000
		}
		if t.GRESeq {
			flags |= 0x1000
		}
		hdr = be16(hdr, flags)
		hdr = be16(hdr, payloadType)
		if t.GRECsum {
			hdr = append(hdr, 0, 0, 0, 0)
		}
		if t.GREKey {
			hdr = be32(hdr, t.VNI)
		}
		if t.GRESeq {
			hdr = be32(hdr, 1)
		}
	case packet.TunnelIPIP:
		proto = 4
		if !p.is4() {
			proto = 41
		}
	}
	total := len(hdr) + len(inner)
	var out []byte
	if t.Src.Is4() || t.Src.Is4In6() {
		total += 20
		out = append(out, 0x45, 0)
		out = be16(out, uint16(total))
		out = be16(out, t.ID)
		out = append(out, 0x40, 0, 64, proto, 0, 0) // DF
		s, d := addr4(t.Src), addr4(t.Dst)
		out = append(out, s[:]...)
		out = append(out, d[:]...)
		put16(out[10:], Checksum(out[:20]))
	} else {
		out = append(out, 0x60, 0, 0, 0)
		out = be16(out, uint16(total))
		out = append(out, proto, 64)
		s, d := addr16(t.Src), addr16(t.Dst)
		out = append(out, s[:]...)
		out = append(out, d[:]...)
	}
	hl := len(out)
	out = append(out, hdr...)
	out = append(out, inner...)
	seg := out[hl:]
	switch {
	case proto == 17:
		q := Packet{Src: t.Src, Dst: t.Dst, Proto: 17}
		c := q.pseudoChecksum(out[:hl], seg)
		if c == 0 {
			c = 0xffff
		}
		put16(seg[6:], c)
	case proto == 47 && t.GRECsum:
		put16(seg[4:], Checksum(seg))
	}
	return out
}

// appendEncap appends what goes between the link header and the outermost
// IP header: a PPPoE session header, an MPLS label stack, a pseudowire.
func (p *Packet) appendEncap(dst []byte, ipLen int) []byte {
	if p.Link != packet.LinkEthernet {
		return dst
	}
	if p.PPPoE {
		dst = appendPPPoE(dst, p.outerIs4(), ipLen)
	}
	for i, l := range p.MPLS {
		e := l<<12 | 64
		if i == len(p.MPLS)-1 {
			e |= 1 << 8
		}
		dst = be32(dst, e)
	}
	if len(p.MPLS) > 0 && p.PW {
		if !p.PWNoCW {
			dst = be32(dst, 1) // control word: sequence number 1
		}
		if p.Tunnel != nil {
			q := *p
			q.Src, q.Dst = p.Tunnel.Src, p.Tunnel.Dst
			return q.innerEthernet(dst)
		}
		dst = p.innerEthernet(dst)
	}
	return dst
}

// appendPPPoE appends a PPPoE session header (session 0x2a) and the PPP
// protocol of an IP packet of ipLen bytes.
func appendPPPoE(dst []byte, v4 bool, ipLen int) []byte {
	proto := uint16(pppIPv6)
	if v4 {
		proto = pppIPv4
	}
	dst = append(dst, 0x11, 0)
	dst = be16(dst, 0x2a)
	dst = be16(dst, uint16(2+ipLen))
	return be16(dst, proto)
}

// encapLen is the length appendEncap writes.
func (p *Packet) encapLen() int { return len(p.appendEncap(nil, 0)) }

// linkEtherType is the ethertype (or PPP protocol) of what follows the
// link header.
func (p *Packet) linkEtherType() uint16 {
	switch {
	case p.Link == packet.LinkEthernet && p.PPPoE:
		return ethPPPoE
	case p.Link == packet.LinkEthernet && len(p.MPLS) > 0:
		return ethMPLS
	case p.outerIs4():
		return 0x0800
	}
	return 0x86dd
}

// Address families LINKTYPE_NULL/LOOP headers carry.
const (
	afInet      = 2
	afInet6Mac  = 30 // macOS: what LINKTYPE_NULL captures from laptops carry
	afInet6BSD  = 24 // OpenBSD: LINKTYPE_LOOP
	arphrdEther = 1
)

// appendOtherLink appends the header of the link types beyond Ethernet and
// cooked captures; ipLen is the length of the IP packet that follows.
func (p *Packet) appendOtherLink(dst []byte, ipLen int) []byte {
	v4 := p.outerIs4()
	switch p.Link {
	case packet.LinkNull, packet.LinkLoop:
		fam := uint32(afInet)
		if !v4 {
			fam = p.AF6
			if fam == 0 {
				fam = afInet6Mac
				if p.Link == packet.LinkLoop {
					fam = afInet6BSD
				}
			}
		}
		if p.Link == packet.LinkNull {
			return binary.LittleEndian.AppendUint32(dst, fam) // an x86 host's order
		}
		return be32(dst, fam)
	case packet.LinkPPP, packet.LinkPPPHDLC:
		proto := uint16(pppIPv6)
		if v4 {
			proto = pppIPv4
		}
		return be16(append(dst, 0xff, 0x03), proto)
	case packet.LinkCHDLC:
		return be16(append(dst, 0x0f, 0x00), p.linkEtherType())
	case packet.LinkPPPoE:
		return appendPPPoE(dst, v4, ipLen)
	case packet.LinkNFLOG:
		return p.appendNFLOG(dst, ipLen)
	}
	return dst
}

// appendNFLOG appends an NFLOG header and TLVs (little-endian, as an x86
// host writes them) up to the payload TLV's header: packet header
// (ethertype, hook), prefix "weir", payload.
func (p *Packet) appendNFLOG(dst []byte, ipLen int) []byte {
	fam := byte(2)
	if !p.outerIs4() {
		fam = 10
	}
	le := binary.LittleEndian
	dst = append(dst, fam, 0, 0, 5) // family, version 0, group 5 (big-endian)
	dst = le.AppendUint16(dst, 8)
	dst = le.AppendUint16(dst, 1) // NFULA_PACKET_HDR
	dst = be16(dst, p.linkEtherType())
	dst = append(dst, 1, 0) // hook NF_INET_LOCAL_IN, pad
	dst = le.AppendUint16(dst, 9)
	dst = le.AppendUint16(dst, 10) // NFULA_PREFIX "weir\0", padded
	dst = append(dst, 'w', 'e', 'i', 'r', 0, 0, 0, 0)
	dst = le.AppendUint16(dst, uint16(4+ipLen))
	return le.AppendUint16(dst, 9) // NFULA_PAYLOAD
}

// Shim is a header between an Ethernet header (and its VLAN tags) and what
// it carries.
type Shim uint8

// Shims craft writes.
const (
	ShimNone       Shim = iota
	ShimSNAP            // an 802.3 length, 802.2 LLC (aa aa 03) and SNAP with OUI 00-00-00 (RFC 1042)
	ShimVNTag           // Cisco VN-Tag (0x8926): destination VIF 5, source VIF 9
	ShimPBB             // 802.1ah (0x88e7): I-SID 0x100 and the customer's MACs (craft's)
	ShimFabricPath      // Cisco FabricPath (0x8903): FTag 1, TTL 32, then the original frame (craft's MACs again) and the frame's FCS
	ShimMACsec          // 802.1AE (0x88e5): integrity only (no E or C bit), with an SCI, packet number 1, and an ICV after the packet
)

// MACsecICVLen is the integrity check value after a ShimMACsec packet.
const MACsecICVLen = 16

// appendShim appends the shim and the ethertype et it carries in place of
// the Ethernet header's ethertype; rest is the length of what follows it.
func (p *Packet) appendShim(dst []byte, et uint16, rest int) []byte {
	s, d := MAC(p.Src), MAC(p.Dst)
	switch p.Shim {
	case ShimSNAP:
		dst = be16(dst, uint16(8+rest))
		dst = append(dst, 0xaa, 0xaa, 0x03, 0, 0, 0)
	case ShimVNTag:
		dst = be16(dst, 0x8926)
		dst = append(dst, 0x00, 0x05, 0x00, 0x09)
	case ShimPBB:
		dst = be16(dst, 0x88e7)
		dst = append(dst, 0, 0, 0x01, 0)
		dst = append(dst, d[:]...)
		dst = append(dst, s[:]...)
	case ShimFabricPath:
		dst = be16(dst, 0x8903)
		dst = be16(dst, 1<<6|32)
		dst = append(dst, d[:]...)
		dst = append(dst, s[:]...)
	case ShimMACsec:
		dst = be16(dst, 0x88e5)
		sl := 0 // short length: the secure data's, when under 48 bytes
		if 2+rest < 48 {
			sl = 2 + rest
		}
		dst = append(dst, 0x20, byte(sl))
		dst = be32(dst, 1)
		dst = append(dst, s[:]...)
		dst = be16(dst, 1) // SCI: the sender's MAC and port 1
	}
	return be16(dst, et)
}

// shimLen is what the shim adds to the Ethernet header.
func (p *Packet) shimLen() int {
	if p.Shim == ShimNone {
		return 0
	}
	return len(p.appendShim(nil, 0, 0)) - 2
}
