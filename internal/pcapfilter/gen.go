package pcapfilter

import "fmt"

// Instruction helpers.

func ldAbs(size uint16, k uint32) Instruction { return Instruction{Op: clsLD | size | modeABS, K: k} }
func ldInd(size uint16, k uint32) Instruction { return Instruction{Op: clsLD | size | modeIND, K: k} }
func ldxMSH(k uint32) Instruction             { return Instruction{Op: clsLDX | szB | modeMSH, K: k} }
func aluK(op uint16, k uint32) Instruction    { return Instruction{Op: clsALU | op | srcK, K: k} }

var (
	insLen = Instruction{Op: clsLD | szW | modeLEN}
	insTAX = Instruction{Op: clsMISC | miscTAX}
)

// nl is the offset of the network-layer header.
func (p *parser) nl() uint32 {
	if p.link == LinkEthernet {
		return 14
	}
	return 0
}

// etherType tests the Ethernet type field; LinkRaw has none.
func (p *parser) etherType(et uint32, what string, at token) (*bnode, error) {
	if p.link != LinkEthernet {
		return nil, p.errAt(at, fmt.Sprintf("%s needs an Ethernet link; link type %v has no link-layer header", what, p.link))
	}
	return leaf(jmpJEQ, et, ldAbs(szH, 12)), nil
}

// ipv4 and ipv6 test the network protocol: the Ethernet type, or the
// version nibble on a raw link.
func (p *parser) ipv4() *bnode { return p.ipVersion(etherIP, 0x40) }
func (p *parser) ipv6() *bnode { return p.ipVersion(etherIP6, 0x60) }

func (p *parser) ipVersion(et, nibble uint32) *bnode {
	if p.link == LinkEthernet {
		return leaf(jmpJEQ, et, ldAbs(szH, 12))
	}
	return leaf(jmpJEQ, nibble, ldAbs(szB, 0), aluK(aluAND, 0xf0))
}

// proto4 is "ip proto n".
func (p *parser) proto4(n uint32) *bnode {
	return and(p.ipv4(), leaf(jmpJEQ, n, ldAbs(szB, p.nl()+9)))
}

// proto6 is "ip6 proto n": the next header, or the next header after one
// fragment header (libpcap looks no further).
func (p *parser) proto6(n uint32) *bnode {
	nh := ldAbs(szB, p.nl()+6)
	if n == ipprotoFrag {
		return and(p.ipv6(), leaf(jmpJEQ, n, nh))
	}
	return and(p.ipv6(), or(leaf(jmpJEQ, n, nh),
		and(leaf(jmpJEQ, ipprotoFrag, nh), leaf(jmpJEQ, n, ldAbs(szB, p.nl()+40)))))
}

// abbrev is a protocol name used alone ("tcp", "ip6", "arp").
func (p *parser) abbrev(pr proto, name string) (*bnode, error) {
	switch pr {
	case pIP:
		return p.ipv4(), nil
	case pIP6:
		return p.ipv6(), nil
	case pARP:
		return p.etherType(etherARP, "arp", p.prev())
	case pRARP:
		return p.etherType(etherRARP, "rarp", p.prev())
	case pTCP:
		return or(p.proto4(ipprotoTCP), p.proto6(ipprotoTCP)), nil
	case pUDP:
		return or(p.proto4(ipprotoUDP), p.proto6(ipprotoUDP)), nil
	case pSCTP:
		return or(p.proto4(ipprotoSCTP), p.proto6(ipprotoSCTP)), nil
	case pICMP:
		return p.proto4(ipprotoICMP), nil
	case pICMP6:
		return p.proto6(ipprotoICMPv6), nil
	case pIGMP:
		return p.proto4(ipprotoIGMP), nil
	case pAH:
		return or(p.proto4(ipprotoAH), p.proto6(ipprotoAH)), nil
	case pESP:
		return or(p.proto4(ipprotoESP), p.proto6(ipprotoESP)), nil
	case pPIM:
		return or(p.proto4(ipprotoPIM), p.proto6(ipprotoPIM)), nil
	case pVRRP, pCARP:
		return p.proto4(ipprotoVRRP), nil
	case pIGRP:
		return p.proto4(ipprotoIGRP), nil
	}
	return nil, p.errAt(p.prev(), fmt.Sprintf("%q needs a qualifier such as host, src, dst, proto, broadcast or multicast", name))
}

