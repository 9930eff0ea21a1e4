package packet

import (
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// badCase is a frame that must be rejected under exactly one reason.
type badCase struct {
	name   string
	f      *fb
	wire   int // 0: len(frame)
	reason Reason
}

func badCases() []badCase {
	udp4 := func(h v4) *fb { return eth().eth(0x0800).ipv4(h).udp(1, 2).done() }
	return append(append(linkBadCases(), lengthBadCases()...), []badCase{
		{"unknown-link-type", newFrame(LinkType(147)).plain(make([]byte, 64)...), 0, ReasonUnknownLinkType},
		{"eth-short", eth().plain(make([]byte, 13)...), 0, ReasonTruncatedLink},
		{"eth-ipv4-type-ipv6-header", eth().eth(0x0800).ipv6(a6, b6, 17).udp(1, 2).done(), 0, ReasonBadIPVersion},
		{"eth-ipv6-type-ipv4-header", eth().eth(0x86dd).ipv4(v4{src: a4, dst: b4, proto: 17}).udp(1, 2).payload(20).done(), 0, ReasonBadIPVersion},
		{"raw-version-5", newFrame(LinkRaw).plain(append([]byte{0x55}, make([]byte, 40)...)...), 0, ReasonBadIPVersion},
		{"raw-version-0", newFrame(LinkRaw).plain(make([]byte, 40)...), 0, ReasonBadIPVersion},
		{"linkipv4-ipv6-packet", newFrame(LinkIPv4).ipv6(a6, b6, 17).udp(1, 2).done(), 0, ReasonBadIPVersion},
		{"linkipv6-ipv4-packet", newFrame(LinkIPv6).ipv4(v4{src: a4, dst: b4, proto: 17}).udp(1, 2).payload(20).done(), 0, ReasonBadIPVersion},
		{"ipv4-ihl-4", udp4(v4{src: a4, dst: b4, proto: 17, ihl: 4}), 0, ReasonBadIPv4HeaderLength},
		{"ipv4-ihl-0", udp4(v4{src: a4, dst: b4, proto: 17, ihl: 15 + 1}), 0, ReasonBadIPv4HeaderLength}, // 16 wraps to 0 in the nibble
		{"ipv4-ihl-15-total-28", udp4(v4{src: a4, dst: b4, proto: 17, ihl: 15}), 14 + 100, ReasonBadIPv4TotalLength},
		{"ipv4-ihl-15-from-frame-40", eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 6, ihl: 15, fixTL: true}).tcp(1, 2, 0x10), 0, ReasonTruncatedIPv4},
		{"ipv4-total-19", udp4(v4{src: a4, dst: b4, proto: 17, tl: 19, fixTL: true}), 0, ReasonBadIPv4TotalLength},
		{"ipv4-total-below-options", udp4(v4{src: a4, dst: b4, proto: 17, opts: []byte{1, 1, 1, 1}, tl: 23, fixTL: true}), 0, ReasonBadIPv4TotalLength},
		{"ipv4-total-exceeds-frame", udp4(v4{src: a4, dst: b4, proto: 17, tl: 1500, fixTL: true}), 0, ReasonIPLengthExceedsFrame},
		{"ipv4-total-exceeds-frame-by-1", udp4(v4{src: a4, dst: b4, proto: 17, tl: 29, fixTL: true}), 0, ReasonIPLengthExceedsFrame},
		{"ipv6-payload-exceeds-frame", eth().eth(0x86dd).ipv6pl(a6, b6, 17, 9).udp(1, 2), 0, ReasonIPLengthExceedsFrame},
		{"ipv6-jumbo-exceeds-frame", eth().eth(0x86dd).ipv6pl(a6, b6, 0, 0).jumbo(6, 70000).tcp(1, 2, 0x10), 14 + 40 + 69999, ReasonIPLengthExceedsFrame},
		{"vlan-9-tags", eth().eth(0x8100).vlans(9, 0x0800).ipv4(v4{src: a4, dst: b4, proto: 17}).udp(1, 2).done(), 0, ReasonTooManyVLANTags},
		{"ipv6-chain-9", eth().eth(0x86dd).ipv6(a6, b6, 60).ext(60, 8).ext(60, 8).ext(60, 8).ext(60, 8).
			ext(60, 8).ext(60, 8).ext(60, 8).ext(60, 8).ext(17, 8).udp(1, 2).done(), 0, ReasonIPv6ExtChainTooLong},
		{"ipv6-ext-exceeds-ip-length", eth().eth(0x86dd).ipv6pl(a6, b6, 60, 8).ext(17, 16).udp(1, 2), 0, ReasonHeaderExceedsIPLength},
		{"ipv6-ext-start-exceeds-ip-length", eth().eth(0x86dd).ipv6pl(a6, b6, 60, 1).ext(17, 8), 0, ReasonHeaderExceedsIPLength},
		{"ipv6-ah-exceeds-ip-length", eth().eth(0x86dd).ipv6(a6, b6, 51).plain(6, 255).payload(30).done(), 0, ReasonHeaderExceedsIPLength},
		{"ipv6-frag-exceeds-ip-length", eth().eth(0x86dd).ipv6pl(a6, b6, 44, 4).frag6(17, 1, false, 1), 0, ReasonHeaderExceedsIPLength},
		{"ipv4-tcp-exceeds-ip-length", eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 6, tl: 33, fixTL: true}).tcp(1, 2, 0x02), 0, ReasonHeaderExceedsIPLength},
		{"ipv4-udp-exceeds-ip-length", eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 17, tl: 23, fixTL: true}).udp(1, 2), 0, ReasonHeaderExceedsIPLength},
		{"ipv4-icmp-exceeds-ip-length", eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 1, tl: 21, fixTL: true}).icmp(8, 0), 0, ReasonHeaderExceedsIPLength},
		{"ipv6-tcp-exceeds-ip-length", eth().eth(0x86dd).ipv6pl(a6, b6, 6, 13).tcp(1, 2, 0x02), 0, ReasonHeaderExceedsIPLength},
		{"ipv4-first-fragment-too-short-for-tcp", eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 6, frag: 0x2000, tl: 28, fixTL: true}).tcp(1, 2, 0x02), 0, ReasonHeaderExceedsIPLength},
	}...)
}

