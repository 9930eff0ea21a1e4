package pcapfilter

import (
	"encoding/binary"
	"net/netip"

	"github.com/weir-dev/weir/internal/craft"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
)

// testFrame is one corpus frame as the filter sees it.
type testFrame struct {
	data []byte
	m    meta
	desc string
}

var (
	v4Addrs = []string{"1.2.3.4", "5.6.7.8", "10.0.0.1", "10.1.2.3", "192.168.1.10", "172.16.5.4", "224.0.0.251", "255.255.255.255", "0.0.0.0"}
	v6Addrs = []string{"::1", "fe80::1", "2001:db8::1", "2001:db8::2", "ff02::1", "2001:db8:1::5"}
	ports   = []uint16{0, 10, 15, 20, 21, 22, 53, 80, 123, 443, 1024, 5353, 8080, 65535}
)

// corpusPackets returns varied IP packets (without link type): every
// transport, many ports and addresses, TCP flag mixes, ICMP types, IPv4
// options and IPv6 extension headers.
func corpusPackets() []craft.Packet {
	var out []craft.Packet
	addr := netip.MustParseAddr
	for i, s := range v4Addrs {
		src := addr(s)
		dst := addr(v4Addrs[(i*5+3)%len(v4Addrs)])
		for j, pr := range []uint8{flow.ProtoTCP, flow.ProtoUDP, flow.ProtoSCTP} {
			sp := ports[(i+j)%len(ports)]
			dp := ports[(i*3+j*7+1)%len(ports)]
			out = append(out, craft.Packet{Src: src, Dst: dst, Proto: pr, SrcPort: sp, DstPort: dp,
				TCPFlags: uint8(1 << ((i + j) % 8)), Payload: (i * 37) % 300, TTL: uint8(i * 31)})
		}
		out = append(out,
			craft.Packet{Src: src, Dst: dst, Proto: flow.ProtoICMP, ICMPType: []uint8{0, 3, 8, 11}[i%4], Payload: i * 10},
			craft.Packet{Src: src, Dst: dst, Proto: []uint8{2, 47, 50, 51, 103, 112, 9}[i%7], Payload: 20},
			craft.Packet{Src: dst, Dst: src, Proto: flow.ProtoTCP, SrcPort: 80, DstPort: 40000 + uint16(i), TCPFlags: 0x12, Payload: 600},
		)
	}
	for i, s := range v6Addrs {
		src := addr(s)
		dst := addr(v6Addrs[(i*5+1)%len(v6Addrs)])
		for j, pr := range []uint8{flow.ProtoTCP, flow.ProtoUDP, flow.ProtoSCTP} {
			out = append(out, craft.Packet{Src: src, Dst: dst, Proto: pr,
				SrcPort: ports[(i*2+j)%len(ports)], DstPort: ports[(i*5+j*3+2)%len(ports)], Payload: i * 50})
		}
		out = append(out,
			craft.Packet{Src: src, Dst: dst, Proto: flow.ProtoICMPv6, ICMPType: []uint8{128, 129, 1, 135}[i%4], Payload: 16},
			craft.Packet{Src: src, Dst: dst, Proto: []uint8{103, 50, 51, 17}[i%4], Payload: 30},
		)
	}
	out = append(out, craft.Packet{Src: addr("1.2.3.4"), Dst: addr("1.2.3.4"), Proto: flow.ProtoTCP, SrcPort: 80, DstPort: 80})
	// IPv4 options move the transport header (ldxb 4*([14]&0xf)).
	out = append(out, craft.Packet{Src: addr("10.0.0.1"), Dst: addr("1.2.3.4"), Proto: flow.ProtoTCP,
		SrcPort: 33000, DstPort: 80, TCPFlags: 0x02, IPv4Options: []byte{1, 1, 1, 0, 7, 7, 4, 0, 0, 0, 0}})
	out = append(out, craft.Packet{Src: addr("10.0.0.1"), Dst: addr("5.6.7.8"), Proto: flow.ProtoUDP,
		SrcPort: 53, DstPort: 5353, IPv4Options: []byte{1, 1, 1, 1}})
	// IPv6 extension headers: libpcap's port tests do not look past them.
	for _, ext := range [][]craft.Ext{
		{{Type: craft.ExtHopByHop, Len: 4}},
		{{Type: craft.ExtDestOpts, Len: 10}},
		{{Type: craft.ExtRouting, Len: 16}},
		{{Type: craft.ExtHopByHop}, {Type: craft.ExtAH}},
		{{Type: craft.ExtFragment}},
	} {
		for _, pr := range []uint8{flow.ProtoTCP, flow.ProtoUDP, flow.ProtoICMPv6} {
			out = append(out, craft.Packet{Src: addr("2001:db8::1"), Dst: addr("2001:db8::2"), Proto: pr,
				SrcPort: 80, DstPort: 53, ICMPType: 128, IPv6Ext: ext, Payload: 40})
		}
	}
	return out
}

