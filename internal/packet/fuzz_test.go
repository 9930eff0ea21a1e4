package packet

import (
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// FuzzDecode feeds two frames of one link type to a fresh decoder with a
// tiny fragment table (so the second frame can hit what the first left
// there) and checks the invariants of every result and counter.
func FuzzDecode(f *testing.F) {
	for _, c := range okCases() {
		f.Add(uint16(c.f.link), c.f.b, []byte(nil), c.wireLen(), int64(0), uint8(0))
	}
	for _, c := range badCases() {
		f.Add(uint16(c.f.link), c.f.b, []byte(nil), c.wire, int64(0), uint8(0))
	}
	for _, c := range benchCases() {
		for _, pf := range c.prime {
			f.Add(uint16(c.f.link), pf.b, c.f.b, 0, int64(1e9), uint8(c.decap))
		}
	}
	for _, c := range tunnelCases() {
		f.Add(uint16(c.f.link), c.f.b, []byte(nil), 0, int64(0), uint8(DecapAll))
	}
	f.Add(uint16(LinkEthernet), frag4(a4, b4, 6, 5, 0, true).tcp(1, 2, 2).done().b, frag4(a4, b4, 6, 5, 3, false).payload(8).done().b, 0, int64(31e9), uint8(0))
	f.Add(uint16(LinkEthernet), eth().eth(0x86dd).ipv6(a6, b6, 44).frag6(58, 0, true, 9).icmp(128, 0).done().b, frag6later(58, 9, 2, false, 8).b, 0, int64(1), uint8(0))
	f.Add(uint16(LinkEthernet), eth().eth(0x0806).payload(28).b, eth().eth(0x0026).b, 0, int64(0), uint8(0))
	f.Add(uint16(LinkSLL), newFrame(LinkSLL).sll(0x86dd).ipv6(a6, b6, 51).ah(17, 12).udp(1, 2).done().b, []byte(nil), 0, int64(0), uint8(0))
	f.Add(uint16(LinkRaw), []byte{0x45}, []byte{0x60}, 0, int64(0), uint8(0))
	f.Add(uint16(LinkNFLOG), []byte{2, 0, 0, 0, 8, 0, 9, 0, 0x45, 0, 0, 0}, []byte{10, 0, 0, 0, 0, 8, 0, 9, 0x60}, 0, int64(0), uint8(0))
	// Ethernet shims: SNAP, VN-Tag then MACsec, 802.1ah, FabricPath
	f.Add(uint16(LinkEthernet), eth().eth(0x0030).plain(0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00).ipv4(v4{src: a4, dst: b4, proto: 17}).udp(1, 2).done().b,
		eth().eth(0x8926).plain(0, 5, 0, 9, 0x88, 0xe5, 0x20, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 9, 0, 1, 0x86, 0xdd).ipv6(a6, b6, 6).tcp(1, 2, 2).done().b, 0, int64(0), uint8(0))
	f.Add(uint16(LinkEthernet), eth().eth(0x88e7).plain(0, 0, 1, 0, 2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x88, 0xe7).b,
		eth().eth(0x8903).plain(0, 0x60, 2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0).ipv4(v4{src: a4, dst: b4, proto: 6}).tcp(1, 2, 2).done().b, 0, int64(0), uint8(0))
	f.Add(uint16(LinkEthernet), eth().eth(0x8847).mpls(1).pw(0x8847).mpls(2).pw(0x6558).innerEth(0x0800, ReasonTruncatedLink).b, []byte(nil), 0, int64(0), uint8(0))

	f.Fuzz(func(t *testing.T, link uint16, a, b []byte, wireLen int, dt int64, decap uint8) {
		d := NewDecoder(Config{FragmentSlots: 4, Decap: Decap(decap)})
		check(t, d, LinkType(link), a, wireLen, 0)
		if b != nil {
			check(t, d, LinkType(link), b, wireLen, dt)
		}
		s := d.Stats()
		if s.Decoded != s.IPv4+s.IPv6 {
			t.Fatalf("decoded %d != ipv4 %d + ipv6 %d", s.Decoded, s.IPv4, s.IPv6)
		}
		if s.NonIP != s.LLC+s.LinkOther+s.NonIPOther+sumEtherTypes(s) {
			t.Fatalf("non-IP buckets do not add up: %+v", *s)
		}
		fs := s.Fragments
		if fs.Evicted > fs.First || fs.Attributed+fs.Unattributed > s.Decoded {
			t.Fatalf("fragment counters: %+v", fs)
		}
		var inner, outer uint64
		for i := range s.Decap.Inner {
			inner += s.Decap.Inner[i]
			outer += s.Decap.Outer[i]
			if !Decap(decap).Has(Tunnel(i)) && s.Decap.Inner[i]+s.Decap.Outer[i] != 0 {
				t.Fatalf("tunnel %v counted but not enabled (%v): %+v", Tunnel(i), Decap(decap), s.Decap)
			}
		}
		if inner+outer > s.Decoded || s.CutHeaders > s.Decoded {
			t.Fatalf("decap %+v, cut headers %d, but %d decoded", s.Decap, s.CutHeaders, s.Decoded)
		}
	})
}

func sumEtherTypes(s *Stats) uint64 {
	var n uint64
	s.EachEtherType(func(_ uint16, c uint64) { n += c })
	return n
}

// check decodes one frame and asserts the invariants.
func check(t *testing.T, d *Decoder, link LinkType, data []byte, wireLen int, now int64) {
	before := *d.Stats()
	p := flow.Packet{Time: now, Iface: 7}
	ok := d.Decode(link, data, wireLen, &p)
	s := d.Stats()
	dDec, dNon, dErr := s.Decoded-before.Decoded, s.NonIP-before.NonIP, s.TotalErrors()-before.TotalErrors()
	if s.Frames != before.Frames+1 || dDec+dNon+dErr != 1 || s.Frames != s.Decoded+s.NonIP+s.TotalErrors() {
		t.Fatalf("frame not counted exactly once: decoded+%d nonIP+%d errors+%d", dDec, dNon, dErr)
	}
	if ok != (dDec == 1) {
		t.Fatalf("Decode = %v but decoded+%d", ok, dDec)
	}
	if p.Time != now || p.Iface != 7 {
		t.Fatalf("Decode touched Time/Iface: %+v", p)
	}
	if o := d.Outer(); o != nil && (!ok || (o.IPVersion != 4 && o.IPVersion != 6) || int(o.Tunnel) >= NumTunnels) {
		t.Fatalf("Outer() = %+v after Decode = %v", o, ok)
	}
	if !ok {
		return
	}
	k := p.Key
	switch k.IPVersion {
	case 4:
		if p.Length < 20 {
			t.Fatalf("IPv4 length %d", p.Length)
		}
		for _, a := range [][16]byte{k.SrcAddr, k.DstAddr} {
			if a[10] != 0xff || a[11] != 0xff || a[0]|a[1]|a[2]|a[3]|a[4]|a[5]|a[6]|a[7]|a[8]|a[9] != 0 {
				t.Fatalf("IPv4 address not IPv4-mapped: %x", a)
			}
		}
	case 6:
		if p.Length < 40 {
			t.Fatalf("IPv6 length %d", p.Length)
		}
	default:
		t.Fatalf("IPVersion %d", k.IPVersion)
	}
	if wireLen > 0 && int64(p.Length) > int64(max(wireLen, len(data))) {
		t.Fatalf("length %d exceeds wire length %d", p.Length, wireLen)
	}
	switch k.Proto {
	case 6, 17, 33, 132, 136:
	default:
		if k.SrcPort|k.DstPort != 0 {
			t.Fatalf("ports on protocol %d", k.Proto)
		}
	}
	if k.Proto != 1 && k.Proto != 58 && k.ICMPType|k.ICMPCode != 0 {
		t.Fatalf("ICMP fields on protocol %d", k.Proto)
	}
	if k.Proto != 6 && p.TCPFlags != 0 {
		t.Fatalf("TCP flags on protocol %d", k.Proto)
	}
	if p.Role > flow.RoleResponder || (p.Role != flow.RoleUnknown && k.Proto != 6 && k.Proto != 1 && k.Proto != 58) {
		t.Fatalf("role %d on protocol %d", p.Role, k.Proto)
	}
}
