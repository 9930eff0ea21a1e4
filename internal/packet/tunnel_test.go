package packet

import (
	"net/netip"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// Outer (tunnel endpoint) addresses.
const (
	o4a = "203.0.113.1"
	o4b = "203.0.113.2"
	o6a = "2001:db8:ffff::1"
	o6b = "2001:db8:ffff::2"
)

// tunnelCase is a tunnel packet: keyed by outer with no --decap (or the
// wrong one), by inner with kind enabled.
type tunnelCase struct {
	name         string
	f            *fb
	kind         Tunnel
	outer, inner flow.Packet
	osrc, odst   string
}

func tunnelCases() []tunnelCase {
	in4 := func(f *fb) *fb {
		return f.ipv4(v4{src: a4, dst: b4, proto: 6}).tcp(40000, 443, 0x02).payload(100).done()
	}
	in6 := func(f *fb) *fb { return f.ipv6(a6, b6, 17).udp(5353, 53).payload(30).done() }
	inner4 := pk(key(a4, b4, 6, 40000, 443), 20+20+100, 0x02, ini)
	inner6 := pk(key(a6, b6, 17, 5353, 53), 40+8+30, 0, unk)
	o4 := func(proto uint8) *fb { return eth().eth(0x0800).ipv4(v4{src: o4a, dst: o4b, proto: proto}) }
	o6 := func(nh uint8) *fb { return eth().eth(0x86dd).ipv6(o6a, o6b, nh) }
	const eth4, eth6 = 14 + 20 + 20 + 100, 14 + 40 + 8 + 30 // inner Ethernet frames
	return []tunnelCase{
		{"vxlan-ipv4-in-ipv4", in4(o4(17).vxlan(51000, 4789).innerEth(0x0800, ReasonTruncatedLink)), TunnelVXLAN,
			pk(key(o4a, o4b, 17, 51000, 4789), 20+8+8+eth4, 0, unk), inner4, o4a, o4b},
		{"vxlan-8472-ipv6-in-ipv4", in6(o4(17).vxlan(51000, 8472).innerEth(0x86dd, ReasonTruncatedLink)), TunnelVXLAN,
			pk(key(o4a, o4b, 17, 51000, 8472), 20+8+8+eth6, 0, unk), inner6, o4a, o4b},
		{"vxlan-vlan-ipv4-in-ipv6", in4(o6(17).vxlan(51000, 4789).innerEth(0x8100, ReasonTruncatedLink).vlan(7, 0x0800)), TunnelVXLAN,
			pk(key(o6a, o6b, 17, 51000, 4789), 40+8+8+4+eth4, 0, unk), inner4, o6a, o6b},
		{"geneve-ethernet", in4(o4(17).geneve(52000, 0x6558, 0).innerEth(0x0800, ReasonTruncatedLink)), TunnelGeneve,
			pk(key(o4a, o4b, 17, 52000, 6081), 20+8+8+eth4, 0, unk), inner4, o4a, o4b},
		{"geneve-options-ipv6", in6(o6(17).geneve(52000, 0x86dd, 12)), TunnelGeneve,
			pk(key(o6a, o6b, 17, 52000, 6081), 40+8+8+12+40+8+30, 0, unk), inner6, o6a, o6b},
		{"gre-ipv4", in4(o4(47).gre(0, 0x0800)), TunnelGRE,
			pk(key(o4a, o4b, 47, 0, 0), 20+4+140, 0, unk), inner4, o4a, o4b},
		{"gre-csum-key-seq-ipv6", in6(o4(47).gre(0xb000, 0x86dd)), TunnelGRE,
			pk(key(o4a, o4b, 47, 0, 0), 20+16+78, 0, unk), inner6, o4a, o4b},
		{"gre-bridged-in-ipv6", in4(o6(47).gre(0x2000, 0x6558).innerEth(0x0800, ReasonTruncatedLink)), TunnelGRE,
			pk(key(o6a, o6b, 47, 0, 0), 40+8+eth4, 0, unk), inner4, o6a, o6b},
		{"gre-mpls", in4(o4(47).gre(0, 0x8847).mpls(30)), TunnelGRE,
			pk(key(o4a, o4b, 47, 0, 0), 20+4+4+140, 0, unk), inner4, o4a, o4b},
		{"ipip", in4(o4(4)), TunnelIPIP, pk(key(o4a, o4b, 4, 0, 0), 20+140, 0, unk), inner4, o4a, o4b},
		{"ipv6-in-ipv4", in6(o4(41)), TunnelIPIP, pk(key(o4a, o4b, 41, 0, 0), 20+78, 0, unk), inner6, o4a, o4b},
		{"ipv4-in-ipv6", in4(o6(4)), TunnelIPIP, pk(key(o6a, o6b, 4, 0, 0), 40+140, 0, unk), inner4, o6a, o6b},
		{"ipv6-in-ipv6-after-dstopts", in6(o6(60).ext(41, 8)), TunnelIPIP, pk(key(o6a, o6b, 41, 0, 0), 40+8+78, 0, unk), inner6, o6a, o6b},
		{"vlan-ipip", in4(eth().eth(0x8100).vlan(12, 0x0800).ipv4(v4{src: o4a, dst: o4b, proto: 4})), TunnelIPIP,
			tagged(pk(key(o4a, o4b, 4, 0, 0), 20+140, 0, unk), 12), tagged(inner4, 12), o4a, o4b},
	}
}

func addrOf(s string) [16]byte { return netip.MustParseAddr(s).As16() }

// TestTunnels: each tunnel is keyed by its outer header without --decap
// and with every other kind enabled, by its inner packet (inner IP length,
// outer VLAN) with its kind, and Outer() names the outer endpoints.
func TestTunnels(t *testing.T) {
	for _, c := range tunnelCases() {
		t.Run(c.name, func(t *testing.T) {
			for _, decap := range []Decap{0, DecapAll &^ (1 << c.kind), 1 << c.kind, DecapAll} {
				d := NewDecoder(Config{Decap: decap})
				p := flow.Packet{Time: 9, Iface: 2}
				if !d.Decode(c.f.link, c.f.b, len(c.f.b), &p) {
					t.Fatalf("decap %v: Decode = false, errors %v", decap, d.Stats().Errors)
				}
				want, o := c.outer, d.Outer()
				on := decap.Has(c.kind)
				if on {
					want = c.inner
					if o == nil || o.Tunnel != c.kind || o.SrcAddr != addrOf(c.osrc) || o.DstAddr != addrOf(c.odst) ||
						o.IPVersion != c.outer.Key.IPVersion {
						t.Fatalf("decap %v: Outer() = %+v", decap, o)
					}
				} else if o != nil {
					t.Fatalf("decap %v: Outer() = %+v, want nil", decap, o)
				}
				want.Time, want.Iface = 9, 2
				if p != want {
					t.Fatalf("decap %v:\ngot  %+v\nwant %+v", decap, p, want)
				}
				s := d.Stats()
				var in uint64
				if on {
					in = 1
				}
				if s.Decap.Inner[c.kind] != in || s.Decap.Outer[c.kind] != 0 || s.Decoded != 1 || s.Frames != 1 || s.IPv4+s.IPv6 != 1 {
					t.Fatalf("decap %v: stats %+v", decap, *s)
				}
				if (want.Key.IPVersion == 4) != (s.IPv4 == 1) {
					t.Fatalf("decap %v: counted the wrong IP version: %+v", decap, *s)
				}
				// The next packet, not a tunnel, must not report an outer header.
				f := eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 17}).udp(1, 2).done()
				if !d.Decode(f.link, f.b, len(f.b), &p) || d.Outer() != nil {
					t.Fatalf("decap %v: a plain packet after a tunnel: Outer() = %+v", decap, d.Outer())
				}
			}
		})
	}
}

