package packet

import "encoding/binary"

// Builders for the link types and encapsulations beyond Ethernet and
// cooked captures, written from their specs (libpcap's LINKTYPE_ pages,
// RFC 1661/1662, 2516, 3032, 4448, 7348, 8926, 2784/2890).

// null appends a BSD loopback header: the address family, little-endian
// (as an x86 host writes LINKTYPE_NULL) or big-endian (LINKTYPE_LOOP).
func (f *fb) null(fam uint32, big bool) *fb {
	b := binary.LittleEndian.AppendUint32(nil, fam)
	if big {
		b = be32(fam)
	}
	return f.add(ReasonTruncatedLink, b...)
}

// ppp appends a PPP header: the HDLC address and control bytes if hdlc,
// then the protocol, in one byte if it allows compression and compress.
func (f *fb) ppp(proto uint16, hdlc, compress bool) *fb {
	var b []byte
	if hdlc {
		b = append(b, 0xff, 0x03)
	}
	if compress && proto < 0x100 && proto&1 == 1 {
		b = append(b, byte(proto))
	} else {
		b = append(b, be16(proto)...)
	}
	return f.add(ReasonTruncatedLink, b...)
}

// chdlc appends a Cisco HDLC header.
func (f *fb) chdlc(et uint16) *fb {
	return f.add(ReasonTruncatedLink, cat([]byte{0x0f, 0x00}, be16(et))...)
}

// pppoe appends a PPPoE session header (session 0x1234) and a PPP protocol.
func (f *fb) pppoe(proto uint16) *fb {
	return f.add(ReasonTruncatedPPPoE, cat([]byte{0x11, 0x00}, be16(0x1234), be16(0), be16(proto))...)
}

// mpls appends a label stack, bottom of stack on the last label.
func (f *fb) mpls(labels ...uint32) *fb {
	for i, l := range labels {
		e := l<<12 | 64 // TTL 64
		if i == len(labels)-1 {
			e |= 1 << 8
		}
		f.add(ReasonTruncatedMPLS, be32(e)...)
	}
	f.mplsBytes = 1
	return f
}

// pw appends an Ethernet pseudowire's control word and Ethernet header.
func (f *fb) pw(et uint16) *fb {
	f.mplsBytes = 0
	f.add(ReasonTruncatedMPLS, 0, 0, 0, 1) // control word: sequence number 1
	return f.add(ReasonTruncatedMPLS, cat([]byte{0x02, 0, 0, 0, 0, 0x03, 0x02, 0, 0, 0, 0, 0x04}, be16(et))...)
}

// pwNoCW appends an Ethernet pseudowire's Ethernet header without a
// control word (the destination MAC begins with a 0 nibble, like one).
func (f *fb) pwNoCW(et uint16) *fb {
	f.mplsBytes = 0
	f.add(ReasonTruncatedMPLS, cat([]byte{0x00, 0x1b, 0x21, 0, 0, 0x03, 0x00, 0x1b, 0x21, 0, 0, 0x04}, be16(et))...)
	f.mplsBytes = pwControlWord // the decoder needs the 4 bytes after it to tell
	return f
}

// innerEth appends an Ethernet header inside a tunnel, cut with reason.
func (f *fb) innerEth(et uint16, reason Reason) *fb {
	return f.add(reason, cat([]byte{0x02, 0, 0, 0, 0, 0x05, 0x02, 0, 0, 0, 0, 0x06}, be16(et))...)
}

// sllh appends a Linux cooked v1 header of ARPHRD type hatype.
func (f *fb) sllh(hatype, proto uint16) *fb {
	return f.add(ReasonTruncatedLink, cat(be16(0), be16(hatype), be16(0), make([]byte, 8), be16(proto))...)
}

// sll2h appends a Linux cooked v2 header of ARPHRD type hatype.
func (f *fb) sll2h(hatype, proto uint16) *fb {
	return f.add(ReasonTruncatedLink, cat(be16(proto), be16(0), be32(3), be16(hatype), []byte{0, 0}, make([]byte, 8))...)
}

// nflog appends an NFLOG header, a packet-header TLV with hwProto (if not
// 0), a prefix TLV whose 5-byte value needs padding, and the payload TLV's
// header, whose length done() fills in. le writes the TLVs little-endian.
func (f *fb) nflog(fam uint8, hwProto uint16, le bool) *fb {
	u16 := func(v uint16) []byte {
		if le {
			return binary.LittleEndian.AppendUint16(nil, v)
		}
		return be16(v)
	}
	tlv := func(typ uint16, v []byte) []byte {
		b := cat(u16(uint16(4+len(v))), u16(typ), v)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return b
	}
	b := []byte{fam, 0, 0, 5} // family, version 0, resource ID (group) 5
	if hwProto != 0 {
		b = append(b, tlv(1, cat(be16(hwProto), []byte{1, 0}))...) // NFULA_PACKET_HDR: hw_protocol, hook, pad
	}
	b = append(b, tlv(10, []byte("drop\x00"))...) // NFULA_PREFIX
	f.add(ReasonTruncatedLink, b...)
	f.tlvLen, f.tlvLE = len(f.b), le
	return f.add(ReasonTruncatedLink, cat(u16(0), u16(9))...) // NFULA_PAYLOAD
}

// vxlan appends a UDP header to port dport and a VXLAN header (VNI 42).
func (f *fb) vxlan(sport, dport uint16) *fb {
	f.udp(sport, dport)
	return f.plain(0x08, 0, 0, 0, 0, 0, 42, 0)
}

// geneve appends a UDP header to 6081 and a Geneve header with optLen
// bytes of options (a multiple of 4) announcing proto.
func (f *fb) geneve(sport, proto uint16, optLen int) *fb {
	f.udp(sport, 6081)
	f.plain(cat([]byte{byte(optLen / 4), 0}, be16(proto), []byte{0, 0, 42, 0})...)
	return f.plain(make([]byte, optLen)...)
}

// gre appends a GRE header with the given flags (checksum, key, sequence
// fields are added as the flags say) and protocol type.
func (f *fb) gre(flags, proto uint16) *fb {
	f.plain(cat(be16(flags), be16(proto))...)
	for _, bit := range []uint16{0x8000, 0x2000, 0x1000} {
		if flags&bit != 0 {
			f.plain(0, 0, 0, 7)
		}
	}
	return f
}
