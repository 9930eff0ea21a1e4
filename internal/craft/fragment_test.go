package craft

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
)

func TestFragments(t *testing.T) {
	v4opts := []byte{0x94, 0x04, 0, 0, 0x07, 0x0b, 0x04, 0, 0, 0, 0, 0, 0, 0, 0} // router alert (copied) + record route (not)
	cases := []struct {
		p         Packet
		mtu       int
		unfrag    int // bytes of the unfragmentable part in the original
		laterHdr  int // header bytes of fragments after the first (v4) / unfragmentable+8 (v6)
		wantFrags int
	}{
		// 20+16 option bytes; data per fragment (1500-36)&^7 = 1464, then (1500-24)&^7 = 1472.
		{Packet{Src: a4, Dst: b4, Proto: flow.ProtoUDP, SrcPort: 1, DstPort: 2, Payload: 4000, IPv4Options: v4opts, Link: packet.LinkEthernet}, 1500, 36, 24, 3},
		{Packet{Src: a4, Dst: b4, Proto: flow.ProtoUDP, SrcPort: 1, DstPort: 2, Payload: 4000, Link: packet.LinkSLL2}, 576, 20, 20, 8},
		{Packet{Src: a4, Dst: b4, Proto: flow.ProtoTCP, SrcPort: 1, DstPort: 2, Payload: 30, Link: packet.LinkRaw}, 24, 20, 20, 7}, // clamped: 8 data bytes each
		{Packet{Src: a6, Dst: b6, Proto: flow.ProtoUDP, SrcPort: 1, DstPort: 2, Payload: 3000, Link: packet.LinkEthernet, VLANs: []uint16{5}}, 1280, 40, 48, 3},
		// HBH(8) DestOpts(8) SRH(24) are unfragmentable; AH and the last DestOpts are not.
		{Packet{Src: a6, Dst: b6, Proto: flow.ProtoICMPv6, ICMPType: 128, Payload: 2500, Link: packet.LinkIPv6,
			IPv6Ext: []Ext{{ExtHopByHop, 2}, {ExtDestOpts, 2}, {ExtRouting, 16}, {ExtAH, 12}, {ExtDestOpts, 9}}}, 1280, 80, 88, 3},
		{Packet{Src: a6, Dst: b6, Proto: flow.ProtoSCTP, Payload: 1999, Link: packet.LinkSLL, IPv6Ext: []Ext{{ExtAH, 12}}}, 1000, 40, 48, 3},
		{Packet{Src: a6, Dst: b6, Proto: flow.ProtoUDP, Payload: 100, Link: packet.LinkEthernet}, 1280, 40, 40, 1}, // fits: not fragmented
	}
	for i, c := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			c.p.ID = 0xabcd1234
			orig := c.p.AppendIP(nil)
			frags := c.p.Fragments(c.mtu)
			if len(frags) != c.wantFrags {
				t.Fatalf("%d fragments, want %d", len(frags), c.wantFrags)
			}
			var data []byte
			for k, f := range frags {
				q, err := parseFrame(f.Frame, c.p.Link)
				if err != nil {
					t.Fatal(err)
				}
				if q.link != c.p.LinkHeaderLen() || len(q.ip) != f.IPLen {
					t.Fatalf("fragment %d: link %d, IP length %d vs IPLen %d", k, q.link, len(q.ip), f.IPLen)
				}
				if f.IPLen > c.mtu && c.mtu >= 40+c.unfrag {
					t.Fatalf("fragment %d: %d bytes > mtu %d", k, f.IPLen, c.mtu)
				}
				last := k == len(frags)-1
				if q.off != len(data) || f.Offset != q.off || q.off%8 != 0 || q.more != !last || f.More != q.more {
					t.Fatalf("fragment %d: offset %d (Frag %d) more %v, want offset %d more %v", k, q.off, f.Offset, q.more, len(data), !last)
				}
				if err := checkSums(&q); err != nil {
					t.Fatalf("fragment %d: %v", k, err)
				}
				if len(frags) == 1 {
					if q.frag || !bytes.Equal(q.ip, orig) {
						t.Fatal("unfragmented packet changed")
					}
					return
				}
				var hdr int
				if c.p.is4() {
					hdr = q.l4Off
					if q.id != c.p.ID&0xffff {
						t.Fatalf("IPv4 ID %#x", q.id)
					}
				} else {
					hdr = q.fragHdr + 8
					if q.id != c.p.ID || q.ip[q.fragHdr] != orig[nextHeaderAt(c.p)] {
						t.Fatalf("IPv6 fragment ID %#x, next header %d", q.id, q.ip[q.fragHdr])
					}
					u := append([]byte(nil), orig[:c.unfrag]...)
					u[nextHeaderAt(c.p)] = ExtFragment
					if !bytes.Equal(q.ip[8:q.fragHdr], u[8:]) || q.ip[6] != u[6] || q.fragHdr != c.unfrag {
						t.Fatalf("unfragmentable part differs")
					}
				}
				want := c.laterHdr
				if k == 0 {
					want = c.unfrag
					if !c.p.is4() {
						want += 8
					}
				}
				if hdr != want {
					t.Fatalf("fragment %d: header %d bytes, want %d", k, hdr, want)
				}
				if !last && (len(q.ip)-hdr)%8 != 0 {
					t.Fatalf("fragment %d: data %d bytes, not a multiple of 8", k, len(q.ip)-hdr)
				}
				data = append(data, q.ip[hdr:]...)
			}
			if !bytes.Equal(data, orig[c.unfrag:]) {
				t.Fatalf("reassembled %d bytes differ from the original %d", len(data), len(orig)-c.unfrag)
			}
			// The transport checksum covers the reassembled datagram.
			whole := append(append([]byte(nil), orig[:c.unfrag]...), data...)
			q, err := parseFrame(whole, packet.LinkRaw)
			if err != nil || q.frag {
				t.Fatal(err)
			}
			if err := checkSums(&q); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// nextHeaderAt is the offset, in the original packet, of the next-header
// field that names the first fragmentable header.
func nextHeaderAt(p Packet) int {
	at, pos := 6, 40
	for _, e := range p.IPv6Ext[:p.unfragmentable()] {
		at = pos
		pos += extLen(e)
	}
	return at
}

func TestCopiedOptions(t *testing.T) {
	in := []byte{0x01, 0x07, 0x07, 0x04, 0, 0, 0, 0, 0x94, 0x04, 0, 0, 0x89, 0x03, 0x01, 0x00}
	want := []byte{0x94, 0x04, 0, 0, 0x89, 0x03, 0x01, 0}
	if got := copiedOptions(in); !bytes.Equal(got, want) {
		t.Fatalf("copiedOptions = % x, want % x", got, want)
	}
	if got := copiedOptions([]byte{0x94, 0x09, 0}); len(got) != 0 {
		t.Fatalf("malformed option copied: % x", got)
	}
}

// FuzzFragments builds packets from arbitrary IPv4 options, extension
// header lists, payload sizes and MTUs: no panic, every fragment within the
// MTU (or carrying the 8-byte minimum), and the pieces reassemble.
func FuzzFragments(f *testing.F) {
	f.Add([]byte{0x94, 0x04, 0, 0, 0x07, 0x0b, 0x04}, []byte{}, uint16(4000), uint16(1500), false)
	f.Add([]byte{}, []byte{0, 2, 60, 4, 43, 20, 51, 0, 60, 9}, uint16(3000), uint16(1280), true)
	f.Add([]byte{0x01, 0x83, 0x02}, []byte{44, 0, 99, 3}, uint16(100), uint16(20), true)
	f.Fuzz(func(t *testing.T, opts, exts []byte, payload, mtu uint16, v6 bool) {
		p := Packet{Link: packet.LinkEthernet, Src: a4, Dst: b4, Proto: flow.ProtoUDP, Payload: int(payload) % 20000, IPv4Options: opts, ID: 9}
		if v6 {
			p.Src, p.Dst, p.IPv4Options = a6, b6, nil
			for i := 0; i+1 < len(exts) && len(p.IPv6Ext) < 8; i += 2 {
				if exts[i] != ExtFragment {
					p.IPv6Ext = append(p.IPv6Ext, Ext{exts[i], int(exts[i+1])})
				}
			}
		}
		orig := p.AppendIP(nil)
		if len(orig) != p.IPLen() {
			t.Fatalf("IP %d bytes, IPLen %d", len(orig), p.IPLen())
		}
		unfrag := 0
		if v6 {
			unfrag = 40
			for _, e := range p.IPv6Ext[:p.unfragmentable()] {
				unfrag += extLen(e)
			}
		}
		var data []byte
		frags := p.Fragments(int(mtu))
		for k, fr := range frags {
			ip := fr.Frame[p.LinkHeaderLen():][:fr.IPLen]
			if len(orig) <= int(mtu) {
				if len(frags) != 1 || !bytes.Equal(ip, orig) {
					t.Fatal("single fragment differs from the packet")
				}
				return
			}
			hdr := int(ip[0]&0x0f) * 4
			if v6 {
				hdr = unfrag + 8
			}
			if fr.IPLen > int(mtu) && fr.IPLen-hdr > 8 && k < len(frags)-1 {
				t.Fatalf("fragment %d: %d bytes over mtu %d", k, fr.IPLen, mtu)
			}
			if fr.Offset != len(data) {
				t.Fatalf("fragment %d offset %d, want %d", k, fr.Offset, len(data))
			}
			data = append(data, ip[hdr:]...)
		}
		if v6 && !bytes.Equal(data, orig[unfrag:]) || !v6 && !bytes.Equal(data, orig[int(orig[0]&0x0f)*4:]) {
			t.Fatal("fragments do not reassemble")
		}
	})
}
