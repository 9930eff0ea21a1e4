package craft

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
)

func TestScenarioDeterministic(t *testing.T) {
	f1, t1 := Scenario(1)
	f2, t2 := Scenario(1)
	if !reflect.DeepEqual(f1, f2) || !reflect.DeepEqual(t1, t2) {
		t.Fatal("same seed, different scenario")
	}
	f3, _ := Scenario(2)
	if len(f1) == len(f3) && bytes.Equal(f1[100].Data, f3[100].Data) && f1[100].Time == f3[100].Time {
		t.Fatal("different seeds gave the same frames")
	}
}

func TestScenarioShape(t *testing.T) {
	frames, truth := Scenario(1)
	if len(truth) < 300 {
		t.Fatalf("%d flows, want at least 300", len(truth))
	}
	links := map[string]packet.LinkType{}
	for _, i := range ScenarioIfaces {
		links[i.Name] = i.Link
	}
	if frames[0].Time < ScenarioStart {
		t.Fatalf("first frame at %d, before ScenarioStart", frames[0].Time)
	}
	if got := frames[len(frames)-1].Time - ScenarioStart; got != int64(ScenarioDuration) {
		t.Fatalf("last frame at +%v, want +%v", time.Duration(got), ScenarioDuration)
	}
	for i, f := range frames {
		if i > 0 && f.Time < frames[i-1].Time {
			t.Fatalf("frame %d at %d is before frame %d at %d", i, f.Time, i-1, frames[i-1].Time)
		}
		if f.WireLen != len(f.Data) || links[f.Iface] != f.Link || f.Link == 0 {
			t.Fatalf("frame %d: wirelen %d/%d, iface %q link %v", i, f.WireLen, len(f.Data), f.Iface, f.Link)
		}
	}
	seen := map[flow.Key]bool{}
	for _, tr := range truth {
		if seen[tr.Key] || seen[tr.Key.Reverse()] {
			t.Fatalf("flow key %v→%v proto %d used twice", tr.Key.Src(), tr.Key.Dst(), tr.Key.Proto)
		}
		seen[tr.Key] = true
	}
}

// TestScenarioTruth re-reads every frame with the test's own parser,
// verifies its checksums, attributes it to a flow and checks that the
// per-flow sums equal the truth exactly.
func TestScenarioTruth(t *testing.T) {
	frames, truth := Scenario(7)
	idx := map[flow.Key]int{}
	for i, tr := range truth {
		idx[tr.Key] = i
	}
	type fragKey struct {
		src, dst string
		id       uint32
	}
	type fragInfo struct {
		proto uint8
		ports [2]uint16
	}
	frags := map[fragKey]fragInfo{}
	got := make([]Truth, len(truth))
	var vlan, qinq, v4opt, v4frag, v6frag, sctp int
	links := map[packet.LinkType]int{}
	exts := map[uint8]int{}
	icmp := map[[2]uint8]int{}
	for n, f := range frames {
		q, err := parseFrame(f.Data, f.Link)
		if err != nil {
			t.Fatalf("frame %d: %v", n, err)
		}
		if err := checkSums(&q); err != nil {
			t.Fatalf("frame %d: %v", n, err)
		}
		links[f.Link]++
		if f.Link == packet.LinkEthernet {
			switch be(f.Data[12:]) {
			case 0x8100:
				vlan++
			case 0x88a8:
				qinq++
			}
		}
		if q.v4 && q.l4Off > 20 {
			v4opt++
		}
		if !q.v4 {
			for nh, pos := q.ip[6], 40; nh == 0 || nh == 43 || nh == 60 || nh == 51; {
				exts[nh]++
				if nh == 51 {
					nh, pos = q.ip[pos], pos+(int(q.ip[pos+1])+2)*4
				} else {
					nh, pos = q.ip[pos], pos+(int(q.ip[pos+1])+1)*8
				}
			}
		}
		var ports [2]uint16
		fk := fragKey{string(q.src), string(q.dst), q.id}
		if q.frag {
			if q.v4 {
				v4frag++
			} else {
				v6frag++
			}
			if q.off == 0 {
				info := fragInfo{proto: q.proto}
				if q.proto == flow.ProtoUDP {
					info.ports = [2]uint16{be(q.l4), be(q.l4[2:])}
				}
				frags[fk] = info
			} else {
				info, ok := frags[fk]
				if !ok {
					t.Fatalf("frame %d: fragment before its first fragment", n)
				}
				q.proto, ports = info.proto, info.ports
			}
		}
		if q.proto == flow.ProtoSCTP {
			sctp++
		}
		if (q.proto == flow.ProtoICMP || q.proto == flow.ProtoICMPv6) && q.l4 != nil {
			icmp[[2]uint8{q.l4[0], q.l4[1]}]++
		}
		k := q.wireKey(ports)
		i, fwd := idx[k], true
		if _, ok := idx[k]; !ok {
			if i, ok = idx[k.Reverse()]; !ok {
				t.Fatalf("frame %d: key %v→%v proto %d matches no flow", n, k.Src(), k.Dst(), k.Proto)
			}
			fwd = false
		}
		g := &got[i]
		if g.Iface == "" {
			g.Iface, g.Link, g.First = f.Iface, f.Link, f.Time
			if et := be(f.Data[12:]); f.Link == packet.LinkEthernet && (et == 0x8100 || et == 0x88a8) {
				g.VLAN = be(f.Data[14:]) & 0x0fff // the outermost tag's VLAN ID
			}
		} else if g.Iface != f.Iface {
			t.Fatalf("frame %d: flow seen on %s and %s", n, g.Iface, f.Iface)
		}
		g.Last = f.Time
		var flags uint8
		if q.proto == flow.ProtoTCP {
			flags = q.l4[13]
		}
		if fwd {
			g.Packets++
			g.Bytes += uint64(len(q.ip))
			g.TCPFlags |= flags
		} else {
			g.RevPackets++
			g.RevBytes += uint64(len(q.ip))
			g.RevTCPFlags |= flags
		}
	}
	for i, tr := range truth {
		g := got[i]
		g.Key, g.EndReason, g.ActiveRecords, g.Closed = tr.Key, tr.EndReason, tr.ActiveRecords, tr.Closed
		if g != tr {
			t.Errorf("flow %d %v→%v proto %d:\n got %+v\nwant %+v", i, tr.Key.Src(), tr.Key.Dst(), tr.Key.Proto, g, tr)
		}
	}

	// Everything the scenario promises is present.
	checks := []struct {
		what      string
		got, want int
	}{
		{"802.1Q frames", vlan, 20}, {"QinQ frames", qinq, 10}, {"IPv4 option frames", v4opt, 30},
		{"IPv4 fragments", v4frag, 8}, {"IPv6 fragments", v6frag, 8}, {"SCTP frames", sctp, 40},
		{"SLL frames", links[packet.LinkSLL], 100}, {"SLL2 frames", links[packet.LinkSLL2], 100},
		{"raw frames", links[packet.LinkRaw], 100}, {"LINKTYPE_IPV4 frames", links[packet.LinkIPv4], 20},
		{"LINKTYPE_IPV6 frames", links[packet.LinkIPv6], 5},
		{"hop-by-hop headers", exts[ExtHopByHop], 20}, {"routing headers", exts[ExtRouting], 20},
		{"destination options", exts[ExtDestOpts], 20}, {"AH headers", exts[ExtAH], 30},
		{"echo requests", icmp[[2]uint8{8, 0}], 24}, {"echo replies", icmp[[2]uint8{0, 0}], 20},
		{"ICMPv6 echo requests", icmp[[2]uint8{128, 0}], 18}, {"ICMPv6 echo replies", icmp[[2]uint8{129, 0}], 15},
		{"port unreachable", icmp[[2]uint8{3, 3}], 2}, {"ICMPv6 port unreachable", icmp[[2]uint8{1, 4}], 1},
	}
	for _, c := range checks {
		if c.got < c.want {
			t.Errorf("%s: %d, want at least %d", c.what, c.got, c.want)
		}
	}
}

