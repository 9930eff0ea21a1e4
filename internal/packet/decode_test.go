package packet

import (
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// okCase is a frame that must decode into exactly want.
type okCase struct {
	name      string
	f         *fb
	wire      int // wire length: 0 means len(frame), -1 means unknown (pass 0)
	want      flow.Packet
	fromFrame bool // the IP length must come from the frame length
}

// tagged is p with the outermost VLAN ID the decoder must report.
func tagged(p flow.Packet, vlan uint16) flow.Packet { p.VLAN = vlan; return p }

func (c *okCase) wireLen() int {
	switch c.wire {
	case 0:
		return len(c.f.b)
	case -1:
		return 0
	}
	return c.wire
}

func eth() *fb { return newFrame(LinkEthernet) }
func pk(k flow.Key, length uint32, flags uint8, role flow.Role) flow.Packet {
	return flow.Packet{Key: k, Length: length, TCPFlags: flags, Role: role}
}

const (
	unk  = flow.RoleUnknown
	ini  = flow.RoleInitiator
	resp = flow.RoleResponder
)

func okCases() []okCase {
	recordRoute := append([]byte{7, 39, 4}, make([]byte, 37)...) // 39-byte option + EOL = 40 bytes
	cs := []okCase{
		// TCP flags and roles.
		{name: "eth-ipv4-tcp-syn", f: eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 6}).tcp(40000, 443, 0x02).done(),
			want: pk(key(a4, b4, 6, 40000, 443), 20+20, 0x02, ini)},
		{name: "eth-ipv4-tcp-synack", f: eth().eth(0x0800).ipv4(v4{src: b4, dst: a4, proto: 6}).tcp(443, 40000, 0x12).done(),
			want: pk(key(b4, a4, 6, 443, 40000), 20+20, 0x12, resp)},
		{name: "eth-ipv4-tcp-synack-ece-cwr", f: eth().eth(0x0800).ipv4(v4{src: b4, dst: a4, proto: 6}).tcp(443, 40000, 0xd2).done(),
			want: pk(key(b4, a4, 6, 443, 40000), 20+20, 0xd2, resp)},
		{name: "eth-ipv4-tcp-psh-ack", f: eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 6}).tcp(40000, 443, 0x18).payload(100).done(),
			want: pk(key(a4, b4, 6, 40000, 443), 20+20+100, 0x18, unk)},
		{name: "eth-ipv4-tcp-rst-ack", f: eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 6}).tcp(40000, 443, 0x14).done(),
			want: pk(key(a4, b4, 6, 40000, 443), 20+20, 0x14, unk)},
		{name: "eth-ipv4-udp-padded", f: eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 17}).udp(5353, 53).payload(4).done().plain(make([]byte, 14)...),
			want: pk(key(a4, b4, 17, 5353, 53), 20+8+4, 0, unk)},
		{name: "eth-ipv6-udp", f: eth().eth(0x86dd).ipv6(a6, b6, 17).udp(5353, 53).payload(20).done(),
			want: pk(key(a6, b6, 17, 5353, 53), 40+8+20, 0, unk)},
		// Link types.
		{name: "sll-ipv4-tcp", f: newFrame(LinkSLL).sll(0x0800).ipv4(v4{src: a4, dst: b4, proto: 6}).tcp(1, 2, 0x11).done(),
			want: pk(key(a4, b4, 6, 1, 2), 40, 0x11, unk)},
		{name: "sll-vlan-ipv4-udp", f: newFrame(LinkSLL).sll(0x8100).vlan(7, 0x0800).ipv4(v4{src: a4, dst: b4, proto: 17}).udp(1, 2).done(),
			want: tagged(pk(key(a4, b4, 17, 1, 2), 28, 0, unk), 7)},
		{name: "sll2-ipv4-tcp", f: newFrame(LinkSLL2).sll2(0x0800).ipv4(v4{src: a4, dst: b4, proto: 6}).tcp(1, 2, 0x02).payload(8).done(),
			want: pk(key(a4, b4, 6, 1, 2), 48, 0x02, ini)},
		{name: "sll2-ipv6-tcp", f: newFrame(LinkSLL2).sll2(0x86dd).ipv6(a6, b6, 6).tcp(1, 2, 0x12).done(),
			want: pk(key(a6, b6, 6, 1, 2), 60, 0x12, resp)},
		{name: "raw-ipv4-udp", f: newFrame(LinkRaw).ipv4(v4{src: a4, dst: b4, proto: 17}).udp(9, 10).done(),
			want: pk(key(a4, b4, 17, 9, 10), 28, 0, unk)},
		{name: "raw-ipv6-udp", f: newFrame(LinkRaw).ipv6(a6, b6, 17).udp(9, 10).done(),
			want: pk(key(a6, b6, 17, 9, 10), 48, 0, unk)},
		{name: "linkipv4-udp", f: newFrame(LinkIPv4).ipv4(v4{src: a4, dst: b4, proto: 17}).udp(9, 10).done(),
			want: pk(key(a4, b4, 17, 9, 10), 28, 0, unk)},
		{name: "linkipv6-udp", f: newFrame(LinkIPv6).ipv6(a6, b6, 17).udp(9, 10).done(),
			want: pk(key(a6, b6, 17, 9, 10), 48, 0, unk)},
		// VLAN tags.
		{name: "vlan-ipv4-udp", f: eth().eth(0x8100).vlan(100, 0x0800).ipv4(v4{src: a4, dst: b4, proto: 17}).udp(1, 2).done(),
			want: tagged(pk(key(a4, b4, 17, 1, 2), 28, 0, unk), 100)},
		{name: "vlan-pcp-dei", f: eth().eth(0x8100).vlan(7<<13|1<<12|100, 0x0800).ipv4(v4{src: a4, dst: b4, proto: 17}).udp(1, 2).done(),
			want: tagged(pk(key(a4, b4, 17, 1, 2), 28, 0, unk), 100)},
		{name: "qinq-88a8-ipv4-udp", f: eth().eth(0x88a8).vlan(10, 0x8100).vlan(20, 0x0800).ipv4(v4{src: a4, dst: b4, proto: 17}).udp(1, 2).done(),
			want: tagged(pk(key(a4, b4, 17, 1, 2), 28, 0, unk), 10)},
		{name: "qinq-9100-ipv6-tcp", f: eth().eth(0x9100).vlan(10, 0x8100).vlan(20, 0x86dd).ipv6(a6, b6, 6).tcp(1, 2, 0x10).done(),
			want: tagged(pk(key(a6, b6, 6, 1, 2), 60, 0x10, unk), 10)},
		{name: "vlan-8-tags", f: eth().eth(0x8100).vlans(8, 0x0800).ipv4(v4{src: a4, dst: b4, proto: 17}).udp(1, 2).done(),
			want: tagged(pk(key(a4, b4, 17, 1, 2), 28, 0, unk), 100)},
		// IPv4 options.
		{name: "ipv4-options-4", f: eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 6, opts: []byte{1, 1, 1, 0}}).tcp(1, 2, 0x10).done(),
			want: pk(key(a4, b4, 6, 1, 2), 24+20, 0x10, unk)},
		{name: "ipv4-options-40", f: eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 17, opts: recordRoute}).udp(7, 8).payload(10).done(),
			want: pk(key(a4, b4, 17, 7, 8), 60+8+10, 0, unk)},
		// IPv6 extension headers.
		{name: "ipv6-hbh-tcp", f: eth().eth(0x86dd).ipv6(a6, b6, 0).ext(6, 8).tcp(1, 2, 0x02).done(),
			want: pk(key(a6, b6, 6, 1, 2), 40+8+20, 0x02, ini)},
		{name: "ipv6-routing-udp", f: eth().eth(0x86dd).ipv6(a6, b6, 43).ext(17, 24).udp(1, 2).done(),
			want: pk(key(a6, b6, 17, 1, 2), 40+24+8, 0, unk)},
		{name: "ipv6-dstopts-udp", f: eth().eth(0x86dd).ipv6(a6, b6, 60).ext(17, 16).udp(1, 2).done(),
			want: pk(key(a6, b6, 17, 1, 2), 40+16+8, 0, unk)},
		{name: "ipv6-ah-tcp", f: eth().eth(0x86dd).ipv6(a6, b6, 51).ah(6, 24).tcp(1, 2, 0x10).done(),
			want: pk(key(a6, b6, 6, 1, 2), 40+24+20, 0x10, unk)},
		{name: "ipv6-atomic-fragment-udp", f: eth().eth(0x86dd).ipv6(a6, b6, 44).frag6(17, 0, false, 99).udp(1, 2).done(),
			want: pk(key(a6, b6, 17, 1, 2), 40+8+8, 0, unk)},
		{name: "ipv6-mobility", f: eth().eth(0x86dd).ipv6(a6, b6, 135).ext(59, 16).done(),
			want: pk(key(a6, b6, 135, 0, 0), 40+16, 0, unk)},
		{name: "ipv6-hip", f: eth().eth(0x86dd).ipv6(a6, b6, 139).ext(59, 40).done(),
			want: pk(key(a6, b6, 139, 0, 0), 40+40, 0, unk)},
		{name: "ipv6-dstopts-shim6", f: eth().eth(0x86dd).ipv6(a6, b6, 60).ext(140, 8).ext(59, 16).done(),
			want: pk(key(a6, b6, 140, 0, 0), 40+8+16, 0, unk)},
		{name: "ipv6-shim6-payload-udp", f: eth().eth(0x86dd).ipv6(a6, b6, 140).ext(17, 8).udp(1, 2).done(),
			want: pk(key(a6, b6, 17, 1, 2), 40+8+8, 0, unk)},
		{name: "ipv6-hbh-esp", f: eth().eth(0x86dd).ipv6(a6, b6, 0).ext(50, 8).payload(40).done(),
			want: pk(key(a6, b6, 50, 0, 0), 40+8+40, 0, unk)},
		{name: "ipv6-no-next-padded", f: eth().eth(0x86dd).ipv6(a6, b6, 59).done().plain(make([]byte, 6)...),
			want: pk(key(a6, b6, 59, 0, 0), 40, 0, unk)},
		{name: "ipv6-chain", f: eth().eth(0x86dd).ipv6(a6, b6, 0).ext(60, 8).ext(43, 16).ext(44, 24).
			frag6(51, 0, false, 7).ah(60, 16).ext(6, 8).tcp(1, 2, 0x02).done(),
			want: pk(key(a6, b6, 6, 1, 2), 40+8+16+24+8+16+8+20, 0x02, ini)},
		{name: "ipv6-chain-8", f: eth().eth(0x86dd).ipv6(a6, b6, 60).ext(60, 8).ext(60, 8).ext(60, 8).ext(60, 8).
			ext(60, 8).ext(60, 8).ext(60, 8).ext(17, 8).udp(1, 2).done(),
			want: pk(key(a6, b6, 17, 1, 2), 40+8*8+8, 0, unk)},
		// Transports with ports, and without.
		{name: "ipv4-sctp", f: eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 132}).l4(2905, 2905, 12).done(),
			want: pk(key(a4, b4, 132, 2905, 2905), 20+12, 0, unk)},
		{name: "ipv6-sctp", f: eth().eth(0x86dd).ipv6(a6, b6, 132).l4(36412, 38412, 12).done(),
			want: pk(key(a6, b6, 132, 36412, 38412), 40+12, 0, unk)},
		{name: "ipv4-udplite", f: eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 136}).l4(1000, 2000, 8).done(),
			want: pk(key(a4, b4, 136, 1000, 2000), 28, 0, unk)},
		{name: "ipv6-udplite", f: eth().eth(0x86dd).ipv6(a6, b6, 136).l4(1000, 2000, 8).done(),
			want: pk(key(a6, b6, 136, 1000, 2000), 48, 0, unk)},
		{name: "ipv4-dccp", f: eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 33}).l4(5004, 5005, 16).done(),
			want: pk(key(a4, b4, 33, 5004, 5005), 36, 0, unk)},
		{name: "ipv6-dccp", f: eth().eth(0x86dd).ipv6(a6, b6, 33).l4(5004, 5005, 16).done(),
			want: pk(key(a6, b6, 33, 5004, 5005), 56, 0, unk)},
		{name: "ipv4-gre", f: eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 47}).payload(4).done(),
			want: pk(key(a4, b4, 47, 0, 0), 24, 0, unk)},
		{name: "ipv4-esp", f: eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 50}).payload(16).done(),
			want: pk(key(a4, b4, 50, 0, 0), 36, 0, unk)},
		{name: "ipv4-ospf", f: eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 89}).payload(24).done(),
			want: pk(key(a4, b4, 89, 0, 0), 44, 0, unk)},
		{name: "ipv4-first-fragment-udp", f: eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 17, id: 0x1234, frag: 0x2000}).udp(5000, 53).payload(1472).done(),
			want: pk(key(a4, b4, 17, 5000, 53), 1500, 0, unk)},
		// Lengths: jumbo, from the frame, unknown wire length.
		{name: "ipv6-jumbo", f: eth().eth(0x86dd).ipv6pl(a6, b6, 0, 0).jumbo(6, 70000).tcp(1, 2, 0x10), wire: 14 + 40 + 70000,
			want: pk(key(a6, b6, 6, 1, 2), 40+70000, 0x10, unk)},
		{name: "ipv4-length-from-frame", f: eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 6, fixTL: true}).tcp(1, 2, 0x10),
			wire: 14 + 20 + 20 + 64000, fromFrame: true, want: pk(key(a4, b4, 6, 1, 2), 20+20+64000, 0x10, unk)},
		{name: "ipv6-length-from-frame", f: eth().eth(0x86dd).ipv6pl(a6, b6, 17, 0).udp(1, 2), wire: 14 + 40 + 8 + 9000,
			fromFrame: true, want: pk(key(a6, b6, 17, 1, 2), 40+8+9000, 0, unk)},
		{name: "ipv4-snaplen-wire-unknown", f: eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 17, tl: 1500, fixTL: true}).udp(1, 2),
			wire: -1, want: pk(key(a4, b4, 17, 1, 2), 1500, 0, unk)},
		{name: "ipv4-snaplen", f: eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 17, tl: 1500, fixTL: true}).udp(1, 2),
			wire: 14 + 1500, want: pk(key(a4, b4, 17, 1, 2), 1500, 0, unk)},
	}
	cs = append(cs, linkCases()...)
	return append(cs, icmpCases()...)
}

