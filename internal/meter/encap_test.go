package meter

import (
	"context"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/craft"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/source"
	"github.com/weir-dev/weir/internal/source/pcap"
)

// frames is a packet source over craft frames.
type frames struct {
	f []source.Frame
	i int
}

func (s *frames) Next(f *source.Frame) error {
	if s.i == len(s.f) {
		return io.EOF
	}
	*f = s.f[s.i]
	s.i++
	return nil
}

// conv builds a TCP conversation a → b (handshake, data both ways, FIN
// close) starting at t0, every packet through tun (its outer addresses
// swapped for the replies); it returns the frames and the inner and outer
// bytes each way.
func conv(a, b netip.Addr, sport uint16, tun *craft.Tunnel, t0 int64) (fs []source.Frame, inner, outer [2]uint64) {
	steps := []struct {
		fwd     bool
		flags   uint8
		payload int
	}{{true, 0x02, 0}, {false, 0x12, 0}, {true, 0x10, 0}, {true, 0x18, 300}, {false, 0x18, 1200}, {true, 0x11, 0}, {false, 0x11, 0}, {true, 0x10, 0}}
	for i, s := range steps {
		p := craft.Packet{Link: packet.LinkEthernet, Src: a, Dst: b, Proto: flow.ProtoTCP, SrcPort: sport, DstPort: 80,
			TCPFlags: s.flags, Payload: s.payload}
		d := 0
		if !s.fwd {
			p.Src, p.Dst, p.SrcPort, p.DstPort, d = b, a, 80, sport, 1
		}
		if tun != nil {
			tt := *tun
			if !s.fwd {
				tt.Src, tt.Dst = tun.Dst, tun.Src
			}
			p.Tunnel = &tt
		}
		data := p.Append(nil)
		fs = append(fs, source.Frame{Data: data, WireLen: len(data), Time: t0 + int64(i)*int64(time.Millisecond), Link: p.Link, Iface: "uplink"})
		inner[d] += uint64(p.IPLen())
		outer[d] += uint64(p.OuterIPLen())
	}
	return fs, inner, outer
}

// TestDecapRecords: with Decap, pod-to-pod connections over VXLAN and
// Geneve are keyed by the pods, count inner IP bytes and carry the nodes
// as tunnel endpoints (the initiator's node as TunnelSrc, whichever side
// the first packet came from); a connection outside any tunnel carries
// none; without Decap the same frames are node-to-node UDP flows counting
// outer bytes.
func TestDecapRecords(t *testing.T) {
	pod1, pod2, pod3 := netip.MustParseAddr("10.244.1.5"), netip.MustParseAddr("10.244.2.7"), netip.MustParseAddr("fd00:244::3")
	node1, node2 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	node6a, node6b := netip.MustParseAddr("2001:db8::a"), netip.MustParseAddr("2001:db8::b")
	start := craft.ScenarioStart
	vx, vxIn, vxOut := conv(pod2, pod1, 41000, &craft.Tunnel{Kind: packet.TunnelVXLAN, Src: node2, Dst: node1, VNI: 1}, start)
	gn, gnIn, gnOut := conv(pod3, netip.MustParseAddr("fd00:244::9"), 42000, &craft.Tunnel{Kind: packet.TunnelGeneve, Src: node6a, Dst: node6b, Ethernet: true}, start+int64(time.Second))
	pl, plIn, _ := conv(node1, node2, 43000, nil, start+2*int64(time.Second))
	all := append(append(append([]source.Frame{}, vx...), gn...), pl...)

	run := func(decap packet.Decap) ([]flow.Record, Stats) {
		var out collect
		p, err := New(Config{Table: tableConfig(64), Decoder: packet.Config{Decap: decap}}, &out)
		if err != nil {
			t.Fatal(err)
		}
		st, err := p.Run(context.Background(), &frames{f: all})
		if err != nil {
			t.Fatal(err)
		}
		return out.recs, st
	}

	recs, st := run(packet.DecapAll)
	if len(recs) != 3 || st.Decoder.Decap.Inner[packet.TunnelVXLAN] != 8 || st.Decoder.Decap.Inner[packet.TunnelGeneve] != 8 {
		t.Fatalf("%d records, decap %+v", len(recs), st.Decoder.Decap)
	}
	for _, r := range recs {
		var in [2]uint64
		var ts, td string
		switch r.Key.Src() {
		case pod2:
			in, ts, td = vxIn, "192.0.2.2", "192.0.2.1"
		case pod3:
			in, ts, td = gnIn, "2001:db8::a", "2001:db8::b"
		case node1:
			in = plIn
		default:
			t.Fatalf("record from %v", r.Key.Src())
		}
		if r.Bytes != in[0] || r.RevBytes != in[1] || r.Packets != 5 || r.RevPackets != 3 || r.EndReason != flow.ReasonEOF && r.EndReason != flow.ReasonEnd {
			t.Errorf("%v: %d/%d bytes %d/%d packets %v, want inner bytes %v", r.Key.Src(), r.Bytes, r.RevBytes, r.Packets, r.RevPackets, r.EndReason, in)
		}
		if (ts == "" && (r.TunnelSrc.IsValid() || r.TunnelDst.IsValid())) || (ts != "" && (r.TunnelSrc.String() != ts || r.TunnelDst.String() != td)) {
			t.Errorf("%v: tunnel %v → %v, want %q → %q", r.Key.Src(), r.TunnelSrc, r.TunnelDst, ts, td)
		}
		if r.Iface != "uplink" {
			t.Errorf("%v: iface %q", r.Key.Src(), r.Iface)
		}
	}

	recs, st = run(0)
	var udpBytes [2]uint64
	for _, r := range recs {
		if r.TunnelSrc.IsValid() {
			t.Errorf("tunnel endpoints without decap: %+v", r)
		}
		if r.Key.Proto == flow.ProtoUDP {
			udpBytes[0] += r.Bytes + r.RevBytes
		}
	}
	if want := vxOut[0] + vxOut[1] + gnOut[0] + gnOut[1]; udpBytes[0] != want || st.Decoder.Decap != (packet.DecapStats{}) {
		t.Fatalf("without decap: UDP bytes %d, want the outer %d; decap %+v", udpBytes[0], want, st.Decoder.Decap)
	}
}

