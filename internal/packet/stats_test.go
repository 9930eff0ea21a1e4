package packet

import (
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

func TestReasonNames(t *testing.T) {
	seen := map[string]bool{}
	for r := Reason(0); int(r) < NumReasons; r++ {
		n := r.String()
		if n == "" || strings.ToLower(n) != n || strings.ContainsAny(n, " -") || seen[n] {
			t.Errorf("reason %d: bad or duplicate name %q", r, n)
		}
		seen[n] = true
	}
	if got := Reason(NumReasons).String(); got != "reason_22" {
		t.Errorf("out of range: %q", got)
	}
	for r, want := range map[Reason]string{
		ReasonTruncatedLink: "truncated_link", ReasonUnknownLinkType: "unknown_link_type",
		ReasonTooManyVLANTags: "too_many_vlan_tags", ReasonTruncatedIPv4: "truncated_ipv4",
		ReasonBadIPv4HeaderLength: "bad_ipv4_header_length", ReasonBadIPVersion: "bad_ip_version",
		ReasonTruncatedIPv6: "truncated_ipv6", ReasonIPv6ExtTruncated: "ipv6_ext_truncated",
		ReasonIPv6ExtChainTooLong: "ipv6_ext_chain_too_long", ReasonTruncatedTransport: "truncated_transport",
		ReasonIPLengthExceedsFrame: "ip_length_exceeds_frame",
	} {
		if r.String() != want {
			t.Errorf("%d: %q, want %q", r, r.String(), want)
		}
	}
}

func TestEtherTypeOverflow(t *testing.T) {
	d := NewDecoder(Config{})
	var p flow.Packet
	for i := 0; i < maxEtherTypes+8; i++ { // 40 distinct ethertypes, each twice
		f := eth().eth(uint16(0x9000 + i)).payload(4)
		d.Decode(f.link, f.b, len(f.b), &p)
		d.Decode(f.link, f.b, len(f.b), &p)
	}
	s := d.Stats()
	var n, sum uint64
	s.EachEtherType(func(et uint16, c uint64) {
		if et != uint16(0x9000+n) || c != 2 {
			t.Errorf("ethertype %#x count %d at %d", et, c, n)
		}
		n++
		sum += c
	})
	if n != maxEtherTypes || s.NonIPOther != 16 || s.NonIP != 80 || sum+s.NonIPOther != s.NonIP {
		t.Fatalf("listed %d, other %d, nonIP %d", n, s.NonIPOther, s.NonIP)
	}
}

func TestStatsAdd(t *testing.T) {
	d1, d2 := NewDecoder(Config{}), NewDecoder(Config{})
	var p flow.Packet
	feed := func(d *Decoder, f *fb) { d.Decode(f.link, f.b, len(f.b), &p) }
	feed(d1, eth().eth(0x0806).payload(28))
	feed(d1, eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 17}).udp(1, 2).done())
	feed(d1, frag4(a4, b4, 17, 1, 0, true).udp(1, 2).done())
	feed(d1, eth().plain(1, 2, 3))
	feed(d2, eth().eth(0x88cc).payload(28))
	feed(d2, eth().eth(0x0806).payload(28))
	feed(d2, eth().eth(0x0040).payload(64))
	feed(d2, eth().eth(0x86dd).ipv6(a6, b6, 17).udp(1, 2).done())
	feed(d2, frag4(a4, b4, 17, 1, 1, false).payload(8).done())
	feed(d2, newFrame(147).plain(1))
	feed(d2, newFrame(LinkNull).plain(7, 0, 0, 0)) // AF_ISO: no ethertype
	opts := eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 6, opts: []byte{1, 1, 1, 1}}).tcp(1, 2, 0x10).done()
	d2.Decode(opts.link, opts.b[:14+22], len(opts.b), &p) // the snap length cut the options

	var sum Stats
	sum.Add(d1.Stats())
	sum.Add(d2.Stats())
	want := Stats{Frames: 12, Decoded: 5, IPv4: 4, IPv6: 1, NonIP: 5, LLC: 1, LinkOther: 1, CutHeaders: 1, // d1: 2 IP, 1 ARP, 1 error; d2: 3 IP, 4 non-IP, 1 error
		Fragments: FragmentStats{First: 1, Unattributed: 1}}
	want.Errors[ReasonTruncatedLink] = 1
	want.Errors[ReasonUnknownLinkType] = 1
	want.countEtherType(0x0806, 2)
	want.countEtherType(0x88cc, 1)
	if sum != want {
		t.Fatalf("sum %+v\nwant %+v", sum, want)
	}
	var errs []string
	sum.EachError(func(name string, n uint64) { errs = append(errs, name+"="+itoa(int(n))) })
	if got := strings.Join(errs, " "); got != "truncated_link=1 unknown_link_type=1" {
		t.Fatalf("EachError: %q", got)
	}
}

func TestEtherTypeName(t *testing.T) {
	for et, want := range map[uint16]string{0x0806: "arp", 0x88cc: "lldp", 0x1234: "0x1234", 0xabcd: "0xabcd", 0x0600: "0x0600"} {
		if got := EtherTypeName(et); got != want {
			t.Errorf("%#x: %q, want %q", et, got, want)
		}
	}
}
