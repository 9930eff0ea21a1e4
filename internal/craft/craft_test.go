package craft

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
)

var (
	a4 = netip.MustParseAddr("10.1.0.5")
	b4 = netip.MustParseAddr("192.0.2.77")
	a6 = netip.MustParseAddr("2001:db8:1::5")
	b6 = netip.MustParseAddr("2001:db8:ff::77")
)

// TestChecksumVector checks the Internet checksum on the classic IPv4
// header example whose checksum field is 0xb861.
func TestChecksumVector(t *testing.T) {
	h := []byte{0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00,
		0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7}
	if got := Checksum(h); got != 0xb861 {
		t.Fatalf("Checksum = %#x, want 0xb861", got)
	}
	// The test's own CRC-32C against the standard check value.
	if got := crc32c([]byte("123456789")); got != 0xe3069283 {
		t.Fatalf("crc32c check value = %#x, want 0xe3069283", got)
	}
}

// packets is a table of shapes covering every protocol, family and link.
func packets() []Packet {
	var out []Packet
	protos := []uint8{flow.ProtoTCP, flow.ProtoUDP, flow.ProtoSCTP, flow.ProtoICMP, flow.ProtoICMPv6, 253}
	links := []packet.LinkType{packet.LinkEthernet, packet.LinkSLL, packet.LinkSLL2, packet.LinkRaw}
	for i, proto := range protos {
		for j, fam := range [][2]netip.Addr{{a4, b4}, {a6, b6}} {
			for _, pl := range []int{0, 1, 3, 7, 100, 1401} {
				p := Packet{Link: links[(i+pl)%len(links)], Src: fam[0], Dst: fam[1], Proto: proto,
					SrcPort: 40000, DstPort: 443, TCPFlags: flow.TCPAck | flow.TCPPsh, Seq: 0x01020304,
					Ack: 0x0a0b0c0d, ICMPType: 8, Payload: pl, ID: 77}
				if j == 0 && pl == 3 {
					p.IPv4Options = []byte{0x94, 0x04, 0, 0, 0x01, 0x07, 0x07, 0x04, 0, 0, 0, 0}
				}
				if j == 1 && pl == 7 {
					p.IPv6Ext = []Ext{{ExtHopByHop, 3}, {ExtDestOpts, 0}, {ExtRouting, 20}, {ExtAH, 0}, {ExtDestOpts, 9}}
				}
				if pl == 100 {
					p.VLANs, p.QinQ = []uint16{1001, 20}, true
				}
				out = append(out, p)
			}
		}
	}
	return out
}

func TestPacketsParseAndVerify(t *testing.T) {
	for i, p := range packets() {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			frame := p.Append(nil)
			if p.Link == packet.LinkEthernet && len(frame) < MinEthernetFrame {
				t.Fatalf("frame %d bytes, want padding to %d", len(frame), MinEthernetFrame)
			}
			if got, want := len(frame), max(p.LinkHeaderLen()+p.IPLen(), minFrame(p.Link)); got != want {
				t.Fatalf("frame length %d, want %d", got, want)
			}
			q, err := parseFrame(frame, p.Link)
			if err != nil {
				t.Fatal(err)
			}
			if len(q.ip) != p.IPLen() {
				t.Fatalf("IP length in header %d, IPLen %d", len(q.ip), p.IPLen())
			}
			if q.link != p.LinkHeaderLen() {
				t.Fatalf("link header %d, want %d", q.link, p.LinkHeaderLen())
			}
			if err := checkSums(&q); err != nil {
				t.Fatal(err)
			}
			if q.proto != p.Proto {
				t.Fatalf("upper protocol %d, want %d", q.proto, p.Proto)
			}
			th := p.transportHeaderLen()
			if got := len(q.l4) - th; got != p.Payload && !(p.Proto == flow.ProtoSCTP && got == pad(p.Payload, 4)) {
				t.Fatalf("payload %d bytes, want %d", got, p.Payload)
			}
			for k := 0; k < p.Payload; k++ {
				if q.l4[th+k] != Pattern(k) {
					t.Fatalf("payload byte %d = %#x", k, q.l4[th+k])
				}
			}
			switch p.Proto {
			case flow.ProtoTCP, flow.ProtoUDP, flow.ProtoSCTP:
				if be(q.l4) != 40000 || be(q.l4[2:]) != 443 {
					t.Fatalf("ports %d→%d", be(q.l4), be(q.l4[2:]))
				}
			}
			if p.Proto == flow.ProtoTCP && (q.l4[13] != p.TCPFlags || binary.BigEndian.Uint32(q.l4[4:]) != p.Seq) {
				t.Fatalf("TCP flags %#x seq %#x", q.l4[13], binary.BigEndian.Uint32(q.l4[4:]))
			}
			if p.Proto == flow.ProtoSCTP && int(be(q.l4[14:])) != 16+p.Payload {
				t.Fatalf("SCTP chunk length %d", be(q.l4[14:]))
			}
		})
	}
}

func minFrame(l packet.LinkType) int {
	if l == packet.LinkEthernet {
		return MinEthernetFrame
	}
	return 0
}

