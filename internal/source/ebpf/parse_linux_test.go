//go:build linux

package ebpf

import (
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/weir-dev/weir/internal/craft"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/testhost"
)

// parserFrames are Ethernet frames of every shape the kernel parser keys:
// TCP (flags, roles), UDP, SCTP, ICMP and ICMPv6 requests, replies and
// errors, a protocol without ports, IPv4 options, IPv6 extension headers,
// fragments of both families, and frames neither parser may count.
func parserFrames() [][]byte {
	a4, b4 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("198.51.100.7")
	a6, b6 := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8:ff::7")
	var frames [][]byte
	for _, v6 := range []bool{false, true} {
		a, b, icmp := a4, b4, uint8(flow.ProtoICMP)
		echo, reply, ts, tsReply, unreach := uint8(8), uint8(0), uint8(13), uint8(14), uint8(3)
		if v6 {
			a, b, icmp = a6, b6, flow.ProtoICMPv6
			echo, reply, ts, tsReply, unreach = 128, 129, 139, 140, 1
		}
		pk := func(p craft.Packet) craft.Packet {
			p.Link, p.Src, p.Dst = packet.LinkEthernet, a, b
			return p
		}
		rev := func(p craft.Packet) craft.Packet {
			p = pk(p)
			p.Src, p.Dst = b, a
			return p
		}
		ps := []craft.Packet{
			pk(craft.Packet{Proto: flow.ProtoTCP, SrcPort: 40000, DstPort: 443, TCPFlags: 0x02}),
			rev(craft.Packet{Proto: flow.ProtoTCP, SrcPort: 443, DstPort: 40000, TCPFlags: 0x12}),
			pk(craft.Packet{Proto: flow.ProtoTCP, SrcPort: 40000, DstPort: 443, TCPFlags: 0x18, Payload: 700}),
			pk(craft.Packet{Proto: flow.ProtoTCP, SrcPort: 40000, DstPort: 443, TCPFlags: 0x11}),
			pk(craft.Packet{Proto: flow.ProtoUDP, SrcPort: 5353, DstPort: 53, Payload: 33}),
			rev(craft.Packet{Proto: flow.ProtoUDP, SrcPort: 53, DstPort: 5353, Payload: 120}),
			pk(craft.Packet{Proto: flow.ProtoSCTP, SrcPort: 3868, DstPort: 3868, Payload: 20}),
			pk(craft.Packet{Proto: icmp, ICMPType: echo, Seq: 7<<16 | 1, Payload: 56}),
			rev(craft.Packet{Proto: icmp, ICMPType: reply, Seq: 7<<16 | 1, Payload: 56}),
			pk(craft.Packet{Proto: icmp, ICMPType: ts}),
			rev(craft.Packet{Proto: icmp, ICMPType: tsReply}),
			rev(craft.Packet{Proto: icmp, ICMPType: unreach, ICMPCode: 3, Payload: 28}),
			pk(craft.Packet{Proto: 47, Payload: 40}), // GRE: no ports
			pk(craft.Packet{Proto: flow.ProtoUDP, SrcPort: 7, DstPort: 9, Payload: 3, TTL: 1}),
		}
		if v6 {
			ps = append(ps,
				pk(craft.Packet{Proto: flow.ProtoUDP, SrcPort: 1000, DstPort: 2000, Payload: 10,
					IPv6Ext: []craft.Ext{{Type: craft.ExtHopByHop, Len: 4}, {Type: craft.ExtRouting, Len: 16}, {Type: craft.ExtDestOpts, Len: 30}}}),
				pk(craft.Packet{Proto: flow.ProtoTCP, SrcPort: 1001, DstPort: 2001, TCPFlags: 0x10, IPv6Ext: []craft.Ext{{Type: craft.ExtAH}}}),
				pk(craft.Packet{Proto: flow.ProtoUDP, SrcPort: 1002, DstPort: 2002, Payload: 5, ID: 99, IPv6Ext: []craft.Ext{{Type: craft.ExtFragment}}}),
			)
		} else {
			ps = append(ps, pk(craft.Packet{Proto: flow.ProtoUDP, SrcPort: 1000, DstPort: 2000, Payload: 10, IPv4Options: []byte{0x94, 4, 0, 0, 1, 1, 1, 0}}))
		}
		for _, p := range ps {
			frames = append(frames, p.Append(nil))
		}
		// A datagram in fragments (the later ones carry no ports), and one
		// whose first fragment never came (keyed with ports 0 by both).
		big := pk(craft.Packet{Proto: flow.ProtoUDP, SrcPort: 6000, DstPort: 6001, Payload: 3000, ID: 4242})
		for _, f := range big.Fragments(1280) {
			frames = append(frames, f.Frame)
		}
		orphan := pk(craft.Packet{Proto: flow.ProtoUDP, SrcPort: 6002, DstPort: 6003, Payload: 3000, ID: 4343})
		for _, f := range orphan.Fragments(1280)[1:] {
			frames = append(frames, f.Frame)
		}
	}
	// Neither parser counts these: not IP, a bad IPv4 version, a header
	// length under 5 words, a packet cut inside its UDP header (the kernel
	// test run takes no frame shorter than an IPv4 header).
	arp := make([]byte, 60)
	arp[12], arp[13] = 0x08, 0x06
	frames = append(frames, arp)
	p := craft.Packet{Link: packet.LinkEthernet, Src: a4, Dst: b4, Proto: flow.ProtoUDP, SrcPort: 1, DstPort: 2}
	bad := p.Append(nil)
	bad[14] = 0x55
	short := p.Append(nil)
	short[14] = 0x44
	cut := p.Append(nil)[:14+20+2]
	return append(frames, bad, short, cut)
}