// TestFilesOneStream: a capture rotated into several files is one stream:
// a connection spanning the cut is one record, and a gap longer than the
// idle timeout across the cut still ends the flow.
func TestFilesOneStream(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	fs, in, _ := conv(a, b, 40000, nil, craft.ScenarioStart)
	late, _, _ := conv(a, b, 40001, nil, craft.ScenarioStart)
	// The second connection's last 3 packets come 20 s after its first 5.
	for i := 5; i < len(late); i++ {
		late[i].Time += 20 * int64(time.Second)
	}
	dir := t.TempDir()
	write := func(name string, fr []source.Frame) string {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w, err := pcap.NewWriter(f, packet.LinkEthernet, 65535)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range fr {
			if err := w.WritePacket(x.Time, x.WireLen, x.Data); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		return path
	}
	// File 1: the first connection's first 4 packets and the second's first
	// 5; file 2: the rest of both.
	paths := []string{write("cap.pcap0", sortFrames(append(append([]source.Frame{}, fs[:4]...), late[:5]...))),
		write("cap.pcap1", sortFrames(append(append([]source.Frame{}, fs[4:]...), late[5:]...)))}
	src, err := pcap.OpenFiles(paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var out collect
	p, err := New(Config{Table: tableConfig(64)}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	var one, idle, rest int
	for _, r := range out.recs {
		if r.Iface != "cap" {
			t.Errorf("iface %q, want the first file's name", r.Iface)
		}
		switch {
		case r.Key.SrcPort == 40000:
			one++
			if r.Bytes != in[0] || r.RevBytes != in[1] || r.EndReason != flow.ReasonEnd {
				t.Errorf("spanning connection: %d/%d bytes, %v; want %v in one record ending end", r.Bytes, r.RevBytes, r.EndReason, in)
			}
		case r.EndReason == flow.ReasonIdle:
			idle++
			if r.Packets+r.RevPackets != 5 {
				t.Errorf("idle record of %d packets, want the 5 before the gap", r.Packets+r.RevPackets)
			}
		default:
			rest++
			if r.Packets+r.RevPackets != 3 {
				t.Errorf("record after the gap: %d packets", r.Packets+r.RevPackets)
			}
		}
	}
	if one != 1 || idle != 1 || rest != 1 {
		t.Fatalf("records: %d spanning, %d idle, %d after the gap: %+v", one, idle, rest, out.recs)
	}
}

// sortFrames orders frames by time (stable).
func sortFrames(fs []source.Frame) []source.Frame {
	for i := 1; i < len(fs); i++ {
		for j := i; j > 0 && fs[j].Time < fs[j-1].Time; j-- {
			fs[j], fs[j-1] = fs[j-1], fs[j]
		}
	}
	return fs
}
