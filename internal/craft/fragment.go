package craft

// Frag is one IP fragment, framed with the packet's link header.
type Frag struct {
	Frame  []byte // link header + IP fragment (+ Ethernet padding)
	IPLen  int    // IP total length of this fragment
	Offset int    // fragment offset in bytes into the fragmentable part
	More   bool   // the MF / M flag
}

// Fragments splits the IP packet into real fragments of at most mtu bytes of
// IP each and frames every one with the link header.
//
// IPv4: every fragment repeats the header with total length, MF and offset
// set and the checksum recomputed; fragments after the first carry only the
// options with the copy bit (RFC 791). IPv6: the unfragmentable part (IPv6
// header plus extension headers up to the last routing header, or the
// hop-by-hop header) is repeated, followed by a fragment header with ID and
// the fragmentable part (RFC 8200 section 4.5).
//
// A packet whose IPLen fits in mtu is returned whole as one unfragmented
// Frag. Each fragment carries at least 8 bytes of data even if that exceeds
// mtu. The transport checksum covers the whole datagram, as on the wire.
func (p *Packet) Fragments(mtu int) []Frag {
	ip := p.AppendIP(nil)
	if len(ip) <= mtu {
		return []Frag{{Frame: p.appendFrame(nil, ip), IPLen: len(ip)}}
	}
	if p.is4() {
		return p.fragments4(ip, mtu)
	}
	return p.fragments6(ip, mtu)
}

func (p *Packet) fragments4(ip []byte, mtu int) []Frag {
	hl := int(ip[0]&0x0f) * 4
	first := ip[:hl]
	later := append([]byte(nil), ip[:20]...)
	later = append(later, copiedOptions(ip[20:hl])...)
	later[0] = 0x40 | byte(len(later)/4)
	data := ip[hl:]
	var out []Frag
	for off := 0; off < len(data); {
		h := later
		if off == 0 {
			h = first
		}
		n := max((mtu-len(h))&^7, 8)
		more := off+n < len(data)
		if !more {
			n = len(data) - off
		}
		f := append([]byte(nil), h...)
		f = append(f, data[off:off+n]...)
		put16(f[2:], uint16(len(f)))
		fo := uint16(off / 8)
		if more {
			fo |= 0x2000 // MF
		}
		put16(f[6:], fo)
		put16(f[10:], 0)
		put16(f[10:], Checksum(f[:len(h)]))
		out = append(out, Frag{Frame: p.appendFrame(nil, f), IPLen: len(f), Offset: off, More: more})
		off += n
	}
	return out
}

// copiedOptions returns the options with the copy flag, zero-padded to 4.
func copiedOptions(opts []byte) []byte {
	var out []byte
	for i := 0; i < len(opts); {
		t := opts[i]
		if t == 0 { // end of option list
			break
		}
		if t == 1 { // no-operation
			i++
			continue
		}
		if i+1 >= len(opts) || opts[i+1] < 2 || i+int(opts[i+1]) > len(opts) {
			break // malformed: stop copying
		}
		l := int(opts[i+1])
		if t&0x80 != 0 {
			out = append(out, opts[i:i+l]...)
		}
		i += l
	}
	for len(out)%4 != 0 {
		out = append(out, 0)
	}
	return out
}

// unfragmentable returns how many of p.IPv6Ext stay in the unfragmentable
// part: up to the last routing header, else a leading hop-by-hop header.
func (p *Packet) unfragmentable() int {
	n := 0
	for i, e := range p.IPv6Ext {
		if e.Type == ExtRouting {
			n = i + 1
		}
	}
	if n == 0 && len(p.IPv6Ext) > 0 && p.IPv6Ext[0].Type == ExtHopByHop {
		n = 1
	}
	return n
}

func (p *Packet) fragments6(ip []byte, mtu int) []Frag {
	nhPos, pos := 6, 40 // where the next-header field pointing past pos is
	for _, e := range p.IPv6Ext[:p.unfragmentable()] {
		nhPos = pos
		pos += extLen(e)
	}
	unfrag := append([]byte(nil), ip[:pos]...)
	nextHdr := unfrag[nhPos]
	unfrag[nhPos] = ExtFragment
	data := ip[pos:]
	n0 := max((mtu-len(unfrag)-8)&^7, 8)
	var out []Frag
	for off := 0; off < len(data); {
		n := n0
		more := off+n < len(data)
		if !more {
			n = len(data) - off
		}
		f := append([]byte(nil), unfrag...)
		f = append(f, nextHdr, 0)
		fo := uint16(off/8) << 3
		if more {
			fo |= 1 // M
		}
		f = be16(f, fo)
		f = be32(f, p.ID)
		f = append(f, data[off:off+n]...)
		put16(f[4:], uint16(len(f)-40))
		out = append(out, Frag{Frame: p.appendFrame(nil, f), IPLen: len(f), Offset: off, More: more})
		off += n
	}
	return out
}
