package packet

import (
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// lengthBadCases: an IP length of 0 is taken from the frame only where
// segmentation offload makes one; anywhere else it is malformed.
func lengthBadCases() []badCase {
	zero4 := func(proto uint8, frag uint16) *fb {
		return eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: proto, frag: frag, fixTL: true}).payload(40)
	}
	return []badCase{
		{"ipv4-zero-icmp", zero4(1, 0), 14 + 32000, ReasonZeroIPLength},
		{"ipv4-zero-gre", zero4(47, 0), 14 + 32000, ReasonZeroIPLength},
		{"ipv4-zero-sctp", zero4(132, 0), 0, ReasonZeroIPLength},
		{"ipv4-zero-udp-later-fragment", zero4(17, 0x2000|100), 14 + 32000, ReasonZeroIPLength},
		{"ipv4-zero-tcp-later-fragment", zero4(6, 3), 0, ReasonZeroIPLength},
		// The fuzzed frame of issue 22: a hop-by-hop header without a Jumbo
		// option used to turn 70 bytes into a 32,882-byte flow.
		{"ipv6-zero-hbh-no-jumbo", eth().eth(0x86dd).ipv6pl(a6, b6, 0, 0).ext(6, 8).tcp(1, 2, 0x10), 14 + 32882, ReasonZeroIPLength},
		{"ipv6-zero-dstopts", eth().eth(0x86dd).ipv6pl(a6, b6, 60, 0).ext(17, 8).udp(1, 2), 14 + 9000, ReasonZeroIPLength},
		{"ipv6-zero-fragment", eth().eth(0x86dd).ipv6pl(a6, b6, 44, 0).frag6(17, 0, true, 5).udp(1, 2), 14 + 9000, ReasonZeroIPLength},
		{"ipv6-zero-icmpv6", eth().eth(0x86dd).ipv6pl(a6, b6, 58, 0).icmp(128, 0), 14 + 9000, ReasonZeroIPLength},
	}
}

// TestZeroLengthFromFrame: the cases offload produces take the frame's
// length (and count it).
func TestZeroLengthFromFrame(t *testing.T) {
	cases := []struct {
		name string
		f    *fb
		wire int
		want flow.Packet
	}{
		{"ipv4-tcp", eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 6, fixTL: true}).tcp(1, 2, 0x10), 14 + 64000,
			pk(key(a4, b4, 6, 1, 2), 64000, 0x10, unk)},
		{"ipv4-udp-first-fragment", eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 17, frag: 0x2000, fixTL: true}).udp(1, 2), 14 + 1500,
			pk(key(a4, b4, 17, 1, 2), 1500, 0, unk)},
		{"ipv6-tcp-big-tcp", eth().eth(0x86dd).ipv6pl(a6, b6, 6, 0).tcp(1, 2, 0x10), 14 + 185000,
			pk(key(a6, b6, 6, 1, 2), 185000, 0x10, unk)},
		{"ipv6-jumbo-is-not-from-frame", eth().eth(0x86dd).ipv6pl(a6, b6, 0, 0).jumbo(6, 100000).tcp(1, 2, 0x10), 14 + 40 + 100000,
			pk(key(a6, b6, 6, 1, 2), 40+100000, 0x10, unk)},
	}
	for _, c := range cases {
		d := NewDecoder(Config{})
		var p flow.Packet
		if !d.Decode(c.f.link, c.f.b, c.wire, &p) || p != c.want {
			t.Fatalf("%s: got %+v, want %+v; errors %v", c.name, p, c.want, d.Stats().Errors)
		}
		from := uint64(1)
		if c.name == "ipv6-jumbo-is-not-from-frame" {
			from = 0
		}
		if d.Stats().IPLengthFromFrame != from {
			t.Fatalf("%s: ip length from frame %d", c.name, d.Stats().IPLengthFromFrame)
		}
	}
}

// TestCutHeaders: IPv4 options and IPv6 extension headers cut by the snap
// length keep the packet's bytes in a portless flow; a later fragment whose
// options are cut is attributed as usual (it needs no transport), and a
// first fragment whose options are cut is not remembered.
func TestCutHeaders(t *testing.T) {
	opts := []byte{1, 1, 1, 1, 7, 7, 4, 0, 0, 0, 0, 0}
	first := frag4(a4, b4, 17, 9, 0, true).udp(7, 8).payload(100).done()
	firstOpts := eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 17, id: 10, frag: 0x2000, opts: opts}).udp(7, 8).payload(100).done()
	laterOpts := eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 17, id: 9, frag: 14, opts: opts}).payload(60).done()
	laterOpts10 := eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 17, id: 10, frag: 14, opts: opts}).payload(60).done()
	chain := eth().eth(0x86dd).ipv6(a6, b6, 0).ext(43, 8).ext(60, 24).ext(6, 16).tcp(1, 2, 0x10).payload(500).done()
	steps := []struct {
		f    *fb
		cut  int
		want flow.Packet
	}{
		{first, 0, pk(key(a4, b4, 17, 7, 8), 128, 0, unk)},
		{laterOpts, 14 + 20 + 4, pk(key(a4, b4, 17, 7, 8), 32+60, 0, unk)},         // attributed to the first fragment
		{firstOpts, 14 + 20 + 6, pk(key(a4, b4, 17, 0, 0), 32+8+100, 0, unk)},      // options cut: portless, not remembered
		{laterOpts10, 14 + 20 + 4, pk(key(a4, b4, 17, 0, 0), 32+60, 0, unk)},       // so its later fragment is unattributed
		{chain, 14 + 40 + 8 + 10, pk(key(a6, b6, 43, 0, 0), 40+48+20+500, 0, unk)}, // cut in the routing header
		{chain, 14 + 40 + 8 + 24 + 16 + 5, pk(key(a6, b6, 6, 0, 0), 0, 0, unk)},    // cut in TCP: not a header cut
	}
	d := NewDecoder(Config{})
	for i, s := range steps {
		data := s.f.b
		if s.cut > 0 {
			data = data[:s.cut]
		}
		var p flow.Packet
		ok := d.Decode(s.f.link, data, len(s.f.b), &p)
		if i == len(steps)-1 {
			if ok || d.Stats().Errors[ReasonTruncatedTransport] != 1 {
				t.Fatalf("step %d: ok=%v errors %v", i, ok, d.Stats().Errors)
			}
			continue
		}
		if !ok || p != s.want {
			t.Fatalf("step %d: ok=%v\ngot  %+v\nwant %+v", i, ok, p, s.want)
		}
	}
	s := d.Stats()
	if s.CutHeaders != 2 || s.Fragments.First != 1 || s.Fragments.Attributed != 1 || s.Fragments.Unattributed != 1 {
		t.Fatalf("stats %+v", *s)
	}
}
