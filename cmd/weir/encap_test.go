package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/craft"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/source/pcap"
)

// encapShape is one way real captures carry traffic: a link type, and
// what wraps every packet (fwd false: the reply direction).
type encapShape struct {
	name   string
	link   packet.LinkType
	wrap   func(p *craft.Packet, fwd bool)
	tunnel bool     // keyed by the outer header unless --decap
	tshark []string // decode-as options tshark needs
}

var (
	node4a, node4b = netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	node6a, node6b = netip.MustParseAddr("2001:db8:ffff::1"), netip.MustParseAddr("2001:db8:ffff::2")
)

// tunnelWrap wraps packets in t, its endpoints swapped for replies.
func tunnelWrap(t craft.Tunnel) func(p *craft.Packet, fwd bool) {
	return func(p *craft.Packet, fwd bool) {
		tt := t
		if !fwd {
			tt.Src, tt.Dst = t.Dst, t.Src
		}
		p.Tunnel = &tt
	}
}

func encapShapes() []encapShape {
	none := func(*craft.Packet, bool) {}
	return []encapShape{
		{"null", packet.LinkNull, none, false, nil},
		{"loop", packet.LinkLoop, none, false, nil},
		{"nflog", packet.LinkNFLOG, none, false, nil},
		{"ppp", packet.LinkPPP, none, false, nil},
		{"ppp-hdlc", packet.LinkPPPHDLC, none, false, nil},
		{"c-hdlc", packet.LinkCHDLC, none, false, nil},
		{"ppp-ether", packet.LinkPPPoE, none, false, nil},
		{"sll-ppp", packet.LinkSLL, func(p *craft.Packet, _ bool) { p.ARPHRD = 512 }, false, nil},
		{"sll2-tun", packet.LinkSLL2, func(p *craft.Packet, _ bool) { p.ARPHRD = 0xfffe }, false, nil},
		{"pppoe", packet.LinkEthernet, func(p *craft.Packet, _ bool) { p.PPPoE = true }, false, nil},
		{"vlan-pppoe", packet.LinkEthernet, func(p *craft.Packet, _ bool) { p.PPPoE, p.VLANs = true, []uint16{10} }, false, nil},
		{"mpls", packet.LinkEthernet, func(p *craft.Packet, fwd bool) {
			p.MPLS = []uint32{1000, 2000}
			if !fwd {
				p.MPLS = []uint32{3000}
			}
		}, false, nil},
		// Wireshark guesses whether a pseudowire has a control word from the
		// MAC addresses after it (craft's look like an ethertype to it):
		// RFC 4448's frames carry one, so tell it.
		{"mpls-pw", packet.LinkEthernet, func(p *craft.Packet, _ bool) { p.MPLS, p.PW = []uint32{16, 17}, true }, false,
			[]string{"-d", "mpls.label==17,pwethcw"}},
		{"mpls-pw-no-cw", packet.LinkEthernet, func(p *craft.Packet, _ bool) { p.MPLS, p.PW, p.PWNoCW = []uint32{18}, true, true }, false,
			[]string{"-d", "mpls.label==18,pwethnocw"}},
		// Shims of data-centre and carrier links, from real captures (docs/corpus.md).
		{"llc-snap", packet.LinkEthernet, func(p *craft.Packet, _ bool) { p.Shim = craft.ShimSNAP }, false, nil},
		{"vlan-vntag", packet.LinkEthernet, func(p *craft.Packet, _ bool) { p.VLANs, p.Shim = []uint16{12}, craft.ShimVNTag }, false, nil},
		{"pbb", packet.LinkEthernet, func(p *craft.Packet, _ bool) { p.VLANs, p.Shim = []uint16{20}, craft.ShimPBB }, false, nil},
		{"fabricpath", packet.LinkEthernet, func(p *craft.Packet, _ bool) { p.Shim = craft.ShimFabricPath }, false, nil},
		{"macsec-integrity", packet.LinkEthernet, func(p *craft.Packet, _ bool) { p.Shim = craft.ShimMACsec }, false, nil},
		{"vxlan", packet.LinkEthernet, tunnelWrap(craft.Tunnel{Kind: packet.TunnelVXLAN, Src: node4a, Dst: node4b, VNI: 1}), true, nil},
		{"vxlan-8472-ipv6", packet.LinkEthernet, tunnelWrap(craft.Tunnel{Kind: packet.TunnelVXLAN, Src: node6a, Dst: node6b, VNI: 1, DstPort: 8472}), true, nil},
		{"geneve", packet.LinkEthernet, tunnelWrap(craft.Tunnel{Kind: packet.TunnelGeneve, Src: node4a, Dst: node4b, Ethernet: true, Options: 8}), true, nil},
		{"gre", packet.LinkEthernet, tunnelWrap(craft.Tunnel{Kind: packet.TunnelGRE, Src: node4a, Dst: node4b, GREKey: true, VNI: 3}), true, nil},
		{"gre-bridged", packet.LinkEthernet, tunnelWrap(craft.Tunnel{Kind: packet.TunnelGRE, Src: node6a, Dst: node6b, Ethernet: true, GRESeq: true}), true, nil},
		{"ipip", packet.LinkEthernet, tunnelWrap(craft.Tunnel{Kind: packet.TunnelIPIP, Src: node4a, Dst: node4b}), true, nil},
	}
}