// counts is one flow's packets, IP bytes and marks (TCP flags | role << 8).
type counts struct {
	packets, bytes uint64
	marks          uint32
}

// TestParserAgainstDecoder runs the kernel program on crafted frames
// (BPF_PROG_TEST_RUN) and checks that it keys and counts every one as
// weir's packet decoder does: the same flows (direction, addresses,
// ports, ICMP type and code, replies keyed by their request), packets,
// IP bytes, TCP flags and role hints. The two sources must agree. It runs
// again with carry points so low (3 packets, 2,048 bytes) that most flows
// carry out of the shared count word, which must not change a count.
func TestParserAgainstDecoder(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("eBPF needs root (CAP_BPF); CI runs this as root")
	}
	pr := testhost.NewPair(t)
	for _, c := range []carry{{}, {packets: 3, bytes: 2048}} {
		t.Run(fmt.Sprintf("carry=%d,%d", c.packets, c.bytes), func(t *testing.T) { parserAgainstDecoder(t, pr, c) })
	}
}

func parserAgainstDecoder(t *testing.T, pr *testhost.Pair, c carry) {
	s := benchSource(t, pr.B, Config{EvictInterval: time.Hour, Table: flow.Config{IdleTimeout: 2 * time.Hour}, carry: c})
	prog := s.coll.Programs["weir_flow_eth_ingress"]
	dec := packet.NewDecoder(packet.Config{})
	want := map[flow.Key]counts{}
	for i, f := range parserFrames() {
		var p flow.Packet
		if dec.Decode(packet.LinkEthernet, f, len(f), &p) {
			c := want[p.Key]
			c.packets++
			c.bytes += uint64(p.Length)
			c.marks |= uint32(p.TCPFlags) | uint32(p.Role)<<8
			want[p.Key] = c
		}
		ret, err := prog.Run(&ebpf.RunOptions{Data: f})
		if err != nil {
			t.Fatalf("frame %d: test run: %v", i, err)
		}
		if int32(ret) != -1 {
			t.Fatalf("frame %d: the program returned %d, want -1 (TC_ACT_UNSPEC: next program)", i, int32(ret))
		}
	}
	got := map[flow.Key]counts{}
	var k flowFlowKey
	var v flowFlowVal
	for it := s.maps[s.cur].Iterate(); it.Next(&k, &v); {
		var fk flow.Key
		setKey(&fk, &k)
		packets, bytes := s.cfg.carry.counts(&v)
		got[fk] = counts{packets, bytes, v.Marks}
	}
	if len(want) < 30 {
		t.Fatalf("the decoder keyed only %d flows: the frames are not what this test means", len(want))
	}
	for fk, w := range want {
		if g, ok := got[fk]; !ok {
			t.Errorf("%s: decoder %+v, kernel none", keyString(fk), w)
		} else if g != w {
			t.Errorf("%s: decoder %+v, kernel %+v", keyString(fk), w, g)
		}
	}
	for fk, g := range got {
		if _, ok := want[fk]; !ok {
			t.Errorf("%s: kernel %+v, decoder none", keyString(fk), g)
		}
	}
}

func keyString(k flow.Key) string {
	return fmt.Sprintf("%v %v→%v %d→%d icmp %d/%d", k.Proto, k.Src(), k.Dst(), k.SrcPort, k.DstPort, k.ICMPType, k.ICMPCode)
}
