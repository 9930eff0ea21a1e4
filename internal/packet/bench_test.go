package packet

import (
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// benchCase is one frame decoded per benchmark op; prime frames are decoded
// once before timing (to fill the fragment table).
type benchCase struct {
	name  string
	f     *fb
	prime []*fb
	decap Decap
}

func benchCases() []benchCase {
	return []benchCase{
		{name: "eth-ipv4-tcp", f: eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 6}).tcp(40000, 443, 0x10).payload(1400).done()},
		{name: "eth-ipv6-udp", f: eth().eth(0x86dd).ipv6(a6, b6, 17).udp(5353, 53).payload(100).done()},
		{name: "vlan-qinq-ipv4-udp", f: eth().eth(0x88a8).vlan(10, 0x8100).vlan(20, 0x0800).ipv4(v4{src: a4, dst: b4, proto: 17}).udp(1, 2).payload(100).done()},
		{name: "sll2-ipv4-tcp", f: newFrame(LinkSLL2).sll2(0x0800).ipv4(v4{src: a4, dst: b4, proto: 6}).tcp(1, 2, 0x18).payload(100).done()},
		{name: "ipv4-options", f: eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 6, opts: []byte{1, 1, 1, 1, 7, 7, 4, 0, 0, 0, 0, 0}}).tcp(1, 2, 0x10).done()},
		{name: "ipv6-ext-chain", f: eth().eth(0x86dd).ipv6(a6, b6, 0).ext(60, 8).ext(43, 24).ext(6, 8).tcp(1, 2, 0x10).done()},
		{name: "icmp", f: eth().eth(0x0800).ipv4(v4{src: b4, dst: a4, proto: 1}).icmp(0, 0).payload(56).done()},
		{name: "ipv4-frag-later", f: frag4(a4, b4, 17, 42, 185, true).payload(1480).done(),
			prime: []*fb{frag4(a4, b4, 17, 42, 0, true).udp(1, 2).payload(1472).done()}},
		{name: "pppoe-ipv4-tcp", f: eth().eth(0x8864).pppoe(0x0021).ipv4(v4{src: a4, dst: b4, proto: 6}).tcp(1, 2, 0x10).payload(1400).done()},
		{name: "mpls2-ipv4-tcp", f: eth().eth(0x8847).mpls(100, 200).ipv4(v4{src: a4, dst: b4, proto: 6}).tcp(1, 2, 0x10).payload(1400).done()},
		{name: "null-ipv6-tcp", f: newFrame(LinkNull).null(30, false).ipv6(a6, b6, 6).tcp(1, 2, 0x10).payload(100).done()},
		{name: "nflog-ipv4-udp", f: newFrame(LinkNFLOG).nflog(2, 0x0800, true).ipv4(v4{src: a4, dst: b4, proto: 17}).udp(1, 2).payload(100).done()},
		{name: "vxlan-outer", f: vxlanFrame()},
		{name: "vxlan-decap", f: vxlanFrame(), decap: DecapAll},
		{name: "eth-ipv4-tcp-decap-on", f: eth().eth(0x0800).ipv4(v4{src: a4, dst: b4, proto: 6}).tcp(40000, 443, 0x10).payload(1400).done(), decap: DecapAll},
	}
}

// vxlanFrame is a VXLAN packet carrying a TCP segment, as on a Kubernetes
// node's uplink.
func vxlanFrame() *fb {
	return eth().eth(0x0800).ipv4(v4{src: o4a, dst: o4b, proto: 17}).vxlan(51000, 4789).innerEth(0x0800, ReasonTruncatedLink).
		ipv4(v4{src: a4, dst: b4, proto: 6}).tcp(40000, 443, 0x10).payload(1350).done()
}

func BenchmarkDecode(b *testing.B) {
	for _, c := range benchCases() {
		b.Run(c.name, func(b *testing.B) {
			d := NewDecoder(Config{Decap: c.decap})
			var p flow.Packet
			for _, f := range c.prime {
				d.Decode(f.link, f.b, len(f.b), &p)
			}
			data, link, wire := c.f.b, c.f.link, len(c.f.b)
			if !d.Decode(link, data, wire, &p) {
				b.Fatal("frame does not decode")
			}
			b.ReportAllocs()
			b.SetBytes(int64(wire))
			for b.Loop() {
				d.Decode(link, data, wire, &p)
			}
		})
	}
}

// TestDecodeAllocs: no path through Decode allocates, fragments included
// (first, attributed, unattributed, eviction).
func TestDecodeAllocs(t *testing.T) {
	var frames []*fb
	for _, c := range okCases() {
		frames = append(frames, c.f)
	}
	for _, c := range badCases() {
		frames = append(frames, c.f)
	}
	for _, c := range benchCases() {
		frames = append(frames, c.f)
	}
	for id := uint16(0); id < 8; id++ { // 8 first fragments into a 4-slot table: evictions
		frames = append(frames, frag4(a4, b4, 17, id, 0, true).udp(1, 2).done(), frag4(a4, b4, 17, id, 1, false).payload(8).done())
	}
	frames = append(frames,
		eth().eth(0x86dd).ipv6(a6, b6, 44).frag6(6, 0, true, 1).tcp(1, 2, 0x10).done(),
		frag6later(6, 1, 9, false, 8), frag6later(6, 2, 9, false, 8),
		eth().eth(0x0806).payload(28), eth().eth(0x0026).payload(28))
	for _, c := range tunnelCases() {
		frames = append(frames, c.f)
	}
	d := NewDecoder(Config{FragmentSlots: 4, Decap: DecapAll})
	var p flow.Packet
	now := int64(0)
	allocs := testing.AllocsPerRun(50, func() {
		for _, f := range frames {
			now++
			p.Time = now
			d.Decode(f.link, f.b, len(f.b), &p)
			d.Decode(f.link, f.b[:len(f.b)*2/3], len(f.b), &p) // cut: header cuts, tunnel fallbacks
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run", allocs)
	}
	if s := d.Stats(); s.Decap.Inner[TunnelVXLAN] == 0 || s.Decap.Outer[TunnelIPIP] == 0 || s.CutHeaders == 0 {
		t.Fatalf("decap and cut paths not exercised: %+v %d", s.Decap, s.CutHeaders)
	}
	if s := d.Stats(); s.Fragments.Evicted == 0 || s.Fragments.Attributed == 0 || s.Fragments.Unattributed == 0 {
		t.Fatalf("fragment paths not exercised: %+v", s.Fragments)
	}
}