// dirOf combines the source and destination tests per the direction.
func dirOf(d dir, src, dst func() *bnode) *bnode {
	switch d {
	case dSrc:
		return src()
	case dDst:
		return dst()
	case dAnd:
		return and(src(), dst())
	}
	return or(src(), dst())
}

// masked tests (load & mask) == val; a zero mask is always true and loads
// nothing.
func masked(size uint16, off, val, mask uint32) *bnode {
	switch mask {
	case 0:
		return nodeTrue
	case 0xffffffff:
		return leaf(jmpJEQ, val, ldAbs(size, off))
	}
	return leaf(jmpJEQ, val&mask, ldAbs(size, off), aluK(aluAND, mask))
}

// host4 matches an IPv4 address under mask: in the IP header and, unless
// the protocol says otherwise, in ARP and RARP sender/target fields.
func (p *parser) host4(q qual, addr, mask uint32) (*bnode, error) {
	nl := p.nl()
	ip := func() *bnode {
		return and(p.ipv4(), dirOf(q.dir,
			func() *bnode { return masked(szW, nl+12, addr, mask) },
			func() *bnode { return masked(szW, nl+16, addr, mask) }))
	}
	arp := func(chk *bnode) *bnode {
		return and(chk, dirOf(q.dir,
			func() *bnode { return masked(szW, nl+14, addr, mask) },
			func() *bnode { return masked(szW, nl+24, addr, mask) }))
	}
	switch q.proto {
	case pIP:
		return ip(), nil
	case pARP, pRARP:
		et, name := uint32(etherARP), "arp"
		if q.proto == pRARP {
			et, name = etherRARP, "rarp"
		}
		chk, err := p.etherType(et, name, p.prev())
		if err != nil {
			return nil, err
		}
		return arp(chk), nil
	case pDefault:
		if p.link != LinkEthernet {
			return ip(), nil
		}
		// ARP and RARP share the address offsets: test both types first,
		// as libpcap's optimizer does, which keeps long host lists short.
		arpOrRarp := or(leaf(jmpJEQ, etherARP, ldAbs(szH, 12)), leaf(jmpJEQ, etherRARP, ldAbs(szH, 12)))
		return or(ip(), arp(arpOrRarp)), nil
	}
	return nil, p.errAt(p.prev(), fmt.Sprintf("'%v' modifier applied to ip host", q.proto))
}

// host6 matches an IPv6 address under a prefix mask.
func (p *parser) host6(q qual, addr, mask [16]byte) (*bnode, error) {
	if q.proto != pDefault && q.proto != pIP6 {
		return nil, p.errAt(p.prev(), fmt.Sprintf("'%v' modifier applied to ip6 host", q.proto))
	}
	words := func(off uint32) *bnode {
		n := nodeTrue
		for w := uint32(0); w < 4; w++ {
			a := be32(addr[4*w:])
			m := be32(mask[4*w:])
			n = and(n, masked(szW, off+4*w, a, m))
		}
		return n
	}
	nl := p.nl()
	return and(p.ipv6(), dirOf(q.dir,
		func() *bnode { return words(nl + 8) },
		func() *bnode { return words(nl + 24) })), nil
}

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// ether6 tests a 6-byte MAC address at off.
func ether6(off uint32, m [6]byte) *bnode {
	return and(leaf(jmpJEQ, be32(m[2:]), ldAbs(szW, off+2)),
		leaf(jmpJEQ, uint32(m[0])<<8|uint32(m[1]), ldAbs(szH, off)))
}

// etherHost is "ether [src|dst] host MAC".
func (p *parser) etherHost(q qual, m [6]byte) (*bnode, error) {
	if p.link != LinkEthernet {
		return nil, p.errAt(p.prev(), fmt.Sprintf("ether host needs an Ethernet link; link type %v has no link-layer header", p.link))
	}
	return dirOf(q.dir, func() *bnode { return ether6(6, m) }, func() *bnode { return ether6(0, m) }), nil
}