func TestLinkHeaders(t *testing.T) {
	p := Packet{Link: packet.LinkEthernet, VLANs: []uint16{100, 200}, QinQ: true, Src: a4, Dst: b4, Proto: flow.ProtoUDP, Payload: 1}
	f := p.Append(nil)
	if len(f) != 60 || p.IPLen() != 29 || be(f[22+2:]) != 29 {
		t.Fatalf("padded frame %d bytes, IPLen %d, header length %d", len(f), p.IPLen(), be(f[24:]))
	}
	want := []byte{0x88, 0xa8, 0x00, 100, 0x81, 0x00, 0x00, 200, 0x08, 0x00}
	if !bytes.Equal(f[12:22], want) || !bytes.Equal(f[0:6], []byte{2, 0, 192, 0, 2, 77}) || !bytes.Equal(f[6:12], []byte{2, 0, 10, 1, 0, 5}) {
		t.Fatalf("ethernet header % x", f[:22])
	}
	if !bytes.Equal(f[51:], make([]byte, 9)) {
		t.Fatalf("padding not zero: % x", f[51:])
	}
	p = Packet{Link: packet.LinkEthernet, VLANs: []uint16{7}, Src: a6, Dst: b6, Proto: flow.ProtoTCP}
	if f = p.Append(nil); !bytes.Equal(f[12:18], []byte{0x81, 0x00, 0, 7, 0x86, 0xdd}) {
		t.Fatalf("802.1Q header % x", f[12:18])
	}
	p = Packet{Link: packet.LinkSLL, Outgoing: true, Src: a6, Dst: b6, Proto: flow.ProtoTCP}
	f = p.Append(nil)
	want = []byte{0, 4, 0, 1, 0, 6, 2, 0, 0, 0, 0, 5, 0, 0, 0x86, 0xdd}
	if !bytes.Equal(f[:16], want) || f[16]>>4 != 6 {
		t.Fatalf("SLL header % x", f[:17])
	}
	p = Packet{Link: packet.LinkSLL2, Src: a4, Dst: b4, Proto: flow.ProtoTCP}
	f = p.Append(nil)
	want = []byte{0x08, 0x00, 0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 2, 0, 10, 1, 0, 5, 0, 0}
	if !bytes.Equal(f[:20], want) || f[20] != 0x45 || len(f) != 20+40 {
		t.Fatalf("SLL2 header % x (len %d)", f[:21], len(f))
	}
	for _, l := range []packet.LinkType{packet.LinkRaw, packet.LinkIPv4} {
		p = Packet{Link: l, Src: a4, Dst: b4, Proto: flow.ProtoUDP}
		if f = p.Append(nil); len(f) != 28 || f[0] != 0x45 {
			t.Fatalf("%v frame % x", l, f)
		}
	}
}

func TestIPv6ExtensionLayout(t *testing.T) {
	p := Packet{Link: packet.LinkRaw, Src: a6, Dst: b6, Proto: flow.ProtoUDP,
		IPv6Ext: []Ext{{ExtHopByHop, 3}, {ExtRouting, 20}, {ExtAH, 0}, {ExtDestOpts, 6}, {ExtFragment, 0}}}
	ip := p.AppendIP(nil)
	// hop-by-hop: 2+2+3 = 7 → 8 bytes; SRH with 2 segments: 40; AH: 12+12 = 24;
	// dest opts 2+2+6 = 10 → 16; fragment 8; UDP 8.
	if want := 40 + 8 + 40 + 24 + 16 + 8 + 8; len(ip) != want || p.IPLen() != want {
		t.Fatalf("length %d, IPLen %d, want %d", len(ip), p.IPLen(), want)
	}
	checks := []struct{ pos, nextHdr, lenByte int }{
		{40, ExtRouting, 0},   // HBH: next=43, hdr ext len 0
		{48, ExtAH, 4},        // SRH: next=51, hdr ext len 2*2
		{88, ExtDestOpts, 4},  // AH: next=60, payload len 24/4-2
		{112, ExtFragment, 1}, // dest opts: next=44, len 16/8-1
		{128, flow.ProtoUDP, 0},
	}
	if ip[6] != ExtHopByHop {
		t.Fatalf("IPv6 next header %d", ip[6])
	}
	for _, c := range checks {
		if int(ip[c.pos]) != c.nextHdr || int(ip[c.pos+1]) != c.lenByte {
			t.Fatalf("header at %d: next %d len %d, want %d %d", c.pos, ip[c.pos], ip[c.pos+1], c.nextHdr, c.lenByte)
		}
	}
	// SRH: routing type 4, segments left 0, segment 0 is the destination.
	if ip[50] != 4 || ip[51] != 0 || !bytes.Equal(ip[56:72], b6.AsSlice()) {
		t.Fatalf("SRH % x", ip[48:72])
	}
	// HBH option 0x1e with 3 data bytes, then Pad1.
	if !bytes.Equal(ip[42:48], []byte{0x1e, 3, 'A', 'B', 'C', 0}) {
		t.Fatalf("hop-by-hop options % x", ip[42:48])
	}
	// Dest opts: option 0x1e with 6 bytes, then PadN of 6 (2 + 4 zero bytes).
	if !bytes.Equal(ip[114:128], []byte{0x1e, 6, 'A', 'B', 'C', 'D', 'E', 'F', 1, 4, 0, 0, 0, 0}) {
		t.Fatalf("destination options % x", ip[114:128])
	}
	q, err := parseFrame(ip, packet.LinkRaw)
	if err != nil || q.proto != flow.ProtoUDP || checkSums(&q) != nil {
		t.Fatalf("parse: %v proto %d sums %v", err, q.proto, checkSums(&q))
	}
}