// icmpCases: replies share their request's key type; only request/reply
// pairs carry a role.
func icmpCases() []okCase {
	mk4 := func(name, src, dst string, typ, code, keyType uint8, role flow.Role) okCase {
		return okCase{name: name, f: eth().eth(0x0800).ipv4(v4{src: src, dst: dst, proto: 1}).icmp(typ, code).payload(56).done(),
			want: pk(icmpKey(src, dst, 1, keyType, code), 20+8+56, 0, role)}
	}
	mk6 := func(name, src, dst string, typ, code, keyType uint8, role flow.Role) okCase {
		return okCase{name: name, f: eth().eth(0x86dd).ipv6(src, dst, 58).icmp(typ, code).payload(56).done(),
			want: pk(icmpKey(src, dst, 58, keyType, code), 40+8+56, 0, role)}
	}
	return []okCase{
		mk4("icmp-echo-request", a4, b4, 8, 0, 8, ini),
		mk4("icmp-echo-reply", b4, a4, 0, 0, 8, resp),
		mk4("icmp-timestamp", a4, b4, 13, 0, 13, ini),
		mk4("icmp-timestamp-reply", b4, a4, 14, 0, 13, resp),
		mk4("icmp-information", a4, b4, 15, 0, 15, ini),
		mk4("icmp-information-reply", b4, a4, 16, 0, 15, resp),
		mk4("icmp-mask", a4, b4, 17, 0, 17, ini),
		mk4("icmp-mask-reply", b4, a4, 18, 0, 17, resp),
		mk4("icmp-port-unreachable", b4, a4, 3, 3, 3, unk),
		mk4("icmp-time-exceeded", b4, a4, 11, 1, 11, unk),
		mk6("icmpv6-echo-request", a6, b6, 128, 0, 128, ini),
		mk6("icmpv6-echo-reply", b6, a6, 129, 0, 128, resp),
		mk6("icmpv6-node-info-query", a6, b6, 139, 1, 139, ini),
		mk6("icmpv6-node-info-reply", b6, a6, 140, 0, 139, resp),
		mk6("icmpv6-neighbor-solicitation", a6, b6, 135, 0, 135, unk),
		mk6("icmpv6-port-unreachable", b6, a6, 1, 4, 1, unk),
		mk6("icmpv6-type-0", b6, a6, 0, 0, 0, unk), // type 0 is reserved in ICMPv6: not an echo reply
	}
}

