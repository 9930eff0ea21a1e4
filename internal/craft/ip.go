package craft

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/weir-dev/weir/internal/flow"
)

// v4Options returns the IPv4 options zero-padded to 4 bytes, at most 40.
func (p *Packet) v4Options() []byte {
	o := p.IPv4Options
	if len(o) > 40 {
		o = o[:40]
	}
	if len(o)%4 == 0 {
		return o
	}
	out := make([]byte, pad(len(o), 4))
	copy(out, o)
	return out
}

// extLen is the on-wire length of an IPv6 extension header.
func extLen(e Ext) int {
	n := e.Len
	if n < 0 {
		n = 0
	}
	switch e.Type {
	case ExtRouting:
		return 8 + 16*routingSegments(n)
	case ExtFragment:
		return 8
	case ExtAH:
		return pad(12+ahICV(n), 8)
	case ExtHopByHop, ExtDestOpts:
		return pad(4+min(n, 255), 8)
	}
	return pad(2+n, 8)
}

func routingSegments(n int) int { return max(1, (n+15)/16) }

func ahICV(n int) int {
	if n == 0 {
		return 12
	}
	return n
}

// AppendIP appends the IP packet alone (no link header) to dst.
func (p *Packet) AppendIP(dst []byte) []byte {
	start := len(dst)
	total := p.IPLen()
	var nh uint8 // next header of the last IP-layer header
	if p.is4() {
		opts := p.v4Options()
		dst = append(dst, 0x40|byte((20+len(opts))/4), 0)
		dst = be16(dst, uint16(total))
		dst = be16(dst, uint16(p.ID))
		dst = append(dst, 0, 0, p.ttl(), p.Proto, 0, 0)
		s, d := addr4(p.Src), addr4(p.Dst)
		dst = append(dst, s[:]...)
		dst = append(dst, d[:]...)
		dst = append(dst, opts...)
		h := dst[start:]
		put16(h[10:], Checksum(h))
	} else {
		nh = p.Proto
		if len(p.IPv6Ext) > 0 {
			nh = p.IPv6Ext[0].Type
		}
		dst = append(dst, 0x60, 0, 0, 0)
		dst = be16(dst, uint16(total-40))
		dst = append(dst, nh, p.ttl())
		s, d := addr16(p.Src), addr16(p.Dst)
		dst = append(dst, s[:]...)
		dst = append(dst, d[:]...)
		for i, e := range p.IPv6Ext {
			next := p.Proto
			if i+1 < len(p.IPv6Ext) {
				next = p.IPv6Ext[i+1].Type
			}
			dst = p.appendExt(dst, e, next)
		}
	}
	return p.appendTransport(dst, dst[start:start+p.ipHeaderLen()])
}