func TestDecodeBad(t *testing.T) {
	for _, c := range badCases() {
		t.Run(c.name, func(t *testing.T) {
			d := NewDecoder(Config{})
			var p flow.Packet
			wire := c.wire
			if wire == 0 {
				wire = len(c.f.b)
			}
			if d.Decode(c.f.link, c.f.b, wire, &p) {
				t.Fatalf("Decode = true: %+v", p)
			}
			s := d.Stats()
			if s.Errors[c.reason] != 1 || s.TotalErrors() != 1 || s.Frames != 1 || s.Decoded != 0 || s.IPv4+s.IPv6 != 0 {
				t.Fatalf("errors %v, want one %v; stats %+v", s.Errors, c.reason, *s)
			}
			if s.Fragments != (FragmentStats{}) {
				t.Fatalf("fragment stats %+v", s.Fragments)
			}
		})
	}
}

// TestNonIP: non-IP frames are not errors; they are counted per ethertype.
func TestNonIP(t *testing.T) {
	frames := []*fb{
		eth().eth(0x0806).payload(28),                                 // ARP
		eth().eth(0x0806).payload(28),                                 // ARP again
		eth().eth(0x88cc).payload(40),                                 // LLDP
		eth().eth(0x0026).payload(38),                                 // 802.3 length field (STP over LLC)
		eth().eth(0x05dc).payload(1500),                               // 802.3, maximum length
		eth().eth(0x8100).vlan(5, 0x0806).payload(28),                 // tagged ARP
		eth().eth(0x88a8).vlan(5, 0x8100).vlan(6, 0x88cc),             // QinQ LLDP with no body
		newFrame(LinkSLL).sll(0x0004).payload(10),                     // SLL, 802.2 LLC
		newFrame(LinkSLL2).sll2(0x0806).payload(28),                   // SLL2 ARP
		newFrame(LinkSLL2).sll2(0x8864).pppoe(0xc021),                 // SLL2 PPPoE session, LCP
		newFrame(LinkSLL2).sll2(0x8100).vlan(1, 0x8864).pppoe(0xc023), // SLL2 tagged PPPoE session, PAP
		eth().eth(0x86dc).payload(40),                                 // one below IPv6
		eth().eth(0x0801).payload(40),                                 // one above IPv4
	}
	d := NewDecoder(Config{})
	for i, f := range frames {
		var p flow.Packet
		if d.Decode(f.link, f.b, len(f.b), &p) {
			t.Fatalf("frame %d decoded as IP", i)
		}
	}
	s := d.Stats()
	if s.Frames != 13 || s.NonIP != 13 || s.LLC != 3 || s.NonIPOther != 0 || s.TotalErrors() != 0 || s.Decoded != 0 {
		t.Fatalf("stats %+v", *s)
	}
	type et struct {
		t uint16
		n uint64
	}
	var got []et
	s.EachEtherType(func(t uint16, n uint64) { got = append(got, et{t, n}) })
	want := []et{{0x0806, 4}, {0x88cc, 2}, {0x8864, 2}, {0x86dc, 1}, {0x0801, 1}}
	if len(got) != len(want) {
		t.Fatalf("ethertypes %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ethertypes %v, want %v", got, want)
		}
	}
	var names []string
	s.EachNonIP(func(name string, n uint64) { names = append(names, name+"="+itoa(int(n))) })
	wantNames := "llc=3 arp=4 lldp=2 pppoe_session=2 0x86dc=1 0x0801=1"
	if j := join(names); j != wantNames {
		t.Fatalf("EachNonIP %q, want %q", j, wantNames)
	}
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}