// port matches a TCP/UDP/SCTP port range lo..hi (lo == hi for one port)
// for the transport protocols in protos (IP protocol numbers).
func (p *parser) port(q qual, protos []uint32, lo, hi uint32) *bnode {
	test := func(ld ...Instruction) *bnode {
		if lo == hi {
			return leaf(jmpJEQ, lo, ld...)
		}
		return and(leaf(jmpJGE, lo, ld...), not(leaf(jmpJGT, hi, ld...)))
	}
	protoChain := func(off uint32) *bnode {
		n := nodeFalse
		for _, pr := range protos {
			n = or(n, leaf(jmpJEQ, pr, ldAbs(szB, off)))
		}
		return n
	}
	nl := p.nl()
	v4 := and(p.ipv4(), and(protoChain(nl+9), and(not(leaf(jmpJSET, 0x1fff, ldAbs(szH, nl+6))),
		dirOf(q.dir,
			func() *bnode { return test(ldxMSH(nl), ldInd(szH, nl)) },
			func() *bnode { return test(ldxMSH(nl), ldInd(szH, nl+2)) }))))
	v6 := and(p.ipv6(), and(protoChain(nl+6), dirOf(q.dir,
		func() *bnode { return test(ldAbs(szH, nl+40)) },
		func() *bnode { return test(ldAbs(szH, nl+42)) })))
	return or(v4, v6)
}

// loadBase returns the protocol check for pr[...] and how its offsets
// are based: absolute from base, or (transport) relative to the IPv4
// header length in X plus base.
func (p *parser) loadBase(pr proto, at token) (check *bnode, base uint32, transport bool, err error) {
	if c, ok := p.checks[pr]; ok {
		return c.check, c.base, c.transport, nil
	}
	nl := p.nl()
	switch pr {
	case pLink:
		if p.link != LinkEthernet {
			return nil, 0, false, p.errAt(at, fmt.Sprintf("ether[] needs an Ethernet link; link type %v has no link-layer header", p.link))
		}
		check, base = nodeTrue, 0
	case pIP:
		check, base = p.ipv4(), nl
	case pIP6:
		check, base = p.ipv6(), nl
	case pARP, pRARP:
		et := uint32(etherARP)
		if pr == pRARP {
			et = etherRARP
		}
		if check, err = p.etherType(et, pr.String()+"[]", at); err != nil {
			return nil, 0, false, err
		}
		base = nl
	case pICMP6:
		check, base = and(p.ipv6(), leaf(jmpJEQ, ipprotoICMPv6, ldAbs(szB, nl+6))), nl+40
	case pTCP, pUDP, pSCTP, pICMP, pIGMP, pPIM, pVRRP, pCARP, pIGRP:
		n := map[proto]uint32{pTCP: ipprotoTCP, pUDP: ipprotoUDP, pSCTP: ipprotoSCTP, pICMP: ipprotoICMP,
			pIGMP: ipprotoIGMP, pPIM: ipprotoPIM, pVRRP: ipprotoVRRP, pCARP: ipprotoVRRP, pIGRP: ipprotoIGRP}[pr]
		check = and(p.ipv4(), and(leaf(jmpJEQ, n, ldAbs(szB, nl+9)),
			not(leaf(jmpJSET, 0x1fff, ldAbs(szH, nl+6)))))
		base, transport = nl, true
	default:
		return nil, 0, false, p.errAt(at, fmt.Sprintf("'%v' cannot be indexed with []", pr))
	}
	if p.checks == nil {
		p.checks = map[proto]loadCheck{}
	}
	p.checks[pr] = loadCheck{check, base, transport}
	return check, base, transport, nil
}

// loadCheck caches one protocol's load base, so that "tcp[0] = tcp[2]"
// tests the protocol once (identical check nodes are deduplicated).
type loadCheck struct {
	check     *bnode
	base      uint32
	transport bool
}

// vlanTest is "vlan [id]" through the kernel's ancillary VLAN loads.
func (p *parser) vlanTest(id uint32, hasID bool) (*bnode, error) {
	if p.link != LinkEthernet {
		return nil, p.errAt(p.prev(), fmt.Sprintf("vlan needs an Ethernet link; link type %v carries no VLAN tags", p.link))
	}
	present := not(leaf(jmpJEQ, 0, ldAbs(szW, ancillaryVLANPres)))
	if !hasID {
		return present, nil
	}
	if id > 4095 {
		return nil, p.errAt(p.prev(), "VLAN ID must be 0..4095")
	}
	return and(present, leaf(jmpJEQ, id, ldAbs(szW, ancillaryVLANTag), aluK(aluAND, 0xfff))), nil
}
