package packet

import (
	"encoding/binary"
	"errors"
	"strings"

	"github.com/weir-dev/weir/internal/flow"
)

// Tunnel is a kind of tunnel whose packets Config.Decap can key by the
// packet inside.
type Tunnel uint8

// Tunnel kinds.
const (
	TunnelVXLAN  Tunnel = iota // UDP to port 4789, or 8472 (Linux's default): an Ethernet frame inside (RFC 7348)
	TunnelGeneve               // UDP to port 6081: Ethernet, IPv4 or IPv6 inside (RFC 8926)
	TunnelGRE                  // IP protocol 47, version 0: IPv4, IPv6, MPLS or (0x6558) Ethernet inside (RFC 2784, 2890)
	TunnelIPIP                 // IP protocol 4 (IPv4 inside) or 41 (IPv6 inside), in IPv4 or IPv6
	numTunnels
)

// NumTunnels is the number of Tunnel kinds, for per-kind counter arrays.
const NumTunnels = int(numTunnels)

var tunnelNames = [numTunnels]string{"vxlan", "geneve", "gre", "ipip"}

// String returns the tunnel's name as --decap takes it.
func (t Tunnel) String() string {
	if t < numTunnels {
		return tunnelNames[t]
	}
	return "tunnel_" + itoa(int(t))
}

// Decap is a set of Tunnel kinds: bit 1<<Tunnel set = look inside.
type Decap uint8

// DecapAll looks inside every kind of tunnel.
const DecapAll = Decap(1<<numTunnels - 1)

// Has reports whether t is in the set.
func (d Decap) Has(t Tunnel) bool { return t < numTunnels && d&(1<<t) != 0 }

// String lists the set's tunnels, comma-separated ("" for none).
func (d Decap) String() string {
	var names []string
	for t := Tunnel(0); t < numTunnels; t++ {
		if d.Has(t) {
			names = append(names, t.String())
		}
	}
	return strings.Join(names, ",")
}

// ParseDecap parses a comma-separated list of tunnel names (vxlan, geneve,
// gre, ipip; "all" for every one; "" or "none" for none).
func ParseDecap(s string) (Decap, error) {
	var d Decap
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		switch name {
		case "", "none":
			continue
		case "all":
			d = DecapAll
			continue
		}
		found := false
		for t := Tunnel(0); t < numTunnels; t++ {
			if name == t.String() {
				d |= 1 << t
				found = true
			}
		}
		if !found {
			return 0, errors.New("unknown tunnel " + quote(name) + ": use vxlan, geneve, gre, ipip or all")
		}
	}
	return d, nil
}

// quote quotes s for an error message, escaping anything unprintable.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '"' || r == '\\' || r > 0x7e {
			b.WriteString("\\x")
			const hex = "0123456789abcdef"
			for _, c := range []byte(string(r)) {
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xf])
			}
			continue
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

// Outer is the outer IP header of a packet keyed by the packet inside its
// tunnel.
type Outer struct {
	SrcAddr, DstAddr [16]byte // as in flow.Key: IPv4 addresses IPv4-mapped
	IPVersion        uint8    // 4 or 6
	Tunnel           Tunnel
}

// Outer returns the outer header of the packet the last Decode keyed by
// the packet inside its tunnel, or nil if it did not (no Config.Decap, not
// a tunnel, or the inner packet could not be read). The pointer is the
// Decoder's: valid until the next Decode.
func (d *Decoder) Outer() *Outer {
	if d.outer.IPVersion == 0 {
		return nil
	}
	return &d.outer
}

// Tunnel headers.
const (
	protoIPIP         = 4
	protoIPv6         = 41
	protoGRE          = 47
	portVXLAN         = 4789
	portVXLANLinux    = 8472
	portGeneve        = 6081
	udpHeaderLen      = 8
	vxlanHdrLen       = 8
	vxlanFlagI        = 0x08 // the VNI is valid: set in every VXLAN data packet
	geneveFixedLen    = 8
	greFixedLen       = 4
	greFlagChecksum   = 0x8000
	greFlagRouting    = 0x4000
	greFlagKey        = 0x2000
	greFlagSeq        = 0x1000
	greVersionMask    = 0x0007
	greOptionalFields = 4 // each of checksum(+reserved), key and sequence
)

// tunnelKind says which enabled tunnel a packet with this protocol and
// destination port is.
func (d *Decoder) tunnelKind(proto uint8, dport uint16) (Tunnel, bool) {
	var t Tunnel
	switch proto {
	case protoUDP:
		switch dport {
		case portVXLAN, portVXLANLinux:
			t = TunnelVXLAN
		case portGeneve:
			t = TunnelGeneve
		default:
			return 0, false
		}
	case protoGRE:
		t = TunnelGRE
	case protoIPIP, protoIPv6:
		t = TunnelIPIP
	default:
		return 0, false
	}
	return t, d.decap&(1<<t) != 0
}

