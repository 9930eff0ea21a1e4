package craft

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
)

// encapCase is one packet shape with the protocol layers Wireshark must
// find in it, outermost first (a subsequence of frame.protocols).
type encapCase struct {
	p      Packet
	layers string
}

var (
	n4a = netip.MustParseAddr("203.0.113.10")
	n4b = netip.MustParseAddr("203.0.113.20")
	n6a = netip.MustParseAddr("2001:db8:ffff::10")
	n6b = netip.MustParseAddr("2001:db8:ffff::20")
)

// encapCases covers every new link type and encapsulation, with TCP, UDP
// and ICMP inside, IPv4 and IPv6.
func encapCases() []encapCase {
	tcp := func(link packet.LinkType, src, dst netip.Addr) Packet {
		return Packet{Link: link, Src: src, Dst: dst, Proto: flow.ProtoTCP, SrcPort: 40000, DstPort: 443,
			TCPFlags: flow.TCPSyn, Seq: 7, Payload: 20}
	}
	udp := func(link packet.LinkType, src, dst netip.Addr) Packet {
		return Packet{Link: link, Src: src, Dst: dst, Proto: flow.ProtoUDP, SrcPort: 5353, DstPort: 53, Payload: 33}
	}
	with := func(p Packet, f func(*Packet)) Packet { f(&p); return p }
	eth := packet.LinkEthernet
	var cs []encapCase
	add := func(layers string, ps ...Packet) {
		for _, p := range ps {
			cs = append(cs, encapCase{p, layers})
		}
	}
	add("null:ip:tcp", tcp(packet.LinkNull, a4, b4))
	add("null:ipv6:udp", udp(packet.LinkNull, a6, b6), with(udp(packet.LinkNull, a6, b6), func(p *Packet) { p.AF6 = 28 }))
	add("null:ipv6:tcp", tcp(packet.LinkLoop, a6, b6)) // Wireshark names LOOP "null" and SLL2 "sll" too
	add("null:ip:udp", udp(packet.LinkLoop, a4, b4))
	add("nflog:ip:udp", udp(packet.LinkNFLOG, a4, b4))
	add("nflog:ipv6:tcp", tcp(packet.LinkNFLOG, a6, b6))
	add("ppp:ip:tcp", tcp(packet.LinkPPP, a4, b4))
	add("ppp:ipv6:udp", udp(packet.LinkPPP, a6, b6))
	add("ppp:ip:udp", udp(packet.LinkPPPHDLC, a4, b4))
	add("chdlc:ipv6:tcp", tcp(packet.LinkCHDLC, a6, b6))
	add("pppoes:ppp:ipv6:udp", udp(packet.LinkPPPoE, a6, b6))
	add("sll:ip:udp", with(udp(packet.LinkSLL, a4, b4), func(p *Packet) { p.ARPHRD = 512 })) // ARPHRD_PPP
	add("sll:ipv6:tcp", with(tcp(packet.LinkSLL2, a6, b6), func(p *Packet) { p.ARPHRD = 0xfffe }))
	add("eth:pppoes:ppp:ip:tcp", with(tcp(eth, a4, b4), func(p *Packet) { p.PPPoE = true }))
	add("eth:vlan:pppoes:ppp:ipv6:udp", with(udp(eth, a6, b6), func(p *Packet) { p.PPPoE, p.VLANs = true, []uint16{35} }))
	add("eth:mpls:ip:tcp", with(tcp(eth, a4, b4), func(p *Packet) { p.MPLS = []uint32{1000, 2000} }))
	add("eth:mpls:ipv6:udp", with(udp(eth, a6, b6), func(p *Packet) { p.MPLS = []uint32{16} }))
	add("eth:mpls:pwethcw:eth:ip:udp", with(udp(eth, a4, b4), func(p *Packet) { p.MPLS, p.PW = []uint32{100, 200}, true }))
	add("eth:mpls:eth:ipv6:tcp", with(tcp(eth, a6, b6), func(p *Packet) { p.MPLS, p.PW, p.PWNoCW = []uint32{301}, true, true })) // decoded as told: Wireshark would guess a control word
	add("eth:llc:ip:udp", with(udp(eth, a4, b4), func(p *Packet) { p.Shim = ShimSNAP }))
	add("eth:vlan:vntag:ipv6:tcp", with(tcp(eth, a6, b6), func(p *Packet) { p.VLANs, p.Shim = []uint16{3}, ShimVNTag }))
	add("eth:ieee8021ah:ip:tcp", with(tcp(eth, a4, b4), func(p *Packet) { p.Shim = ShimPBB }))
	add("eth:cfp:eth:ipv6:udp", with(udp(eth, a6, b6), func(p *Packet) { p.Shim = ShimFabricPath }))
	add("eth:macsec:ip:tcp", with(tcp(eth, a4, b4), func(p *Packet) { p.Shim = ShimMACsec }))
	add("eth:macsec:ipv6:udp", with(udp(eth, a6, b6), func(p *Packet) { p.Shim = ShimMACsec }))
	vx := &Tunnel{Kind: packet.TunnelVXLAN, Src: n4a, Dst: n4b, VNI: 42}
	add("eth:ip:udp:vxlan:eth:ip:tcp", with(tcp(eth, a4, b4), func(p *Packet) { p.Tunnel = vx }))
	add("eth:ipv6:udp:vxlan:eth:ipv6:udp", with(udp(eth, a6, b6), func(p *Packet) {
		p.Tunnel = &Tunnel{Kind: packet.TunnelVXLAN, Src: n6a, Dst: n6b, VNI: 7, DstPort: 8472}
	}))
	add("eth:ip:udp:geneve:eth:ip:udp", with(udp(eth, a4, b4), func(p *Packet) {
		p.Tunnel = &Tunnel{Kind: packet.TunnelGeneve, Src: n4a, Dst: n4b, VNI: 9, Ethernet: true, Options: 8}
	}))
	add("eth:ip:udp:geneve:ipv6:tcp", with(tcp(eth, a6, b6), func(p *Packet) {
		p.Tunnel = &Tunnel{Kind: packet.TunnelGeneve, Src: n4a, Dst: n4b, VNI: 9}
	}))
	add("eth:ip:gre:ip:tcp", with(tcp(eth, a4, b4), func(p *Packet) {
		p.Tunnel = &Tunnel{Kind: packet.TunnelGRE, Src: n4a, Dst: n4b, VNI: 5, GREKey: true, GRESeq: true, GRECsum: true}
	}))
	add("eth:ipv6:gre:eth:ipv6:udp", with(udp(eth, a6, b6), func(p *Packet) {
		p.Tunnel = &Tunnel{Kind: packet.TunnelGRE, Src: n6a, Dst: n6b, Ethernet: true, GREKey: true, VNI: 77}
	}))
	add("eth:ip:ip:udp", with(udp(eth, a4, b4), func(p *Packet) { p.Tunnel = &Tunnel{Kind: packet.TunnelIPIP, Src: n4a, Dst: n4b} }))
	add("eth:ip:ipv6:tcp", with(tcp(eth, a6, b6), func(p *Packet) { p.Tunnel = &Tunnel{Kind: packet.TunnelIPIP, Src: n4a, Dst: n4b} }))
	add("eth:ipv6:ip:tcp", with(tcp(eth, a4, b4), func(p *Packet) { p.Tunnel = &Tunnel{Kind: packet.TunnelIPIP, Src: n6a, Dst: n6b} }))
	add("eth:vlan:mpls:ip:udp:vxlan:eth:ip:tcp", with(tcp(eth, a4, b4), func(p *Packet) {
		p.VLANs, p.MPLS, p.Tunnel = []uint16{5}, []uint32{300}, vx
	}))
	return cs
}

