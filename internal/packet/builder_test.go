package packet

import (
	"encoding/binary"
	"net/netip"

	"github.com/weir-dev/weir/internal/flow"
)

// Test frames are built byte by byte here, independent of any other weir
// package. The builder also records, for every header, which Reason a
// capture cut inside it must produce: a prefix of length L fails with the
// reason of the first cut whose end is > L, and a prefix at least as long
// as the last cut decodes exactly like the whole frame.

// Addresses used across the tests.
const (
	a4 = "192.0.2.1"
	b4 = "198.51.100.7"
	a6 = "2001:db8::1"
	b6 = "2001:db8:0:1::2"
)

// cut says what a capture that ends before end (and after the previous
// cut's end) must give: an error with reason, or, for a cut IPv4 options
// area or IPv6 extension header, the whole packet's key and length in a
// portless flow of protocol proto.
type cut struct {
	end      int
	reason   Reason
	portless bool
	proto    uint8
}

type fb struct {
	link   LinkType
	b      []byte
	cuts   []cut
	ips    []ipMark // IP headers whose lengths done() patches (an outer and an inner one in tunnels)
	tlvLen int      // where the NFLOG payload TLV's length done() patches is, 0: none
	tlvLE  bool     // in little-endian order
	nh     uint8    // the last Next Header written: the type of the next IPv6 extension header

	mplsBytes int // how many of the next bytes added a cut inside of fails as truncated_mpls
}

// ipMark is an IP header done() gives the length of everything after its start.
type ipMark struct{ start, ver int }

func newFrame(link LinkType) *fb { return &fb{link: link} }

// add appends a header that a capture cut inside of fails with reason.
func (f *fb) add(reason Reason, bs ...byte) *fb {
	if n := min(f.mplsBytes, len(bs)); n > 0 {
		// What follows a label stack is told by its first nibble, and a
		// pseudowire without control word by its first 18 bytes: a
		// capture ending before them ends in the MPLS layer.
		f.mplsBytes -= n
		f.b = append(f.b, bs[:n]...)
		f.cuts = append(f.cuts, cut{end: len(f.b), reason: ReasonTruncatedMPLS})
		bs = bs[n:]
	}
	f.b = append(f.b, bs...)
	f.cuts = append(f.cuts, cut{end: len(f.b), reason: reason})
	return f
}

// addPortless appends a header that a capture cut inside of turns into a
// portless flow of protocol proto (see cut).
func (f *fb) addPortless(proto uint8, bs ...byte) *fb {
	f.b = append(f.b, bs...)
	f.cuts = append(f.cuts, cut{end: len(f.b), portless: true, proto: proto})
	return f
}

// plain appends bytes the decoder does not need (payload, padding).
func (f *fb) plain(bs ...byte) *fb {
	f.b = append(f.b, bs...)
	return f
}

