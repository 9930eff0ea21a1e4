package synthetic

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/source"
)

func mustNew(t testing.TB, cfg Config) *Source {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDeterministic(t *testing.T) {
	cfg := Config{Flows: 300, IPv6Share: 0.3, UDPShare: 0.4, MinPayload: 10, MaxPayload: 1400, Packets: 5000, Seed: 42}
	a, b := mustNew(t, cfg), mustNew(t, cfg)
	cfg.Seed = 43
	c := mustNew(t, cfg)
	var fa, fb, fc source.Frame
	differ := 0
	for n := 0; ; n++ {
		ea, eb, ec := a.Next(&fa), b.Next(&fb), c.Next(&fc)
		if ea != eb || ea != ec {
			t.Fatalf("packet %d: errors %v %v %v", n, ea, eb, ec)
		}
		if ea == io.EOF {
			if n != 5000 {
				t.Fatalf("EOF after %d packets, want 5000", n)
			}
			break
		}
		if !bytes.Equal(fa.Data, fb.Data) || fa.WireLen != fb.WireLen || fa.Time != fb.Time {
			t.Fatalf("packet %d differs between identical sources", n)
		}
		if !bytes.Equal(fa.Data, fc.Data) {
			differ++
		}
	}
	if differ < 4000 {
		t.Fatalf("another seed changed only %d of 5000 frames", differ)
	}
}

// got accumulates counters from the emitted bytes alone.
type got struct {
	key      flow.Key // initiator orientation: the first packet's sender
	p, b     [2]uint64
	tcpFlags [2]uint8
}

func TestTruthExact(t *testing.T) {
	for _, cfg := range []Config{
		{Flows: 50, IPv6Share: 0.4, UDPShare: 0.3, MinPayload: 0, MaxPayload: 1400, Packets: 3000, Seed: 1, Start: 1e18, StepNs: 7},
		{Flows: 1, Packets: 10, MinPayload: 5, MaxPayload: 5, Seed: 2},
		{Flows: 2000, IPv6Share: 1, UDPShare: 1, MinPayload: 100, MaxPayload: 9000, Packets: 1000, Seed: 3, Snaplen: 62},
	} {
		s := mustNew(t, cfg)
		snap := cfg.Snaplen
		if snap == 0 {
			snap = DefaultSnap
		}
		start := cfg.Start
		if start == 0 {
			start = 1767225600 * 1e9 // 2026-01-01T00:00:00Z
		}
		step := cfg.StepNs
		if step == 0 {
			step = 1000
		}
		flows := map[flow.Key]*got{}
		var f source.Frame
		for n := 0; ; n++ {
			err := s.Next(&f)
			if err == io.EOF {
				if n != cfg.Packets {
					t.Fatalf("EOF after %d packets, want %d", n, cfg.Packets)
				}
				break
			}
			if f.Time != start+int64(n)*step || f.Link != packet.LinkEthernet || f.Iface != "syn0" {
				t.Fatalf("packet %d: time %d link %v iface %q", n, f.Time, f.Link, f.Iface)
			}
			k, ipLen, flags := parse(t, f.Data)
			if want := max(14+ipLen, 60); f.WireLen != want || len(f.Data) != min(want, snap) {
				t.Fatalf("packet %d: wire %d data %d, IP length %d", n, f.WireLen, len(f.Data), ipLen)
			}
			g, dir := flows[k], 0
			if g == nil {
				if g = flows[k.Reverse()]; g != nil {
					dir = 1
				} else {
					g = &got{key: k}
					flows[k] = g
				}
			}
			g.p[dir]++
			g.b[dir] += uint64(ipLen)
			g.tcpFlags[dir] |= flags
		}
		truth := s.Truth()
		if len(truth) != len(flows) {
			t.Fatalf("truth has %d flows, emitted %d", len(truth), len(flows))
		}
		for k, g := range flows {
			tr, ok := truth[k]
			if !ok {
				t.Fatalf("flow %v→%v missing from truth (or oriented differently)", k.Src(), k.Dst())
			}
			if tr.Packets != g.p[0] || tr.RevPackets != g.p[1] || tr.Bytes != g.b[0] || tr.RevBytes != g.b[1] ||
				tr.TCPFlags != g.tcpFlags[0] || tr.RevTCPFlags != g.tcpFlags[1] {
				t.Fatalf("flow %v→%v: truth %+v, counted %+v", k.Src(), k.Dst(), tr, *g)
			}
			if !k.Src().IsPrivate() && k.Src().Is4() || k.IPVersion == 6 && k.SrcAddr[5] != 1 {
				t.Fatalf("initiator %v is not the client", k.Src())
			}
		}
	}
}

// parse reads the flow key, IP length and TCP flags from a frame's first
// bytes (Ethernet, no VLAN).
func parse(t *testing.T, d []byte) (k flow.Key, ipLen int, flags uint8) {
	t.Helper()
	be := binary.BigEndian
	var l4 []byte
	switch et := be.Uint16(d[12:]); et {
	case 0x0800:
		ip := d[14:]
		ipLen = int(be.Uint16(ip[2:]))
		flow.SetAddr4(&k.SrcAddr, ip[12:16])
		flow.SetAddr4(&k.DstAddr, ip[16:20])
		k.Proto, k.IPVersion = ip[9], 4
		l4 = ip[int(ip[0]&0x0f)*4:]
	case 0x86dd:
		ip := d[14:]
		ipLen = 40 + int(be.Uint16(ip[4:]))
		copy(k.SrcAddr[:], ip[8:24])
		copy(k.DstAddr[:], ip[24:40])
		k.Proto, k.IPVersion = ip[6], 6
		l4 = ip[40:]
	default:
		t.Fatalf("ethertype %#x", et)
	}
	k.SrcPort, k.DstPort = be.Uint16(l4), be.Uint16(l4[2:])
	if k.Proto == flow.ProtoTCP {
		flags = l4[13]
	}
	return k, ipLen, flags
}

// TestFullFrames keeps whole frames and checks the IPv4 header and the
// transport checksums with an independent computation.
func TestFullFrames(t *testing.T) {
	s := mustNew(t, Config{Flows: 40, IPv6Share: 0.5, UDPShare: 0.5, MinPayload: 0, MaxPayload: 3000, Packets: 400, Snaplen: 65535})
	var f source.Frame
	for s.Next(&f) == nil {
		if len(f.Data) != f.WireLen {
			t.Fatalf("data %d bytes, wire %d", len(f.Data), f.WireLen)
		}
		ip := f.Data[14:]
		var pseudo, seg []byte
		if ip[0]>>4 == 4 {
			hl := int(ip[0]&0x0f) * 4
			if fold(ip[:hl]) != 0xffff {
				t.Fatal("bad IPv4 header checksum")
			}
			seg = ip[hl:int(binary.BigEndian.Uint16(ip[2:]))]
			pseudo = append(append([]byte{}, ip[12:20]...), 0, ip[9], byte(len(seg)>>8), byte(len(seg)))
		} else {
			seg = ip[40 : 40+int(binary.BigEndian.Uint16(ip[4:]))]
			pseudo = append(append([]byte{}, ip[8:40]...), 0, 0, byte(len(seg)>>8), byte(len(seg)), 0, 0, 0, ip[6])
		}
		if fold(append(pseudo, seg...)) != 0xffff {
			t.Fatal("bad transport checksum")
		}
	}
}

// fold returns the folded 16-bit one's complement sum of b.
func fold(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

func TestShares(t *testing.T) {
	s := mustNew(t, Config{Flows: 4000, IPv6Share: 0.25, UDPShare: 0.6, MaxPayload: 10})
	var v6, udp int
	for _, k := range s.keys {
		if k.IPVersion == 6 {
			v6++
		}
		if k.Proto == flow.ProtoUDP {
			udp++
		}
	}
	// Binomial standard deviations are about 27 and 31: allow 5 of them.
	if v6 < 1000-135 || v6 > 1000+135 || udp < 2400-155 || udp > 2400+155 {
		t.Fatalf("%d IPv6 and %d UDP flows of 4000", v6, udp)
	}
}

func TestUnbounded(t *testing.T) {
	s := mustNew(t, Config{Flows: 3, MaxPayload: 100})
	var f source.Frame
	for n := range 100000 {
		if err := s.Next(&f); err != nil {
			t.Fatalf("packet %d: %v", n, err)
		}
	}
	var sum uint64
	for _, tr := range s.Truth() {
		sum += tr.Packets + tr.RevPackets
	}
	if sum != 100000 || s.Emitted() != 100000 {
		t.Fatalf("truth counts %d packets, emitted %d", sum, s.Emitted())
	}
}

func TestConfigErrors(t *testing.T) {
	for i, cfg := range []Config{
		{},
		{Flows: MaxFlows + 1},
		{Flows: 1, MinPayload: -1},
		{Flows: 1, MinPayload: 10, MaxPayload: 5},
		{Flows: 1, MaxPayload: MaxPayloadLen + 1},
		{Flows: 1, IPv6Share: 1.5},
		{Flows: 1, UDPShare: -0.1},
		{Flows: 1, Packets: -1},
		{Flows: 1, Snaplen: -1},
		{Flows: 1, StepNs: -1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("config %d: no error", i)
		}
	}
}

func TestNextZeroAllocs(t *testing.T) {
	s := mustNew(t, Config{Flows: 1000, IPv6Share: 0.5, UDPShare: 0.5, MaxPayload: 1400})
	var f source.Frame
	if a := testing.AllocsPerRun(10000, func() { _ = s.Next(&f) }); a != 0 {
		t.Fatalf("%v allocations per Next", a)
	}
}

func BenchmarkNext(b *testing.B) {
	s := mustNew(b, Config{Flows: 100000, IPv6Share: 0.3, UDPShare: 0.3, MinPayload: 0, MaxPayload: 1400, Seed: 1})
	var f source.Frame
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := s.Next(&f); err != nil {
			b.Fatal(err)
		}
	}
}
