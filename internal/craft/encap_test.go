package craft

import (
	"bytes"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
)

// TestEncapLayout checks the bytes of each new link header and
// encapsulation against the specs, beside what tshark makes of them.
func TestEncapLayout(t *testing.T) {
	udp := Packet{Src: a4, Dst: b4, Proto: flow.ProtoUDP, SrcPort: 1, DstPort: 2, Payload: 4} // IPLen 32
	v6 := Packet{Src: a6, Dst: b6, Proto: flow.ProtoUDP, SrcPort: 1, DstPort: 2}              // IPLen 48
	with := func(p Packet, f func(*Packet)) Packet { f(&p); return p }
	cases := []struct {
		name   string
		p      Packet
		prefix []byte // the frame's first bytes
		outer  int    // OuterIPLen
	}{
		{"null-ipv4", with(udp, func(p *Packet) { p.Link = packet.LinkNull }), []byte{2, 0, 0, 0, 0x45}, 32},
		{"null-ipv6-macos", with(v6, func(p *Packet) { p.Link = packet.LinkNull }), []byte{30, 0, 0, 0, 0x60}, 48},
		{"loop-ipv6", with(v6, func(p *Packet) { p.Link = packet.LinkLoop }), []byte{0, 0, 0, 24, 0x60}, 48},
		{"ppp", with(udp, func(p *Packet) { p.Link = packet.LinkPPP }), []byte{0xff, 0x03, 0x00, 0x21, 0x45}, 32},
		{"chdlc", with(v6, func(p *Packet) { p.Link = packet.LinkCHDLC }), []byte{0x0f, 0, 0x86, 0xdd, 0x60}, 48},
		{"nflog", with(udp, func(p *Packet) { p.Link = packet.LinkNFLOG }), []byte{2, 0, 0, 5, 8, 0, 1, 0, 0x08, 0x00, 1, 0,
			9, 0, 10, 0, 'w', 'e', 'i', 'r', 0, 0, 0, 0, 36, 0, 9, 0, 0x45}, 32},
		{"sll-ppp", with(udp, func(p *Packet) { p.Link, p.ARPHRD = packet.LinkSLL, 512 }), []byte{0, 0, 2, 0}, 32},
		{"pppoe", with(udp, func(p *Packet) { p.Link, p.PPPoE = packet.LinkEthernet, true }),
			append(make([]byte, 12), 0x88, 0x64, 0x11, 0, 0, 0x2a, 0, 34, 0, 0x21, 0x45), 32},
		{"mpls", with(v6, func(p *Packet) { p.Link, p.MPLS = packet.LinkEthernet, []uint32{1, 0xfffff} }),
			append(make([]byte, 12), 0x88, 0x47, 0, 0, 0x10, 64, 0xff, 0xff, 0xf1, 64, 0x60), 48},
		{"mpls-pw", with(udp, func(p *Packet) { p.Link, p.MPLS, p.PW = packet.LinkEthernet, []uint32{5}, true }),
			append(append(append(make([]byte, 12), 0x88, 0x47, 0, 0, 0x51, 64, 0, 0, 0, 1), append(macOf(b4), macOf(a4)...)...), 0x08, 0x00, 0x45), 32},
		{"vxlan", with(udp, func(p *Packet) {
			p.Link, p.Tunnel = packet.LinkRaw, &Tunnel{Kind: packet.TunnelVXLAN, Src: n4a, Dst: n4b, VNI: 0x0a0b0c, SrcPort: 7}
		}), nil, 20 + 8 + 8 + 14 + 32},
		{"gre-all-fields", with(v6, func(p *Packet) {
			p.Link, p.Tunnel = packet.LinkRaw, &Tunnel{Kind: packet.TunnelGRE, Src: n4a, Dst: n4b, VNI: 9, GREKey: true, GRESeq: true, GRECsum: true}
		}), nil, 20 + 16 + 48},
		{"geneve-options", with(udp, func(p *Packet) {
			p.Link, p.Tunnel = packet.LinkRaw, &Tunnel{Kind: packet.TunnelGeneve, Src: n6a, Dst: n6b, Options: 12}
		}), nil, 40 + 8 + 8 + 12 + 32},
		{"ipip6", with(v6, func(p *Packet) {
			p.Link, p.Tunnel = packet.LinkRaw, &Tunnel{Kind: packet.TunnelIPIP, Src: n4a, Dst: n4b}
		}), nil, 20 + 48},
	}
	for _, c := range cases {
		f := c.p.Append(nil)
		if c.p.Link == packet.LinkEthernet { // MACs: checked elsewhere
			copy(f[:12], c.prefix[:12])
		}
		if c.prefix != nil && !bytes.HasPrefix(f, c.prefix) {
			t.Errorf("%s: frame starts % x, want % x", c.name, f[:min(len(f), len(c.prefix))], c.prefix)
		}
		if got := c.p.OuterIPLen(); got != c.outer {
			t.Errorf("%s: OuterIPLen %d, want %d", c.name, got, c.outer)
		}
		if c.p.Link != packet.LinkEthernet && len(f) != c.p.LinkHeaderLen()+c.outer {
			t.Errorf("%s: frame %d bytes, link header %d + outer %d", c.name, len(f), c.p.LinkHeaderLen(), c.outer)
		}
	}
	// The tunnel headers themselves (raw link: the frame is the outer packet).
	vx := cases[10].p.Append(nil)
	if vx[9] != 17 || be(vx[22:]) != 4789 || be(vx[20:]) != 7 || be(vx[24:]) != 8+8+14+32 ||
		!bytes.Equal(vx[28:36], []byte{0x08, 0, 0, 0, 0x0a, 0x0b, 0x0c, 0}) || be(vx[48:]) != 0x0800 || Checksum(vx[:20]) != 0 {
		t.Errorf("VXLAN packet % x", vx[:52])
	}
	gre := cases[11].p.Append(nil)
	if gre[9] != 47 || !bytes.Equal(gre[20:24], []byte{0xb0, 0, 0x86, 0xdd}) || !bytes.Equal(gre[28:36], []byte{0, 0, 0, 9, 0, 0, 0, 1}) ||
		Checksum(gre[20:]) != 0 || gre[36]>>4 != 6 {
		t.Errorf("GRE packet % x", gre[:40])
	}
	gen := cases[12].p.Append(nil)
	if gen[6] != 17 || be(gen[42:]) != 6081 || gen[48] != 3 || be(gen[50:]) != 0x0800 || gen[68] != 0x45 {
		t.Errorf("Geneve packet % x", gen[:70])
	}
	if ip := cases[13].p.Append(nil); ip[9] != 41 || ip[20]>>4 != 6 {
		t.Errorf("IPv6 in IPv4 % x", ip[:21])
	}
}

func macOf(a interface{ As16() [16]byte }) []byte {
	b := a.As16()
	return []byte{0x02, 0x00, b[12], b[13], b[14], b[15]}
}