// encapMix is a small deterministic mix — TCP connections and UDP
// exchanges, IPv4 and IPv6, an echo — carried as shape says, from time
// t on, between addresses of its own for each id (so mixes of different
// shapes never share a flow).
func encapMix(shape encapShape, id int, t int64) []craft.Frame {
	pod1, pod2 := netip.AddrFrom4([4]byte{10, 244, byte(id), 5}), netip.AddrFrom4([4]byte{10, 244, byte(id), 7})
	pod61, pod62 := netip.MustParseAddr(fmt.Sprintf("fd00:244:%x::5", id)), netip.MustParseAddr(fmt.Sprintf("fd00:244:%x::7", id))
	type step struct {
		fwd     bool
		flags   uint8
		payload int
	}
	tcp := []step{{true, 0x02, 0}, {false, 0x12, 0}, {true, 0x10, 0}, {true, 0x18, 517}, {false, 0x18, 1400}, {false, 0x18, 900},
		{true, 0x10, 0}, {true, 0x11, 0}, {false, 0x11, 0}, {true, 0x10, 0}}
	udp := []step{{true, 0, 40}, {false, 0, 180}, {true, 0, 41}, {false, 0, 220}, {true, 0, 39}}
	var out []craft.Frame
	emit := func(src, dst netip.Addr, proto uint8, sport, dport uint16, steps []step) {
		for _, s := range steps {
			p := craft.Packet{Link: shape.link, Src: src, Dst: dst, Proto: proto, SrcPort: sport, DstPort: dport,
				TCPFlags: s.flags, Payload: s.payload, Seq: 1}
			if proto == flow.ProtoICMP {
				p.ICMPType = 8
				if !s.fwd {
					p.ICMPType = 0
				}
			}
			if !s.fwd {
				p.Src, p.Dst, p.SrcPort, p.DstPort = dst, src, dport, sport
			}
			shape.wrap(&p, s.fwd)
			b := p.Append(nil)
			out = append(out, craft.Frame{Data: b, WireLen: len(b), Time: t, Link: shape.link, Iface: shape.name})
			t += int64(3 * time.Millisecond)
		}
	}
	emit(pod1, pod2, flow.ProtoTCP, 40000, 80, tcp)
	emit(pod61, pod62, flow.ProtoTCP, 41000, 443, tcp)
	emit(pod1, netip.AddrFrom4([4]byte{10, 96, byte(id), 10}), flow.ProtoUDP, 5353, 53, udp)
	emit(pod62, pod61, flow.ProtoUDP, 7000, 7001, udp[:3])
	emit(pod2, pod1, flow.ProtoICMP, 0, 0, []step{{true, 0, 56}, {false, 0, 56}})
	return out
}