// TestTsharkEncap lets Wireshark dissect every encapsulation craft writes,
// checksums validated: the layers must be the expected ones, the outer and
// inner addresses and IP lengths craft's, and no checksum may be bad.
func TestTsharkEncap(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tshark not installed; run scripts/deps.sh: CI must not skip the independent cross-check")
		}
		t.Skip("tshark not installed; run scripts/deps.sh")
	}
	byLink := map[packet.LinkType][]encapCase{}
	for _, c := range encapCases() {
		byLink[c.p.Link] = append(byLink[c.p.Link], c)
	}
	dir := t.TempDir()
	for link, cs := range byLink {
		var frames []Frame
		for i, c := range cs {
			b := c.p.Append(nil)
			frames = append(frames, Frame{Data: b, WireLen: len(b), Time: ScenarioStart + int64(i)*1e6, Link: link})
		}
		path := filepath.Join(dir, link.String()+".pcap")
		writePcap(t, path, link, frames)
		fields := []string{"frame.protocols", "ip.src", "ip.dst", "ipv6.src", "ipv6.dst", "ip.len", "ipv6.plen",
			"ip.checksum.status", "tcp.checksum.status", "udp.checksum.status", "gre.checksum.status"}
		args := []string{"-n", "-r", path, "-d", "udp.port==8472,vxlan", "-d", "mpls.label==301,pwethnocw",
			"-o", "ip.check_checksum:TRUE", "-o", "tcp.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
			"-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,", "-E", "separator=|"}
		for _, f := range fields {
			args = append(args, "-e", f)
		}
		lines := run(t, tshark, args...)
		if len(lines) != len(cs) {
			t.Fatalf("%v: tshark read %d frames, wrote %d", link, len(lines), len(cs))
		}
		for i, line := range lines {
			c := cs[i]
			v := strings.Split(line, "|")
			var layers []string
			for _, l := range strings.Split(v[0], ":") {
				if l != "ethertype" && l != "pwethheuristic" {
					layers = append(layers, l)
				}
			}
			if got := strings.Join(layers, ":"); !strings.HasPrefix(got, c.layers) {
				t.Errorf("%v frame %d: layers %s, want %s…", link, i, got, c.layers)
			}
			var want [6][]string // ip.src, ip.dst, ipv6.src, ipv6.dst, ip.len, ipv6.plen: outer first
			addIP := func(src, dst netip.Addr, ipLen int) {
				if src.Is4() {
					want[0], want[1] = append(want[0], src.String()), append(want[1], dst.String())
					want[4] = append(want[4], fmt.Sprint(ipLen))
				} else {
					want[2], want[3] = append(want[2], src.String()), append(want[3], dst.String())
					want[5] = append(want[5], fmt.Sprint(ipLen-40))
				}
			}
			if tn := c.p.Tunnel; tn != nil {
				addIP(tn.Src, tn.Dst, c.p.OuterIPLen())
			}
			addIP(c.p.Src, c.p.Dst, c.p.IPLen())
			for j, w := range want {
				if got := v[1+j]; got != strings.Join(w, ",") {
					t.Errorf("%v frame %d (%s): %s = %q, want %q", link, i, c.layers, fields[1+j], got, strings.Join(w, ","))
				}
			}
			for j, st := range v[7:] {
				for _, x := range strings.Split(st, ",") {
					if x != "" && x != "1" && x != "2" {
						t.Errorf("%v frame %d (%s): %s = %s", link, i, c.layers, fields[7+j], st)
					}
				}
			}
		}
	}
}
