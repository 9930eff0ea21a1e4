package pcapfilter

import (
	"fmt"
	"net/netip"

	"github.com/weir-dev/weir/internal/iana"
)

// prefix returns a mask of n leading one bits over size bytes.
func prefix(n, size int) [16]byte {
	var m [16]byte
	for i := 0; i < size; i++ {
		switch {
		case n >= 8:
			m[i] = 0xff
			n -= 8
		case n > 0:
			m[i] = byte(0xff << (8 - n))
			n = 0
		}
	}
	return m
}

// v6Value parses an IPv6 address with an optional "/len".
func (p *parser) v6Value(q qual, t token) (*bnode, error) {
	bits := 128
	if p.is("/") {
		if q.addr != aNet {
			return nil, p.errAt(p.cur(), "mask syntax is for networks only (\"net\")")
		}
		p.next()
		nt := p.next()
		if nt.kind != tNum || nt.num > 128 {
			return nil, p.errAt(nt, "IPv6 prefix length must be 0..128")
		}
		bits = int(nt.num)
	}
	if q.addr != aDefault && q.addr != aHost && q.addr != aNet {
		return nil, p.errAt(t, fmt.Sprintf("'%s' modifier applied to ip6 host", addrName(q.addr)))
	}
	addr := t.v6.As16()
	mask := prefix(bits, 16)
	for i := range addr {
		if addr[i]&^mask[i] != 0 {
			return nil, p.errAt(t, fmt.Sprintf("non-network bits set in %q", t.src))
		}
	}
	return p.host6(q, addr, mask)
}

func addrName(a addrKind) string {
	return [...]string{"host", "host", "net", "port", "portrange", "proto"}[a]
}

// v4Value parses an IPv4 address, possibly partial, with an optional
// "/len" or "mask M".
func (p *parser) v4Value(q qual, t token) (*bnode, error) {
	if q.addr == aPort || q.addr == aPortrange || q.addr == aProto {
		return nil, p.errAt(t, fmt.Sprintf("'%s' modifier applied to ip host", addrName(q.addr)))
	}
	addr := be32(t.v4[:])
	mask := uint32(0xffffffff) << (32 - 8*uint(t.v4Parts))
	switch {
	case p.is("/"):
		if q.addr != aNet {
			return nil, p.errAt(p.cur(), "mask syntax is for networks only (\"net\")")
		}
		p.next()
		nt := p.next()
		if nt.kind != tNum || nt.num > 32 {
			return nil, p.errAt(nt, "mask length must be 0..32")
		}
		mask = uint32(0xffffffff) << (32 - nt.num)
		if nt.num == 0 {
			mask = 0
		}
	case p.is("mask"):
		if q.addr != aNet {
			return nil, p.errAt(p.cur(), "mask syntax is for networks only (\"net\")")
		}
		p.next()
		nt := p.next()
		if nt.kind != tV4 || nt.v4Parts != 4 {
			return nil, p.errAt(nt, "mask must be a dotted IPv4 address")
		}
		mask = be32(nt.v4[:])
	}
	if addr&^mask != 0 {
		return nil, p.errAt(t, fmt.Sprintf("non-network bits set in %q", t.src))
	}
	return p.host4(q, addr, mask)
}

// value generates the test for one value under qualifiers q.
func (p *parser) value(q qual, t token) (*bnode, error) {
	if q.proto == pLink && t.kind != tMAC && q.addr != aProto {
		return nil, p.errAt(t, "ether host, src and dst need an Ethernet (MAC) address")
	}
	switch t.kind {
	case tV4:
		return p.v4Value(q, t)
	case tV6:
		return p.v6Value(q, t)
	case tMAC:
		if q.proto != pLink || (q.addr != aDefault && q.addr != aHost) {
			return nil, p.errAt(t, "Ethernet address used in non-ether expression; write \"ether host "+t.src+"\"")
		}
		return p.etherHost(q, t.mac)
	case tNum:
		return p.numValue(q, t)
	case tWord:
		return p.nameValue(q, t)
	}
	return nil, p.errAt(t, fmt.Sprintf("expected a %s value", addrName(q.addr)))
}

// numValue handles a number: port, protocol, or (as libpcap) a host or
// net written as one number.
func (p *parser) numValue(q qual, t token) (*bnode, error) {
	switch q.addr {
	case aPort, aPortrange:
		if t.num > 65535 {
			return nil, p.errAt(t, fmt.Sprintf("illegal port number %d > 65535", t.num))
		}
		return p.portValue(q, t, t.num, t.num, portTCP|portUDP)
	case aProto:
		return p.protoValue(q, t, t.num)
	case aNet:
		// pcap: a short net number is promoted ("net 10" is 10.0.0.0/8).
		v, mask := t.num, uint32(0xffffffff)
		for v != 0 && v&0xff000000 == 0 {
			v, mask = v<<8, mask<<8
		}
		return p.host4(q, v, mask)
	}
	return p.host4(q, t.num, 0xffffffff)
}