func TestDecodeOK(t *testing.T) {
	for _, c := range okCases() {
		t.Run(c.name, func(t *testing.T) {
			d := NewDecoder(Config{})
			p := flow.Packet{Time: 5, Iface: 3, Key: flow.Key{SrcPort: 999, ICMPType: 7}, TCPFlags: 0xff, Role: resp, VLAN: 4095}
			if !d.Decode(c.f.link, c.f.b, c.wireLen(), &p) {
				t.Fatalf("Decode = false; errors %v", d.Stats().Errors)
			}
			want := c.want
			want.Time, want.Iface = 5, 3
			if p != want {
				t.Errorf("got  %+v\nwant %+v", p, want)
			}
			s := d.Stats()
			var n4, n6 uint64 = 1, 0
			if want.Key.IPVersion == 6 {
				n4, n6 = 0, 1
			}
			var ff uint64
			if c.fromFrame {
				ff = 1
			}
			if s.Frames != 1 || s.Decoded != 1 || s.IPv4 != n4 || s.IPv6 != n6 || s.TotalErrors() != 0 || s.NonIP != 0 || s.IPLengthFromFrame != ff {
				t.Errorf("stats %+v", *s)
			}
		})
	}
}

// TestDecodeTruncated cuts every valid frame at every length: each prefix
// must decode exactly like the whole frame or fail with the reason of the
// header the cut falls in.
func TestDecodeTruncated(t *testing.T) {
	for _, c := range okCases() {
		t.Run(c.name, func(t *testing.T) {
			var full flow.Packet
			if !NewDecoder(Config{}).Decode(c.f.link, c.f.b, c.wireLen(), &full) {
				t.Fatal("full frame does not decode")
			}
			for n := 0; n < len(c.f.b); n++ {
				d := NewDecoder(Config{FragmentSlots: 4})
				var p flow.Packet
				ok := d.Decode(c.f.link, c.f.b[:n:n], c.wireLen(), &p)
				s := d.Stats()
				if n >= c.f.need() {
					if !ok || p != full {
						t.Fatalf("prefix %d: ok=%v %+v, want %+v", n, ok, p, full)
					}
					continue
				}
				want := c.f.cutAt(n)
				if want.portless {
					// The snap length cut the options or an extension
					// header: every byte still counts, without ports.
					w := full
					w.Key.SrcPort, w.Key.DstPort, w.Key.ICMPType, w.Key.ICMPCode = 0, 0, 0, 0
					w.Key.Proto, w.TCPFlags, w.Role = want.proto, 0, flow.RoleUnknown
					if !ok || p != w || s.CutHeaders != 1 || s.Decoded != 1 || s.TotalErrors() != 0 {
						t.Fatalf("prefix %d of %d: ok=%v %+v cut %d errors %v, want a portless %+v", n, len(c.f.b), ok, p, s.CutHeaders, s.Errors, w)
					}
					continue
				}
				if ok || s.Errors[want.reason] != 1 || s.TotalErrors() != 1 || s.Frames != 1 {
					t.Fatalf("prefix %d of %d: ok=%v errors=%v, want one %v", n, len(c.f.b), ok, s.Errors, want.reason)
				}
			}
			// The same prefixes as whole frames (wire length = capture): never
			// panic, and every frame lands in exactly one bucket.
			d := NewDecoder(Config{})
			for n := 0; n < len(c.f.b); n++ {
				var p flow.Packet
				d.Decode(c.f.link, c.f.b[:n:n], n, &p)
			}
			s := d.Stats()
			if s.Frames != uint64(len(c.f.b)) || s.Frames != s.Decoded+s.NonIP+s.TotalErrors() {
				t.Fatalf("stats do not add up: %+v", *s)
			}
		})
	}
}