// TestScenarioFlowKinds checks the flows the brief asks for by their truth.
func TestScenarioFlowKinds(t *testing.T) {
	_, truth := Scenario(3)
	reasons := map[flow.EndReason]int{}
	var active, synAckFirst, rst, fin, inbound, outbound int
	for _, tr := range truth {
		reasons[tr.EndReason]++
		if tr.ActiveRecords {
			active++
			if tr.Last-tr.First < int64(2*ActiveTimeout) || tr.EndReason != flow.ReasonEnd {
				t.Errorf("long flow lasts %v, ends %v", time.Duration(tr.Last-tr.First), tr.EndReason)
			}
		}
		if tr.Key.Proto != flow.ProtoTCP {
			continue
		}
		if tr.TCPFlags&flow.TCPSyn == 0 && tr.RevTCPFlags&flow.TCPSyn != 0 {
			synAckFirst++
		}
		if (tr.TCPFlags|tr.RevTCPFlags)&flow.TCPRst != 0 {
			rst++
		}
		if tr.TCPFlags&tr.RevTCPFlags&flow.TCPFin != 0 {
			fin++
		}
		if tr.Key.Src().IsPrivate() {
			outbound++
		} else {
			inbound++
		}
	}
	if active != 1 || synAckFirst != 1 || rst != 10 || fin < 140 || inbound < 40 || outbound < 60 {
		t.Errorf("active %d, syn-ack-first %d, rst %d, fin %d, inbound %d, outbound %d", active, synAckFirst, rst, fin, inbound, outbound)
	}
	if reasons[flow.ReasonEnd] < 150 || reasons[flow.ReasonIdle] < 100 || reasons[flow.ReasonEOF] < 15 {
		t.Errorf("reasons %v", reasons)
	}
}

// TestScenarioMargins checks, for several seeds, that no flow's expected
// reason sits near a timeout boundary.
func TestScenarioMargins(t *testing.T) {
	for seed := int64(0); seed < 20; seed++ {
		g := build(seed)
		end := g.frames[len(g.frames)-1].Time
		for i, c := range g.convs {
			tr := c.truth
			quiet := time.Duration(end - tr.Last)
			if c.maxGap >= int64(12*time.Second) {
				t.Errorf("seed %d flow %d: gap %v", seed, i, time.Duration(c.maxGap))
			}
			if d := time.Duration(tr.Last - tr.First); d > 50*time.Second && !tr.ActiveRecords {
				t.Errorf("seed %d flow %d: lasts %v", seed, i, d)
			}
			switch {
			case tr.Closed && quiet < 5*time.Second:
				t.Errorf("seed %d flow %d: closed %v before the end", seed, i, quiet)
			case !tr.Closed && quiet > 12*time.Second && quiet < 18*time.Second:
				t.Errorf("seed %d flow %d: quiet %v, too near the idle timeout", seed, i, quiet)
			}
		}
	}
}