// nameValue handles a name: port or protocol name, port range, or host
// name (not supported: no resolver at compile time).
func (p *parser) nameValue(q qual, t token) (*bnode, error) {
	w := t.text
	switch q.addr {
	case aPort:
		pn, ok := iana.LookupService(w)
		if !ok {
			return nil, p.errAt(t, "unknown port name (use a number)")
		}
		return p.portValue(q, t, uint32(pn.Port), uint32(pn.Port), pn.Protos)
	case aPortrange:
		var lo, hi uint32
		if _, err := fmt.Sscanf(w, "%d-%d", &lo, &hi); err != nil || fmt.Sprintf("%d-%d", lo, hi) != w {
			return nil, p.errAt(t, "port range must be written N-M")
		}
		if lo > 65535 || hi > 65535 {
			return nil, p.errAt(t, "illegal port number > 65535")
		}
		if lo > hi {
			lo, hi = hi, lo
		}
		return p.portValue(q, t, lo, hi, portTCP|portUDP)
	case aProto:
		if q.proto == pLink {
			if v, ok := etherProtoNames[w]; ok {
				return p.protoValue(q, t, v)
			}
		} else if v, ok := iana.EtcProtocol(w); ok {
			return p.protoValue(q, t, uint32(v))
		}
		return nil, p.errAt(t, "unknown protocol name")
	}
	if !t.escaped && isReserved(w) {
		return nil, p.errAt(t, fmt.Sprintf("expected a %s value", addrName(q.addr)))
	}
	if a, err := netip.ParseAddr(w); err == nil && a.IsValid() {
		return nil, p.errAt(t, "invalid address")
	}
	return nil, p.errAt(t, "host names are not resolved; use an address")
}

// portValue generates "[tcp|udp|sctp] [dir] port|portrange".
func (p *parser) portValue(q qual, t token, lo, hi uint32, named uint8) (*bnode, error) {
	var protos []uint32
	switch q.proto {
	case pTCP:
		protos = []uint32{ipprotoTCP}
	case pUDP:
		protos = []uint32{ipprotoUDP}
	case pSCTP:
		protos = []uint32{ipprotoSCTP}
	case pDefault:
		protos = []uint32{ipprotoTCP, ipprotoUDP, ipprotoSCTP}
	default:
		return nil, p.errAt(t, fmt.Sprintf("illegal qualifier of '%s'", addrName(q.addr)))
	}
	// pcap narrows a name listed for one transport only to that transport.
	switch named {
	case portTCP:
		if q.proto != pDefault && q.proto != pTCP {
			return nil, p.errAt(t, fmt.Sprintf("port '%s' is tcp", t.src))
		}
		protos = []uint32{ipprotoTCP}
	case portUDP:
		if q.proto != pDefault && q.proto != pUDP {
			return nil, p.errAt(t, fmt.Sprintf("port '%s' is udp", t.src))
		}
		protos = []uint32{ipprotoUDP}
	}
	return p.port(q, protos, lo, hi), nil
}

// protoValue generates "[ip|ip6|ether] proto N".
func (p *parser) protoValue(q qual, t token, v uint32) (*bnode, error) {
	switch q.proto {
	case pLink:
		return p.etherProto(t, v)
	case pIP, pIP6, pDefault:
		if v > 255 {
			return nil, p.errAt(t, "IP protocol must be 0..255")
		}
		switch q.proto {
		case pIP:
			return p.proto4(v), nil
		case pIP6:
			return p.proto6(v), nil
		}
		return or(p.proto4(v), p.proto6(v)), nil
	}
	return nil, p.errAt(t, fmt.Sprintf("'%v' cannot take \"proto\"", q.proto))
}

// etherProto is "ether proto N": an Ethernet type, or for values up to
// 1500 an 802.2 LLC DSAP, as libpcap matches them.
func (p *parser) etherProto(t token, v uint32) (*bnode, error) {
	if p.link != LinkEthernet {
		return nil, p.errAt(t, fmt.Sprintf("ether proto needs an Ethernet link; link type %v has no link-layer header", p.link))
	}
	switch v {
	case 0x06, 0xfe, 0xf0, 0xe0, 0x809b, 0x80f3:
		return nil, p.errAt(t, "LLC/SNAP special cases of ether proto (IP SAP, ISO, NetBEUI, IPX, AppleTalk) are not supported")
	}
	if v > 0xffff {
		return nil, p.errAt(t, "Ethernet type must be 0..65535")
	}
	if v <= etherMTU {
		return and(not(leaf(jmpJGT, etherMTU, ldAbs(szH, 12))), leaf(jmpJEQ, v, ldAbs(szB, 14))), nil
	}
	return leaf(jmpJEQ, v, ldAbs(szH, 12)), nil
}