// TestTunnelCut cuts every tunnel frame at every length with its kind
// enabled: a prefix holding the inner packet's headers decodes as the whole
// frame, any other gives exactly what it gives without --decap (outer key,
// or the same error); Outer() is set only in the first case, and a tunnel
// left to its outer header is counted in Decap.Outer.
func TestTunnelCut(t *testing.T) {
	for _, c := range tunnelCases() {
		t.Run(c.name, func(t *testing.T) {
			for n := 0; n <= len(c.f.b); n++ {
				d := NewDecoder(Config{Decap: 1 << c.kind})
				ref := NewDecoder(Config{})
				var p, q flow.Packet
				ok := d.Decode(c.f.link, c.f.b[:n:n], len(c.f.b), &p)
				rok := ref.Decode(c.f.link, c.f.b[:n:n], len(c.f.b), &q)
				s, rs := d.Stats(), ref.Stats()
				if n >= c.f.need() {
					if !ok || p != c.inner || d.Outer() == nil {
						t.Fatalf("prefix %d: ok=%v %+v, want the inner %+v", n, ok, p, c.inner)
					}
					continue
				}
				if ok != rok || p != q || d.Outer() != nil || s.Errors != rs.Errors || s.NonIP != rs.NonIP {
					t.Fatalf("prefix %d: ok=%v %+v errors %v, without decap ok=%v %+v errors %v", n, ok, p, s.Errors, rok, q, rs.Errors)
				}
				var outer uint64
				if ok && q.Key == c.outer.Key { // recognised as a tunnel, left to its outer header
					outer = 1
				}
				if s.Decap.Outer[c.kind] != outer || s.Decap.Inner[c.kind] != 0 {
					t.Fatalf("prefix %d: decap stats %+v", n, s.Decap)
				}
			}
		})
	}
}

