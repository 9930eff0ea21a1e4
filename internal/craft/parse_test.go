package craft

// A small, independent parser used only by the tests: it reads the frames
// back from the specs, without sharing code with the builder.

import (
	"encoding/binary"
	"fmt"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
)

type parsed struct {
	link     int    // link header length
	ip       []byte // IP packet (Ethernet padding stripped)
	v4       bool
	src, dst []byte
	proto    uint8  // upper-layer protocol
	l4       []byte // transport bytes (nil in non-first fragments)
	frag     bool
	off      int // fragment offset in bytes
	more     bool
	id       uint32
	fragHdr  int // IPv6: offset of the fragment header in ip
	l4Off    int // offset of the fragmentable/transport part in ip
}

func be(b []byte) uint16 { return binary.BigEndian.Uint16(b) }

func parseFrame(data []byte, link packet.LinkType) (parsed, error) {
	var p parsed
	var et uint16
	switch link {
	case packet.LinkEthernet:
		p.link, et = 14, be(data[12:])
		for et == 0x8100 || et == 0x88a8 {
			et = be(data[p.link+2:])
			p.link += 4
		}
	case packet.LinkSLL:
		p.link, et = 16, be(data[14:])
	case packet.LinkSLL2:
		p.link, et = 20, be(data[0:])
	}
	ip := data[p.link:]
	if len(ip) < 20 {
		return p, fmt.Errorf("short IP")
	}
	v := ip[0] >> 4
	if et != 0 && (et == 0x0800) != (v == 4) {
		return p, fmt.Errorf("ethertype %#x for IP version %d", et, v)
	}
	switch v {
	case 4:
		p.v4 = true
		total := int(be(ip[2:]))
		if total > len(ip) {
			return p, fmt.Errorf("IPv4 total length %d > %d", total, len(ip))
		}
		p.ip = ip[:total]
		hl := int(ip[0]&0x0f) * 4
		p.src, p.dst, p.proto = ip[12:16], ip[16:20], ip[9]
		fo := be(ip[6:])
		p.off, p.more, p.id = int(fo&0x1fff)*8, fo&0x2000 != 0, uint32(be(ip[4:]))
		p.frag = p.off != 0 || p.more
		p.l4Off = hl
	case 6:
		total := 40 + int(be(ip[4:]))
		if total > len(ip) {
			return p, fmt.Errorf("IPv6 length %d > %d", total, len(ip))
		}
		p.ip = ip[:total]
		p.src, p.dst = ip[8:24], ip[24:40]
		nh, pos := ip[6], 40
	walk:
		for {
			switch nh {
			case 0, 43, 60:
				nh, pos = ip[pos], pos+(int(ip[pos+1])+1)*8
			case 51:
				nh, pos = ip[pos], pos+(int(ip[pos+1])+2)*4
			case 44:
				fo := be(ip[pos+2:])
				p.off, p.more = int(fo>>3)*8, fo&1 != 0
				p.frag = p.off != 0 || p.more // an atomic fragment is a whole datagram
				p.id = binary.BigEndian.Uint32(ip[pos+4:])
				p.fragHdr = pos
				nh, pos = ip[pos], pos+8
			default:
				break walk
			}
			if p.frag && p.off != 0 {
				break // the rest is a later piece of the fragmentable part
			}
		}
		p.proto, p.l4Off = nh, pos
	default:
		return p, fmt.Errorf("IP version %d", v)
	}
	if p.off == 0 {
		p.l4 = p.ip[p.l4Off:]
	}
	return p, nil
}

// wireKey is the packet's flow key in wire orientation; ICMP replies are
// keyed by their request type. ports are used for non-first fragments.
func (p *parsed) wireKey(ports [2]uint16) flow.Key {
	var k flow.Key
	if p.v4 {
		flow.SetAddr4(&k.SrcAddr, p.src)
		flow.SetAddr4(&k.DstAddr, p.dst)
		k.IPVersion = 4
	} else {
		copy(k.SrcAddr[:], p.src)
		copy(k.DstAddr[:], p.dst)
		k.IPVersion = 6
	}
	k.Proto = p.proto
	switch p.proto {
	case flow.ProtoTCP, flow.ProtoUDP, flow.ProtoSCTP:
		if p.l4 != nil {
			ports = [2]uint16{be(p.l4), be(p.l4[2:])}
		}
		k.SrcPort, k.DstPort = ports[0], ports[1]
	case flow.ProtoICMP, flow.ProtoICMPv6:
		k.ICMPType, k.ICMPCode = p.l4[0], p.l4[1]
		switch k.ICMPType {
		case 0:
			k.ICMPType = 8
		case 129:
			k.ICMPType = 128
		}
	}
	return k
}

// sum32 is an independent Internet checksum: 32-bit accumulation of
// 16-bit words, folded at the end. It returns the folded sum (not inverted):
// 0xffff means a valid checksum was included.
func sum32(parts ...[]byte) uint16 {
	var all []byte
	for _, p := range parts {
		all = append(all, p...)
	}
	if len(all)%2 == 1 {
		all = append(all, 0)
	}
	var s uint32
	for i := 0; i < len(all); i += 2 {
		s += uint32(all[i])<<8 + uint32(all[i+1])
	}
	for s > 0xffff {
		s = (s >> 16) + (s & 0xffff)
	}
	return uint16(s)
}

// pseudo builds the pseudo-header for a transport segment of length n.
func (p *parsed) pseudo(n int) []byte {
	var b []byte
	b = append(b, p.src...)
	b = append(b, p.dst...)
	if p.v4 {
		return append(b, 0, p.proto, byte(n>>8), byte(n))
	}
	return append(b, byte(n>>24), byte(n>>16), byte(n>>8), byte(n), 0, 0, 0, p.proto)
}

// crc32c is a bitwise CRC-32C (Castagnoli, reflected polynomial 0x82f63b78).
func crc32c(b []byte) uint32 {
	c := ^uint32(0)
	for _, x := range b {
		c ^= uint32(x)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ 0x82f63b78
			} else {
				c >>= 1
			}
		}
	}
	return ^c
}

// checkSums verifies the IPv4 header checksum and, for a whole datagram
// (l4 is all of it), the transport checksum.
func checkSums(p *parsed) error {
	if p.v4 {
		if s := sum32(p.ip[:p.l4Off]); s != 0xffff {
			return fmt.Errorf("IPv4 header checksum: folded sum %#x", s)
		}
	}
	if p.frag || p.l4 == nil {
		return nil
	}
	seg := p.l4
	switch p.proto {
	case flow.ProtoTCP, flow.ProtoUDP, flow.ProtoICMPv6:
		if p.proto == flow.ProtoUDP && be(seg[6:]) == 0 {
			return fmt.Errorf("UDP checksum 0")
		}
		if s := sum32(p.pseudo(len(seg)), seg); s != 0xffff {
			return fmt.Errorf("proto %d checksum: folded sum %#x", p.proto, s)
		}
	case flow.ProtoICMP:
		if s := sum32(seg); s != 0xffff {
			return fmt.Errorf("ICMP checksum: folded sum %#x", s)
		}
	case flow.ProtoSCTP:
		c := append([]byte(nil), seg...)
		want := binary.LittleEndian.Uint32(c[8:])
		copy(c[8:12], []byte{0, 0, 0, 0})
		if got := crc32c(c); got != want {
			return fmt.Errorf("SCTP CRC32c %#x, header has %#x", got, want)
		}
	}
	return nil
}