// writeEncapMixes writes every shape's mix to one pcapng file, an
// interface (of the shape's link type) per shape, one shape after the
// other; it returns the frames.
func writeEncapMixes(t *testing.T, path string) []craft.Frame {
	t.Helper()
	var buf bytes.Buffer
	w, err := pcap.NewNgWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var all []craft.Frame
	for i, shape := range encapShapes() {
		id, err := w.AddInterface(shape.name, shape.link, 65535)
		if err != nil {
			t.Fatal(err)
		}
		frames := encapMix(shape, i+1, craft.ScenarioStart+int64(i)*int64(time.Second))
		for _, f := range frames {
			if err := w.WritePacket(id, f.Time, f.WireLen, f.Data); err != nil {
				t.Fatal(err)
			}
		}
		all = append(all, frames...)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return all
}

// tsharkDirs sums, from one run of tshark's own dissection, packets and
// IP bytes per direction, keyed by the outermost IP header (outer) and by
// the innermost (inner): the IP layer is picked from frame.protocols, its
// protocol, ports and length from that layer's occurrence of each field.
func tsharkDirs(t *testing.T, path string, extra ...string) (outer, inner map[dirKey]counts, frames int) {
	fields := []string{"frame.protocols", "ip.src", "ip.dst", "ip.len", "ip.proto", "ipv6.src", "ipv6.dst", "ipv6.plen", "ipv6.nxt",
		"tcp.srcport", "tcp.dstport", "udp.srcport", "udp.dstport"}
	args := append([]string{path, "-d", "udp.port==8472,vxlan", "-T", "fields", "-E", "separator=|", "-E", "occurrence=a", "-E", "aggregator=,"}, extra...)
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out := tshark(t, args...)
	outer, inner = map[dirKey]counts{}, map[dirKey]counts{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		frames++
		v := strings.Split(sc.Text(), "|")
		for _, in := range []bool{false, true} {
			want := outer
			if in {
				want = inner
			}
			tsharkDir(t, fields, v, in, want)
		}
	}
	return outer, inner, frames
}

// tsharkDir adds one tshark line v (fields) to want.
func tsharkDir(t *testing.T, fields, v []string, inner bool, want map[dirKey]counts) {
	{
		get := func(name string) []string {
			for i, f := range fields {
				if f == name && v[i] != "" {
					return strings.Split(v[i], ",")
				}
			}
			return nil
		}
		pick := func(name string) string { // this layer's occurrence: the first or the last
			l := get(name)
			if len(l) == 0 {
				t.Fatalf("tshark line %q: no %s", strings.Join(v, "|"), name)
			}
			if inner {
				return l[len(l)-1]
			}
			return l[0]
		}
		num := func(name string) uint64 {
			x, err := strconv.ParseUint(pick(name), 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return x
		}
		var layers []string
		for _, l := range strings.Split(v[0], ":") {
			if l == "ip" || l == "ipv6" {
				layers = append(layers, l)
			}
		}
		if len(layers) == 0 {
			t.Fatalf("tshark found no IP in %q", v[0])
		}
		fam := layers[0]
		if inner {
			fam = layers[len(layers)-1]
		}
		var k dirKey
		var ipLen uint64
		if fam == "ip" {
			k.src, k.dst = netip.MustParseAddr(pick("ip.src")), netip.MustParseAddr(pick("ip.dst"))
			k.proto, ipLen = uint8(num("ip.proto")), num("ip.len")
		} else {
			k.src, k.dst = netip.MustParseAddr(pick("ipv6.src")), netip.MustParseAddr(pick("ipv6.dst"))
			k.proto, ipLen = uint8(num("ipv6.nxt")), 40+num("ipv6.plen")
		}
		switch k.proto {
		case flow.ProtoTCP:
			k.sport, k.dport = uint16(num("tcp.srcport")), uint16(num("tcp.dstport"))
		case flow.ProtoUDP:
			k.sport, k.dport = uint16(num("udp.srcport")), uint16(num("udp.dstport"))
		}
		c := want[k]
		c.packets++
		c.bytes += ipLen
		want[k] = c
	}
}

// TestTsharkEncap: for every link type and encapsulation (one pcapng
// interface each), weir's packets and IP bytes per direction of every
// conversation equal what tshark's dissection adds up to — keyed by the
// outermost IP header, and with --decap by the innermost — and so do the
// frame counts of tshark's TCP and UDP conversation tables, on the
// conversations weir keys. Records of tunnelled flows with --decap name
// the nodes as their endpoints, and no other record names any.
func TestTsharkEncap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "encap.pcapng")
	frames := writeEncapMixes(t, path)
	var extra []string
	tunnels := map[string]bool{}
	for _, shape := range encapShapes() {
		extra = append(extra, shape.tshark...)
		tunnels[shape.name] = shape.tunnel
	}
	want, dwant, n := tsharkDirs(t, path, extra...)
	if n != len(frames) {
		t.Fatalf("tshark read %d frames, wrote %d", n, len(frames))
	}
	conv := tsharkConv(t, path, extra...)
	nodes := map[string]bool{node4a.String(): true, node4b.String(): true, node6a.String(): true, node6b.String(): true}
	for _, decap := range []bool{false, true} {
		args, w := []string{}, want
		if decap {
			args, w = []string{"--decap", "all"}, dwant
		}
		recs := captureJSON(t, path, args...)
		got := weirDirs(t, recs)
		compareDirs(t, got, w, true)
		checkConv(t, got, conv)
		ifaces := map[string]bool{}
		for _, r := range recs {
			ifaces[*r.Iface] = true
			if !decap || !tunnels[*r.Iface] {
				if r.TunnelSrc != "" || r.TunnelDst != "" {
					t.Errorf("decap %v, %s: tunnel endpoints on %s → %s: %q → %q", decap, *r.Iface, r.SrcIP, r.DstIP, r.TunnelSrc, r.TunnelDst)
				}
				continue
			}
			if !nodes[r.TunnelSrc] || !nodes[r.TunnelDst] || r.TunnelSrc == r.TunnelDst || nodes[r.SrcIP] {
				t.Errorf("%s: decapsulated record %s → %s via %q → %q", *r.Iface, r.SrcIP, r.DstIP, r.TunnelSrc, r.TunnelDst)
			}
		}
		if len(ifaces) != len(tunnels) {
			t.Errorf("decap %v: records on %d interfaces, want every shape's %d", decap, len(ifaces), len(tunnels))
		}
	}
}