// TestTunnelFallback: tunnels weir does not take apart, or whose inside is
// not IP or is malformed, are keyed by the outer header and counted in
// Decap.Outer, never as errors or non-IP; fragmented tunnel packets are
// keyed by the outer header, counted once.
func TestTunnelFallback(t *testing.T) {
	o4 := func(proto uint8) *fb { return eth().eth(0x0800).ipv4(v4{src: o4a, dst: o4b, proto: proto}) }
	in4 := func(f *fb) *fb { return f.ipv4(v4{src: a4, dst: b4, proto: 6}).tcp(1, 2, 0x10).done() }
	cases := []struct {
		name string
		f    *fb
		kind Tunnel
		want flow.Key
	}{
		{"vxlan-arp", o4(17).vxlan(1, 4789).innerEth(0x0806, ReasonTruncatedLink).payload(28).done(), TunnelVXLAN, key(o4a, o4b, 17, 1, 4789)},
		{"vxlan-no-i-flag", in4(o4(17).udp(1, 4789).plain(0, 0, 0, 0, 0, 0, 1, 0).innerEth(0x0800, ReasonTruncatedLink)), TunnelVXLAN, key(o4a, o4b, 17, 1, 4789)},
		{"geneve-version-1", in4(o4(17).udp(1, 6081).plain(0x40, 0, 0x08, 0, 0, 0, 1, 0)), TunnelGeneve, key(o4a, o4b, 17, 1, 6081)},
		{"gre-version-1-pptp", in4(o4(47).gre(0x2001, 0x880b)), TunnelGRE, key(o4a, o4b, 47, 0, 0)},
		{"gre-routing", in4(o4(47).gre(0x4000, 0x0800)), TunnelGRE, key(o4a, o4b, 47, 0, 0)},
		{"gre-erspan", in4(o4(47).gre(0x1000, 0x88be).plain(0x10, 0, 0, 1, 0, 0, 0, 0).innerEth(0x0800, ReasonTruncatedLink)), TunnelGRE, key(o4a, o4b, 47, 0, 0)},
		{"ipip-bad-version", o4(4).ipv6(a6, b6, 17).udp(1, 2).done(), TunnelIPIP, key(o4a, o4b, 4, 0, 0)},
		{"ipip-inner-longer-than-outer", o4(4).ipv4(v4{src: a4, dst: b4, proto: 17, tl: 1000, fixTL: true}).udp(1, 2).done(), TunnelIPIP, key(o4a, o4b, 4, 0, 0)},
		{"ipip-inner-zero-length-icmp", o4(4).ipv4(v4{src: a4, dst: b4, proto: 1, fixTL: true}).icmp(8, 0).done(), TunnelIPIP, key(o4a, o4b, 4, 0, 0)},
		{"vxlan-in-vxlan-is-not-opened-twice", o4(17).vxlan(1, 4789).innerEth(0x0800, ReasonTruncatedLink).ipv4(v4{src: o4b, dst: o4a, proto: 17}).vxlan(2, 4789).
			innerEth(0x0800, ReasonTruncatedLink).ipv4(v4{src: a4, dst: b4, proto: 6}).tcp(1, 2, 0x10).done(), TunnelVXLAN, key(o4b, o4a, 17, 2, 4789)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := NewDecoder(Config{Decap: DecapAll})
			var p flow.Packet
			if !d.Decode(c.f.link, c.f.b, len(c.f.b), &p) || p.Key != c.want {
				t.Fatalf("got %+v, want key %+v", p, c.want)
			}
			s := d.Stats()
			wantOuter, wantInner := uint64(1), uint64(0)
			if c.name == "vxlan-in-vxlan-is-not-opened-twice" {
				wantOuter, wantInner = 0, 1
			}
			if s.Decap.Outer[c.kind] != wantOuter || s.Decap.Inner[c.kind] != wantInner || s.NonIP != 0 || s.TotalErrors() != 0 || s.Decoded != 1 {
				t.Fatalf("stats %+v", *s)
			}
		})
	}

	// A fragmented VXLAN packet: both fragments keyed by the outer header
	// (the later one attributed), counted once in Decap.Outer.
	d := NewDecoder(Config{Decap: DecapAll})
	first := eth().eth(0x0800).ipv4(v4{src: o4a, dst: o4b, proto: 17, id: 77, frag: 0x2000}).vxlan(1, 4789).
		innerEth(0x0800, ReasonTruncatedLink).ipv4(v4{src: a4, dst: b4, proto: 6}).tcp(1, 2, 0x10).payload(16).done()
	later := frag4(o4a, o4b, 17, 77, 9, false).payload(64).done()
	var p flow.Packet
	for i, f := range []*fb{first, later} {
		if !d.Decode(f.link, f.b, len(f.b), &p) || p.Key != key(o4a, o4b, 17, 1, 4789) || d.Outer() != nil {
			t.Fatalf("fragment %d: %+v", i, p)
		}
	}
	if s := d.Stats(); s.Decap.Outer[TunnelVXLAN] != 1 || s.Fragments.Attributed != 1 || s.Decap.Inner[TunnelVXLAN] != 0 {
		t.Fatalf("stats %+v", *s)
	}
}

func TestParseDecap(t *testing.T) {
	for in, want := range map[string]Decap{
		"": 0, "none": 0, "vxlan": 1, "geneve,gre": 6, " ipip , vxlan ": 9, "all": DecapAll, "vxlan,all": DecapAll,
	} {
		got, err := ParseDecap(in)
		if err != nil || got != want {
			t.Errorf("ParseDecap(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if DecapAll.String() != "vxlan,geneve,gre,ipip" || Decap(0).String() != "" {
		t.Errorf("String: %q %q", DecapAll.String(), Decap(0).String())
	}
	if _, err := ParseDecap("vxlan,gue\x1b[31m"); err == nil || err.Error() != `unknown tunnel "gue\x1b[31m": use vxlan, geneve, gre, ipip or all` {
		t.Errorf("ParseDecap error: %v", err)
	}
}