// ipv4Tunnel ends ipv4 when Config.Decap is set: the transport header,
// then the packet inside an enabled tunnel, else the outer header as ipv4
// keys it. b is the IPv4 packet, hl its header length.
func (d *Decoder) ipv4Tunnel(p *flow.Packet, proto uint8, b []byte, hl, ipLen int, frag uint16) bool {
	if !d.transport(p, proto, b, hl, ipLen) {
		return false
	}
	if frag&ipv4MoreFrags != 0 {
		d.fragmentedTunnel(p, proto)
		d.firstFragment(p, proto, uint32(binary.BigEndian.Uint16(b[ipv4IDOff:])))
	} else if d.tunnel(p, proto, b, hl, ipLen) {
		return true // the inner packet was decoded and counted
	}
	d.stats.IPv4++
	d.stats.Decoded++
	return true
}

// ipv6Tunnel ends ipv6 when Config.Decap is set, as ipv4Tunnel does; t is
// where the headers after the extension headers start, first whether the
// packet is a first fragment (fragNH and fragID its Fragment header's).
func (d *Decoder) ipv6Tunnel(p *flow.Packet, nh uint8, b []byte, t, ipLen int, first bool, fragNH uint8, fragID uint32) bool {
	if nh != protoESP && nh != protoNoNext && !d.transport(p, nh, b, t, ipLen) {
		return false
	}
	if first {
		d.fragmentedTunnel(p, nh)
		d.firstFragment(p, fragNH, fragID)
	} else if d.tunnel(p, nh, b, t, ipLen) {
		return true // the inner packet was decoded and counted
	}
	d.stats.IPv6++
	d.stats.Decoded++
	return true
}

// fragmentedTunnel counts the first fragment of a tunnel packet: it is
// keyed by its outer header, as its later fragments will be.
func (d *Decoder) fragmentedTunnel(p *flow.Packet, proto uint8) {
	if t, ok := d.tunnelKind(proto, p.Key.DstPort); ok {
		d.stats.Decap.Outer[t]++
	}
}

// tunnel keys p by the packet inside, if p (already keyed by its outer
// header b, ipLen bytes long, whose transport header starts at b[t:]) is
// an enabled tunnel. It returns false, p unchanged, if p is not one, or if
// what is inside is not IP or cannot be read: the outer header keys the
// packet then, and Stats.Decap.Outer counts it.
func (d *Decoder) tunnel(p *flow.Packet, proto uint8, b []byte, t, ipLen int) bool {
	kind, ok := d.tunnelKind(proto, p.Key.DstPort)
	if !ok {
		return false
	}
	// Offsets below are from the outer header: its length is the inner
	// packet's "wire" end, and Ethernet padding after it is not the inner
	// packet's.
	pkt := b[:min(len(b), ipLen)]
	saved := *p
	p.Key, p.TCPFlags, p.Role = flow.Key{}, 0, flow.RoleUnknown // setAddr4 needs a zeroed key
	d.inner = true
	switch kind {
	case TunnelIPIP:
		if proto == protoIPIP {
			ok = d.ipv4(pkt, t, ipLen, p)
		} else {
			ok = d.ipv6(pkt, t, ipLen, p)
		}
	case TunnelGRE:
		ok = d.gre(pkt, t, ipLen, p)
	case TunnelVXLAN:
		ok = d.vxlan(pkt, t+udpHeaderLen, ipLen, p)
	case TunnelGeneve:
		ok = d.geneve(pkt, t+udpHeaderLen, ipLen, p)
	}
	d.inner = false
	if !ok {
		*p = saved
		d.stats.Decap.Outer[kind]++
		return false
	}
	p.VLAN = saved.VLAN
	d.outer = Outer{SrcAddr: saved.Key.SrcAddr, DstAddr: saved.Key.DstAddr, IPVersion: saved.Key.IPVersion, Tunnel: kind}
	d.stats.Decap.Inner[kind]++
	return true
}

// vxlan decodes the Ethernet frame after a VXLAN header at data[off:].
func (d *Decoder) vxlan(data []byte, off, end int, p *flow.Packet) bool {
	if len(data) < off+vxlanHdrLen || data[off]&vxlanFlagI == 0 {
		return false
	}
	return d.bridged(data, off+vxlanHdrLen, end, p, 0, ReasonTruncatedLink)
}

// geneve decodes what follows a Geneve header (version 0) at data[off:].
func (d *Decoder) geneve(data []byte, off, end int, p *flow.Packet) bool {
	if len(data) < off+geneveFixedLen || data[off]>>6 != 0 {
		return false
	}
	hl := geneveFixedLen + int(data[off]&0x3f)*4 // options, in 4-byte units
	if len(data) < off+hl {
		return false
	}
	return d.ether(data, binary.BigEndian.Uint16(data[off+2:]), off+hl, end, p, 1)
}

// gre decodes what follows a GRE header (version 0, without source
// routing) at data[off:], by its protocol type, an ethertype.
func (d *Decoder) gre(data []byte, off, end int, p *flow.Packet) bool {
	if len(data) < off+greFixedLen {
		return false
	}
	flags := binary.BigEndian.Uint16(data[off:])
	if flags&(greVersionMask|greFlagRouting) != 0 {
		return false
	}
	hl := greFixedLen
	for _, f := range [...]uint16{greFlagChecksum, greFlagKey, greFlagSeq} {
		if flags&f != 0 {
			hl += greOptionalFields
		}
	}
	if len(data) < off+hl {
		return false
	}
	return d.ether(data, binary.BigEndian.Uint16(data[off+2:]), off+hl, end, p, 1)
}