// checkConv compares weir's TCP and UDP directions with tshark's
// conversation tables (frames only: their byte columns are rounded),
// restricted to conversations between addresses weir keys by.
func checkConv(t *testing.T, dirs, conv map[dirKey]counts) {
	t.Helper()
	got := map[dirKey]counts{}
	keyed := map[netip.Addr]bool{}
	for k, c := range dirs {
		if k.proto == flow.ProtoTCP || k.proto == flow.ProtoUDP {
			got[k] = c
			keyed[k.src], keyed[k.dst] = true, true
		}
	}
	want := map[dirKey]counts{}
	for k, c := range conv {
		if keyed[k.src] && keyed[k.dst] {
			want[k] = c
		}
	}
	if len(want) == 0 && len(got) > 0 {
		t.Fatalf("no conversation in common with tshark's")
	}
	compareDirs(t, got, want, false)
}

// tsharkConv reads tshark's TCP and UDP conversation tables.
func tsharkConv(t *testing.T, path string, extra ...string) map[dirKey]counts {
	out := tshark(t, append([]string{path, "-q", "-d", "udp.port==8472,vxlan", "-z", "conv,tcp", "-z", "conv,udp"}, extra...)...)
	want := map[dirKey]counts{}
	proto := uint8(0)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "TCP Conversations"):
			proto = flow.ProtoTCP
		case strings.HasPrefix(line, "UDP Conversations"):
			proto = flow.ProtoUDP
		}
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "<->" {
			continue
		}
		a, errA := parseEndpoint(f[0])
		b, errB := parseEndpoint(f[2])
		if errA != nil || errB != nil {
			t.Fatalf("unparsable conversation row %q", line)
		}
		ba, err1 := strconv.ParseUint(f[3], 10, 64)
		ab, err2 := strconv.ParseUint(f[6], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("row %q: %v %v", line, err1, err2)
		}
		if ab > 0 {
			want[dirKey{proto, a.Addr(), b.Addr(), a.Port(), b.Port()}] = counts{packets: ab}
		}
		if ba > 0 {
			want[dirKey{proto, b.Addr(), a.Addr(), b.Port(), a.Port()}] = counts{packets: ba}
		}
	}
	return want
}
