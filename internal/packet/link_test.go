package packet

import (
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// linkCases: the link types and encapsulations beyond Ethernet, cooked
// captures and raw IP. They join okCases, so every one is also cut at
// every length (TestDecodeTruncated) and seeds the fuzzer.
func linkCases() []okCase {
	udp4 := func(f *fb) *fb { return f.ipv4(v4{src: a4, dst: b4, proto: 17}).udp(1, 2).payload(10).done() }
	tcp6 := func(f *fb) *fb { return f.ipv6(a6, b6, 6).tcp(3, 4, 0x02).done() }
	want4 := pk(key(a4, b4, 17, 1, 2), 20+8+10, 0, unk)
	want6 := pk(key(a6, b6, 6, 3, 4), 40+20, 0x02, ini)
	return []okCase{
		// BSD loopback: either byte order, the three IPv6 families.
		{name: "null-le-ipv4", f: udp4(newFrame(LinkNull).null(2, false)), want: want4},
		{name: "null-be-ipv4", f: udp4(newFrame(LinkNull).null(2, true)), want: want4},
		{name: "null-ipv6-24", f: tcp6(newFrame(LinkNull).null(24, false)), want: want6},
		{name: "null-ipv6-28", f: tcp6(newFrame(LinkNull).null(28, false)), want: want6},
		{name: "null-ipv6-30", f: tcp6(newFrame(LinkNull).null(30, false)), want: want6},
		{name: "loop-ipv4", f: udp4(newFrame(LinkLoop).null(2, true)), want: want4},
		{name: "null-ethertype-ipv6", f: tcp6(newFrame(LinkNull).null(0x86dd, false)), want: want6},
		{name: "null-bsdos-ppp", f: udp4(newFrame(LinkNull).ppp(0x0021, true, false)), want: want4},
		{name: "loop-ipv6-24", f: tcp6(newFrame(LinkLoop).null(24, true)), want: want6},
		// NFLOG: family, TLVs in either order, a bridged packet by its hw_protocol.
		{name: "nflog-ipv4-le", f: udp4(newFrame(LinkNFLOG).nflog(2, 0x0800, true)), want: want4},
		{name: "nflog-ipv6-be", f: tcp6(newFrame(LinkNFLOG).nflog(10, 0x86dd, false)), want: want6},
		{name: "nflog-ipv4-no-packet-hdr", f: udp4(newFrame(LinkNFLOG).nflog(2, 0, true)), want: want4},
		{name: "nflog-bridge-ipv6", f: tcp6(newFrame(LinkNFLOG).nflog(7, 0x86dd, true)), want: want6},
		// PPP: with and without address/control, compressed protocol.
		{name: "ppp-hdlc-ipv4", f: udp4(newFrame(LinkPPP).ppp(0x0021, true, false)), want: want4},
		{name: "ppp-bare-ipv6", f: tcp6(newFrame(LinkPPP).ppp(0x0057, false, false)), want: want6},
		{name: "ppp-compressed-ipv4", f: udp4(newFrame(LinkPPP).ppp(0x0021, false, true)), want: want4},
		{name: "ppp-hdlc-compressed-ipv6", f: tcp6(newFrame(LinkPPPHDLC).ppp(0x0057, true, true)), want: want6},
		{name: "ppp-hdlc-ipv4", f: udp4(newFrame(LinkPPPHDLC).ppp(0x0021, true, false)), want: want4},
		{name: "ppp-mpls-ipv4", f: udp4(newFrame(LinkPPP).ppp(0x0281, true, false).mpls(100)), want: want4},
		{name: "ppp-hdlc-cisco-ipv6", f: tcp6(newFrame(LinkPPPHDLC).chdlc(0x86dd)), want: want6},
		{name: "chdlc-ipv4", f: udp4(newFrame(LinkCHDLC).chdlc(0x0800)), want: want4},
		// Cooked captures of other ARPHRD types: the protocol is an ethertype.
		{name: "sll-ppp-ipv4", f: udp4(newFrame(LinkSLL).sllh(512, 0x0800)), want: want4},
		{name: "sll-none-ipv6", f: tcp6(newFrame(LinkSLL).sllh(0xfffe, 0x86dd)), want: want6},
		{name: "sll-ipgre-ipv4", f: udp4(newFrame(LinkSLL).sllh(778, 0x0800)), want: want4},
		{name: "sll-ipgre-bridged", f: udp4(newFrame(LinkSLL).sllh(778, 0x6558).innerEth(0x0800, ReasonTruncatedLink)), want: want4},
		{name: "sll-tunnel6-ipv6", f: tcp6(newFrame(LinkSLL).sllh(769, 0x86dd)), want: want6},
		{name: "sll-ppphdlc", f: udp4(newFrame(LinkSLL).sllh(512, 0x0007).ppp(0x0021, true, false)), want: want4},
		{name: "sll2-ppp-ipv6", f: tcp6(newFrame(LinkSLL2).sll2h(512, 0x86dd)), want: want6},
		{name: "sll2-ipip-ipv4", f: udp4(newFrame(LinkSLL2).sll2h(768, 0x0800)), want: want4},
		{name: "ppp-ether-ipv6", f: tcp6(newFrame(LinkPPPoE).pppoe(0x0057)), want: want6},
		// PPPoE sessions, after VLAN tags too.
		{name: "pppoe-ipv4", f: udp4(eth().eth(0x8864).pppoe(0x0021)), want: want4},
		{name: "pppoe-ipv6", f: tcp6(eth().eth(0x8864).pppoe(0x0057)), want: want6},
		{name: "vlan-pppoe-ipv4", f: udp4(eth().eth(0x8100).vlan(300, 0x8864).pppoe(0x0021)), want: tagged(want4, 300)},
		{name: "qinq-pppoe-ipv6", f: tcp6(eth().eth(0x88a8).vlan(10, 0x8100).vlan(20, 0x8864).pppoe(0x0057)), want: tagged(want6, 10)},
		{name: "pppoe-mpls-ipv6", f: tcp6(eth().eth(0x8864).pppoe(0x0281).mpls(16)), want: want6},
		// MPLS: stacks, multicast, explicit null, pseudowires.
		{name: "mpls-ipv4", f: udp4(eth().eth(0x8847).mpls(1000)), want: want4},
		{name: "mpls-stack-ipv6", f: tcp6(eth().eth(0x8847).mpls(16, 17, 18, 19, 2)), want: want6},
		{name: "mpls-multicast-ipv4", f: udp4(eth().eth(0x8848).mpls(500, 0)), want: want4},
		{name: "vlan-mpls-ipv4", f: udp4(eth().eth(0x8100).vlan(9, 0x8847).mpls(1000)), want: tagged(want4, 9)},
		{name: "mpls-16-labels", f: udp4(eth().eth(0x8847).mpls(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)), want: want4},
		{name: "mpls-pw-ipv4", f: udp4(eth().eth(0x8847).mpls(100, 200).pw(0x0800)), want: want4},
		{name: "mpls-pw-vlan-ipv6", f: tcp6(eth().eth(0x8847).mpls(100).pw(0x8100).vlan(77, 0x86dd)), want: want6},
		{name: "mpls-pw-no-cw-ipv4", f: udp4(eth().eth(0x8847).mpls(100).pwNoCW(0x0800)), want: want4},
		{name: "mpls-pw-no-cw-vlan-ipv6", f: tcp6(eth().eth(0x8847).mpls(100, 7).pwNoCW(0x8100).vlan(4, 0x86dd)), want: want6},
		{name: "vlan-mpls-pw-vlan-ipv4", f: udp4(eth().eth(0x8100).vlan(5, 0x8847).mpls(100).pw(0x8100).vlan(77, 0x0800)), want: tagged(want4, 5)},
	}
}

// linkBadCases: malformed frames of the new link types and encapsulations.
func linkBadCases() []badCase {
	udp4 := func(f *fb) *fb { return f.ipv4(v4{src: a4, dst: b4, proto: 17}).udp(1, 2).done() }
	return []badCase{
		{"null-short", newFrame(LinkNull).plain(2, 0, 0), 0, ReasonTruncatedLink},
		{"null-ipv6-family-ipv4-packet", newFrame(LinkNull).null(30, false).ipv4(v4{src: a4, dst: b4, proto: 17}).udp(1, 2).payload(20).done(), 0, ReasonBadIPVersion},
		{"ppp-empty", newFrame(LinkPPP).plain(0xff, 0x03), 0, ReasonTruncatedLink},
		{"ppp-protocol-cut", newFrame(LinkPPP).plain(0xff, 0x03, 0x00), 0, ReasonTruncatedLink},
		{"chdlc-short", newFrame(LinkCHDLC).plain(0x0f, 0, 8), 0, ReasonTruncatedLink},
		{"nflog-version-1", newFrame(LinkNFLOG).plain(2, 1, 0, 0, 8, 0, 1, 0, 8, 0, 0, 0), 0, ReasonBadNFLOG},
		{"nflog-tlv-length-3", newFrame(LinkNFLOG).plain(2, 0, 0, 0, 3, 0, 9, 0, 0x45, 0, 0, 0), 0, ReasonBadNFLOG},
		{"nflog-tlv-past-frame", newFrame(LinkNFLOG).plain(2, 0, 0, 0, 40, 0, 10, 0, 'x', 0, 0, 0), 0, ReasonBadNFLOG},
		{"nflog-payload-past-frame", udp4(newFrame(LinkNFLOG).plain(2, 0, 0, 0, 100, 0, 9, 0)), 0, ReasonBadNFLOG},
		{"nflog-no-payload", newFrame(LinkNFLOG).plain(2, 0, 0, 0, 8, 0, 1, 0, 8, 0, 3, 0), 0, ReasonNFLOGNoPayload},
		{"nflog-cut-before-payload", newFrame(LinkNFLOG).plain(2, 0, 0, 0, 8, 0, 1, 0, 8, 0, 3, 0), 100, ReasonTruncatedLink},
		{"pppoe-bad-version", udp4(eth().eth(0x8864).plain(0x21, 0, 0, 1, 0, 30, 0, 0x21)), 0, ReasonBadPPPoE},
		{"pppoe-discovery-code", udp4(eth().eth(0x8864).plain(0x11, 0x09, 0, 1, 0, 30, 0, 0x21)), 0, ReasonBadPPPoE},
		{"pppoe-ipv4-type-ipv6-packet", eth().eth(0x8864).pppoe(0x0021).ipv6(a6, b6, 17).udp(1, 2).done(), 0, ReasonBadIPVersion},
		{"mpls-17-labels", udp4(eth().eth(0x8847).mpls(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17)), 0, ReasonTooManyMPLSLabels},
		{"mpls-no-bottom", eth().eth(0x8847).plain(0, 1, 0, 64, 0, 1, 0, 64), 0, ReasonTruncatedMPLS},
		{"mpls-bottom-only", eth().eth(0x8847).plain(0, 1, 1, 64), 0, ReasonTruncatedMPLS},
		{"mpls-pw-cut", eth().eth(0x8847).plain(0, 1, 1, 64, 0, 0, 0, 0, 2, 0, 0), 0, ReasonTruncatedMPLS},
		{"mpls-pw-nested-too-deep", udp4(eth().eth(0x8847).mpls(1).pw(0x8847).mpls(2).pw(0x8847).mpls(3).pw(0x8847).mpls(4).pw(0x0800)), 0, ReasonTooManyEncapsulations},
	}
}

// TestNonIPLinks: non-IP frames of the new link types and encapsulations
// are counted, not errors: by the ethertype that carries them (PPP control
// protocols under PPPoE's or PPP's), or as link_other when there is none.
func TestNonIPLinks(t *testing.T) {
	frames := []*fb{
		eth().eth(0x8864).pppoe(0xc021).payload(10),                   // PPPoE LCP
		eth().eth(0x8100).vlan(1, 0x8864).pppoe(0x8021).payload(10),   // tagged PPPoE IPCP
		eth().eth(0x8847).mpls(13).plain(0x10, 0, 0, 0),               // MPLS associated channel (G-ACh)
		eth().eth(0x8847).mpls(100).pw(0x0806).payload(28),            // ARP over an Ethernet pseudowire
		newFrame(LinkPPP).ppp(0xc021, true, false).payload(8),         // LCP
		newFrame(LinkNull).null(7, false).payload(20),                 // AF_ISO
		newFrame(LinkLoop).null(7, true).payload(20),                  // AF_ISO
		newFrame(LinkSLL).sllh(824, 0x0010).payload(20),               // nlmon: generic netlink
		newFrame(LinkNFLOG).nflog(7, 0x0806, true).payload(28).done(), // a bridged ARP
		newFrame(LinkNFLOG).nflog(7, 0, true).payload(28).done(),      // bridge family, no hw_protocol
		newFrame(LinkCHDLC).chdlc(0x8035).payload(20),                 // SLARP
	}
	d := NewDecoder(Config{})
	for i, f := range frames {
		var p flow.Packet
		if d.Decode(f.link, f.b, len(f.b), &p) {
			t.Fatalf("frame %d decoded as IP: %+v", i, p)
		}
	}
	s := d.Stats()
	if s.Frames != 11 || s.NonIP != 11 || s.LinkOther != 4 || s.LLC != 0 || s.TotalErrors() != 0 {
		t.Fatalf("stats %+v", *s)
	}
	var names []string
	s.EachNonIP(func(name string, n uint64) { names = append(names, name+"="+itoa(int(n))) })
	if got, want := join(names), "link_other=4 pppoe_session=2 mpls=1 arp=2 ppp=1 rarp=1"; got != want {
		t.Fatalf("EachNonIP %q, want %q", got, want)
	}
}