// appendExt appends one IPv6 extension header whose next header is next.
func (p *Packet) appendExt(dst []byte, e Ext, next uint8) []byte {
	n := max(e.Len, 0)
	size := extLen(e)
	switch e.Type {
	case ExtRouting:
		segs := routingSegments(n)
		dst = append(dst, next, byte(2*segs), 4, 0, byte(segs-1), 0, 0, 0)
		d := addr16(p.Dst)
		dst = append(dst, d[:]...) // segment 0: the final destination
		for i := 1; i < segs; i++ {
			dst = append(dst, 0x20, 0x01, 0x0d, 0xb8, 0x5e, 0x90, 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(i))
		}
	case ExtFragment:
		dst = append(dst, next, 0, 0, 0)
		dst = be32(dst, p.ID)
	case ExtAH:
		dst = append(dst, next, byte(size/4-2), 0, 0)
		dst = be32(dst, 0x100) // SPI
		dst = be32(dst, 1)     // sequence number
		for i := 12; i < size; i++ {
			dst = append(dst, Pattern(i))
		}
	case ExtHopByHop, ExtDestOpts:
		n = min(n, 255)
		dst = append(dst, next, byte(size/8-1), 0x1e, byte(n))
		for i := range n {
			dst = append(dst, Pattern(i))
		}
		switch r := size - 4 - n; {
		case r == 1:
			dst = append(dst, 0) // Pad1
		case r >= 2:
			dst = append(dst, 1, byte(r-2)) // PadN
			for range r - 2 {
				dst = append(dst, 0)
			}
		}
	default:
		dst = append(dst, next, byte(size/8-1))
		for i := 2; i < size; i++ {
			dst = append(dst, Pattern(i))
		}
	}
	return dst
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendTransport appends the transport header and payload; ip is the IP
// header (with options/extensions) already written, for the pseudo-header.
func (p *Packet) appendTransport(dst, ip []byte) []byte {
	start := len(dst)
	tl := p.transportLen()
	switch p.Proto {
	case flow.ProtoTCP:
		dst = be16(dst, p.SrcPort)
		dst = be16(dst, p.DstPort)
		dst = be32(dst, p.Seq)
		dst = be32(dst, p.Ack)
		dst = append(dst, 5<<4, p.TCPFlags)
		dst = be16(dst, 65535) // window
		dst = be16(dst, 0)     // checksum
		dst = be16(dst, 0)     // urgent pointer
	case flow.ProtoUDP:
		dst = be16(dst, p.SrcPort)
		dst = be16(dst, p.DstPort)
		dst = be16(dst, uint16(tl))
		dst = be16(dst, 0)
	case flow.ProtoSCTP:
		dst = be16(dst, p.SrcPort)
		dst = be16(dst, p.DstPort)
		dst = be32(dst, p.Ack)                     // verification tag
		dst = be32(dst, 0)                         // checksum
		dst = append(dst, 0, 0x03)                 // DATA chunk, B and E flags
		dst = be16(dst, uint16(16+p.payloadLen())) // chunk length excludes padding
		dst = be32(dst, p.Seq)                     // TSN
		dst = be16(dst, 0)                         // stream identifier
		dst = be16(dst, uint16(p.Seq))             // stream sequence number
		dst = be32(dst, 0)                         // payload protocol identifier
	case flow.ProtoICMP, flow.ProtoICMPv6:
		dst = append(dst, p.ICMPType, p.ICMPCode, 0, 0)
		dst = be32(dst, p.Seq)
	}
	if p.Body != nil {
		dst = append(dst, p.Body...)
	} else {
		for i := range p.payloadLen() {
			dst = append(dst, Pattern(i))
		}
	}
	for len(dst)-start < tl {
		dst = append(dst, 0) // SCTP chunk padding
	}
	seg := dst[start:]
	switch p.Proto {
	case flow.ProtoTCP:
		put16(seg[16:], p.pseudoChecksum(ip, seg))
	case flow.ProtoUDP:
		c := p.pseudoChecksum(ip, seg)
		if c == 0 {
			c = 0xffff // RFC 768: a computed zero is sent as all ones
		}
		put16(seg[6:], c)
	case flow.ProtoICMPv6:
		put16(seg[2:], p.pseudoChecksum(ip, seg))
	case flow.ProtoICMP:
		put16(seg[2:], Checksum(seg))
	case flow.ProtoSCTP:
		// RFC 9260 appendix A: CRC32c, stored least significant byte first.
		binary.LittleEndian.PutUint32(seg[8:], crc32.Checksum(seg, castagnoli))
	}
	return dst
}

// pseudoChecksum is the Internet checksum of seg with the IPv4 or IPv6
// pseudo-header taken from ip (which must be the header p just wrote).
func (p *Packet) pseudoChecksum(ip, seg []byte) uint16 {
	var s uint64
	if p.is4() {
		s = sum(ip[12:20], 0)
		s += uint64(p.Proto) + uint64(len(seg))
	} else {
		s = sum(ip[8:40], 0)
		s += uint64(len(seg)>>16) + uint64(len(seg)&0xffff) + uint64(p.Proto)
	}
	return fold(sum(seg, s))
}

// Checksum returns the Internet checksum (RFC 1071) of b.
func Checksum(b []byte) uint16 { return fold(sum(b, 0)) }

// sum adds b as big-endian 16-bit words to s.
func sum(b []byte, s uint64) uint64 {
	n := len(b) &^ 1
	for i := 0; i < n; i += 2 {
		s += uint64(b[i])<<8 | uint64(b[i+1])
	}
	if len(b)&1 == 1 {
		s += uint64(b[len(b)-1]) << 8
	}
	return s
}

// fold folds the carries of s and returns its one's complement.
func fold(s uint64) uint16 {
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}