func be16(v uint16) []byte { return []byte{byte(v >> 8), byte(v)} }
func be32(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
func ip(s string) []byte { return netip.MustParseAddr(s).AsSlice() }

// eth appends an Ethernet II header (or an 802.3 one if et < 0x600).
func (f *fb) eth(et uint16) *fb {
	return f.add(ReasonTruncatedLink, cat(
		[]byte{0x02, 0, 0, 0, 0, 0x01}, // destination MAC
		[]byte{0x02, 0, 0, 0, 0, 0x02}, // source MAC
		be16(et))...)
}

// sll appends a Linux cooked capture v1 header.
func (f *fb) sll(proto uint16) *fb {
	return f.add(ReasonTruncatedLink, cat(
		be16(0),         // packet type: to us
		be16(1),         // ARPHRD_ETHER
		be16(6),         // address length
		make([]byte, 8), // address (padded to 8)
		be16(proto))...)
}

// sll2 appends a Linux cooked capture v2 header.
func (f *fb) sll2(proto uint16) *fb {
	return f.add(ReasonTruncatedLink, cat(
		be16(proto),
		be16(0),             // reserved
		be32(3),             // interface index
		be16(1),             // ARPHRD_ETHER
		[]byte{4, 6},        // packet type (outgoing), address length
		make([]byte, 8))...) // address
}

// vlan appends one 802.1Q-style tag: TCI then the inner ethertype.
func (f *fb) vlan(tci, inner uint16) *fb {
	return f.add(ReasonTruncatedVLAN, cat(be16(tci), be16(inner))...)
}

// v4 describes an IPv4 header.
type v4 struct {
	src, dst string
	proto    uint8
	id       uint16
	frag     uint16 // flags (MF = 0x2000) | offset in 8-octet units
	opts     []byte // options, a multiple of 4 bytes
	ihl      int    // 0: computed from opts
	tl       int    // with fixTL: the total length to write
	fixTL    bool   // false: done() writes the real length
}

func (f *fb) ipv4(h v4) *fb {
	ihl := h.ihl
	if ihl == 0 {
		ihl = 5 + len(h.opts)/4
	}
	start := len(f.b)
	f.add(ReasonTruncatedIPv4, cat(
		[]byte{0x40 | byte(ihl&0x0f), 0},
		be16(uint16(h.tl)),
		be16(h.id), be16(h.frag),
		[]byte{64, h.proto}, be16(0), // TTL, protocol, checksum
		ip(h.src), ip(h.dst))...)
	if len(h.opts) > 0 {
		f.addPortless(h.proto, h.opts...)
	}
	if !h.fixTL {
		f.ips = append(f.ips, ipMark{start, 4})
	}
	return f
}

// ipv6 appends a fixed IPv6 header whose payload length done() fills in.
func (f *fb) ipv6(src, dst string, nh uint8) *fb {
	f.ipv6pl(src, dst, nh, 0)
	f.ips = append(f.ips, ipMark{len(f.b) - 40, 6})
	return f
}

// ipv6pl appends a fixed IPv6 header with a literal payload length.
func (f *fb) ipv6pl(src, dst string, nh uint8, pl uint16) *fb {
	f.nh = nh
	return f.add(ReasonTruncatedIPv6, cat(
		[]byte{0x60, 0, 0, 0}, be16(pl), []byte{nh, 64}, ip(src), ip(dst))...)
}

// ext appends a hop-by-hop / routing / destination options / mobility
// header of total length n (a multiple of 8), padded with Pad1 options.
func (f *fb) ext(nh uint8, n int) *fb {
	h := make([]byte, n)
	h[0], h[1] = nh, byte(n/8-1)
	own := f.nh
	f.nh = nh
	return f.addPortless(own, h...)
}

// ah appends an Authentication Header of total length n (a multiple of 4).
func (f *fb) ah(nh uint8, n int) *fb {
	h := make([]byte, n)
	h[0], h[1] = nh, byte(n/4-2)
	own := f.nh
	f.nh = nh
	return f.addPortless(own, h...)
}

// jumbo appends a hop-by-hop header holding a Jumbo Payload option.
func (f *fb) jumbo(nh uint8, length uint32) *fb {
	f.nh = nh
	return f.add(ReasonIPv6ExtTruncated, cat([]byte{nh, 0, 0xc2, 4}, be32(length))...)
}

// frag6 appends an IPv6 Fragment header (offset in 8-octet units).
func (f *fb) frag6(nh uint8, offset uint16, more bool, id uint32) *fb {
	fo := offset << 3
	if more {
		fo |= 1
	}
	own := f.nh
	f.nh = nh
	return f.addPortless(own, cat([]byte{nh, 0}, be16(fo), be32(id))...)
}

// tcp appends a 20-byte TCP header; the decoder needs it through the flags.
func (f *fb) tcp(sp, dp uint16, flags uint8) *fb {
	f.add(ReasonTruncatedTransport, cat(be16(sp), be16(dp), be32(1000), be32(0), []byte{0x50, flags})...)
	return f.plain(cat(be16(65535), be16(0), be16(0))...)
}

// l4 appends a transport header of n bytes starting with the two ports
// (UDP 8, UDP-Lite 8, SCTP 12, DCCP 16).
func (f *fb) l4(sp, dp uint16, n int) *fb {
	f.add(ReasonTruncatedTransport, cat(be16(sp), be16(dp))...)
	return f.plain(make([]byte, n-4)...)
}

func (f *fb) udp(sp, dp uint16) *fb { return f.l4(sp, dp, 8) }

// icmp appends an 8-byte ICMP or ICMPv6 header.
func (f *fb) icmp(typ, code uint8) *fb {
	f.add(ReasonTruncatedTransport, typ, code)
	return f.plain(0, 0, 0, 1, 0, 1) // checksum, identifier, sequence
}

func (f *fb) payload(n int) *fb {
	for i := 0; i < n; i++ {
		f.b = append(f.b, byte(i))
	}
	return f
}

// done writes the IP lengths of the packets started by ipv4/ipv6 (up to
// here), and the NFLOG payload TLV's length.
func (f *fb) done() *fb {
	for _, m := range f.ips {
		n := len(f.b) - m.start
		if m.ver == 4 {
			binary.BigEndian.PutUint16(f.b[m.start+2:], uint16(n))
		} else {
			binary.BigEndian.PutUint16(f.b[m.start+4:], uint16(n-40))
		}
	}
	f.ips = nil
	if f.tlvLen != 0 {
		n := uint16(len(f.b) - f.tlvLen)
		if f.tlvLE {
			binary.LittleEndian.PutUint16(f.b[f.tlvLen:], n)
		} else {
			binary.BigEndian.PutUint16(f.b[f.tlvLen:], n)
		}
		f.tlvLen = 0
	}
	return f
}

// need returns the shortest prefix that decodes like the whole frame.
func (f *fb) need() int {
	if len(f.cuts) == 0 {
		return 0
	}
	return f.cuts[len(f.cuts)-1].end
}

// cutAt returns what a prefix of n bytes must give.
func (f *fb) cutAt(n int) cut {
	if n == 0 && f.link == LinkRaw {
		return cut{reason: ReasonTruncatedLink}
	}
	for _, c := range f.cuts {
		if n < c.end {
			return c
		}
	}
	panic("prefix is not truncated")
}

// key builds an expected flow key.
func key(src, dst string, proto uint8, sp, dp uint16) flow.Key {
	s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
	k := flow.Key{SrcAddr: s.As16(), DstAddr: d.As16(), Proto: proto, SrcPort: sp, DstPort: dp, IPVersion: 6}
	if s.Is4() {
		k.IPVersion = 4
	}
	return k
}

// icmpKey builds an expected ICMP/ICMPv6 flow key.
func icmpKey(src, dst string, proto, typ, code uint8) flow.Key {
	k := key(src, dst, proto, 0, 0)
	k.ICMPType, k.ICMPCode = typ, code
	return k
}

// vlans appends n 802.1Q tags, the last one announcing inner.
func (f *fb) vlans(n int, inner uint16) *fb {
	for i := 0; i < n; i++ {
		et := uint16(ethType8021Q)
		if i == n-1 {
			et = inner
		}
		f.vlan(uint16(100+i), et)
	}
	return f
}