// fragments returns fragmented datagrams: first and later IPv4 fragments,
// IPv6 fragments behind a fragment header.
func fragments(link packet.LinkType) [][]byte {
	var out [][]byte
	addr := netip.MustParseAddr
	for _, p := range []craft.Packet{
		{Src: addr("10.0.0.1"), Dst: addr("1.2.3.4"), Proto: flow.ProtoUDP, SrcPort: 53, DstPort: 80, Payload: 1400, ID: 7},
		{Src: addr("10.1.2.3"), Dst: addr("5.6.7.8"), Proto: flow.ProtoTCP, SrcPort: 443, DstPort: 22, Payload: 1000, ID: 8},
		{Src: addr("10.1.2.3"), Dst: addr("5.6.7.8"), Proto: flow.ProtoICMP, ICMPType: 8, Payload: 1000, ID: 9},
		{Src: addr("2001:db8::1"), Dst: addr("2001:db8::2"), Proto: flow.ProtoUDP, SrcPort: 53, DstPort: 80, Payload: 1400, ID: 10},
		{Src: addr("2001:db8::1"), Dst: addr("ff02::1"), Proto: flow.ProtoTCP, SrcPort: 80, DstPort: 443, Payload: 1000, ID: 11},
		{Src: addr("2001:db8::1"), Dst: addr("::1"), Proto: flow.ProtoICMPv6, ICMPType: 128, Payload: 1000, ID: 12},
	} {
		p.Link = link
		for _, f := range p.Fragments(400) {
			out = append(out, f.Frame)
		}
	}
	return out
}

// arpFrame builds an Ethernet ARP (0x0806) or RARP (0x8035) frame.
func arpFrame(etherType uint16, op uint16, spa, tpa string) []byte {
	b := make([]byte, 42)
	copy(b[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(b[6:12], []byte{0x02, 0x00, 0x0a, 0x00, 0x00, 0x01})
	binary.BigEndian.PutUint16(b[12:], etherType)
	binary.BigEndian.PutUint16(b[14:], 1)      // hardware type Ethernet
	binary.BigEndian.PutUint16(b[16:], 0x0800) // protocol type IPv4
	b[18], b[19] = 6, 4
	binary.BigEndian.PutUint16(b[20:], op)
	copy(b[22:28], b[6:12])
	s, t := netip.MustParseAddr(spa).As4(), netip.MustParseAddr(tpa).As4()
	copy(b[28:32], s[:])
	copy(b[38:42], t[:])
	return append(b, make([]byte, 18)...) // pad to 60
}

// ethernetCorpus is every frame the Ethernet differential test runs.
func ethernetCorpus() []testFrame {
	var out []testFrame
	add := func(b []byte, desc string) { out = append(out, testFrame{data: b, desc: desc}) }
	pkts := corpusPackets()
	for i := range pkts {
		pkts[i].Link = packet.LinkEthernet
		f := pkts[i].Append(nil)
		add(f, "packet")
		switch i % 4 { // link-layer broadcast and multicast destinations
		case 1:
			g := append([]byte(nil), f...)
			copy(g, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
			add(g, "broadcast")
		case 2:
			g := append([]byte(nil), f...)
			copy(g, []byte{0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb})
			add(g, "multicast")
		}
	}
	for _, f := range fragments(packet.LinkEthernet) {
		add(f, "fragment")
	}
	add(arpFrame(0x0806, 1, "10.0.0.1", "1.2.3.4"), "arp request")
	add(arpFrame(0x0806, 2, "1.2.3.4", "10.0.0.1"), "arp reply")
	add(arpFrame(0x0806, 1, "192.168.1.10", "10.1.2.3"), "arp request")
	add(arpFrame(0x8035, 3, "1.2.3.4", "5.6.7.8"), "rarp")
	add(arpFrame(0x8035, 4, "10.1.2.3", "10.0.0.1"), "rarp")
	// 802.3 length field + LLC, and other Ethernet types.
	llc := make([]byte, 60)
	copy(llc, []byte{0x01, 0x80, 0xc2, 0, 0, 0, 0x02, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(llc[12:], 38)
	llc[14], llc[15], llc[16] = 0x42, 0x42, 0x03
	add(llc, "llc stp")
	lldp := append([]byte(nil), llc...)
	binary.BigEndian.PutUint16(lldp[12:], 0x88cc)
	add(lldp, "lldp")
	// Truncated frames: loads past the end reject the frame.
	base := []craft.Packet{pkts[0], pkts[len(v4Addrs)*6], pkts[len(pkts)-1]}
	for _, p := range base {
		f := p.Append(nil)
		for _, n := range []int{0, 6, 12, 13, 14, 20, 23, 24, 30, 34, 36, 38, 40, 50, 54, 55, 56} {
			if n < len(f) {
				add(f[:n], "truncated")
			}
		}
	}
	a := arpFrame(0x0806, 1, "10.0.0.1", "1.2.3.4")
	add(a[:30], "truncated arp")
	// The scenario's Ethernet frames without a VLAN tag.
	frames, _ := craft.Scenario(3)
	n := 0
	for _, f := range frames {
		if f.Link != packet.LinkEthernet || len(f.Data) < 14 {
			continue
		}
		if et := binary.BigEndian.Uint16(f.Data[12:]); et == 0x8100 || et == 0x88a8 {
			continue
		}
		if n++; n%4 == 0 && n < 2400 {
			add(f.Data, "scenario")
		}
	}
	return out
}

// rawCorpus is every frame the raw-IP differential test runs.
func rawCorpus() []testFrame {
	var out []testFrame
	add := func(b []byte, desc string) { out = append(out, testFrame{data: b, desc: desc}) }
	pkts := corpusPackets()
	for i := range pkts {
		pkts[i].Link = packet.LinkRaw
		add(pkts[i].Append(nil), "packet")
	}
	for _, f := range fragments(packet.LinkRaw) {
		add(f, "fragment")
	}
	for _, p := range []craft.Packet{pkts[0], pkts[len(v4Addrs)*6]} {
		f := p.Append(nil)
		for _, n := range []int{0, 1, 6, 9, 10, 12, 16, 20, 22, 24, 40, 41, 42} {
			if n < len(f) {
				add(f[:n], "truncated")
			}
		}
	}
	junk := append([]byte(nil), pkts[0].Append(nil)...)
	junk[0] = 0x50 // neither version 4 nor 6
	add(junk, "bad version")
	return out
}
