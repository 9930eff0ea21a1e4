package packet

import (
	"encoding/binary"
	"math"

	"github.com/weir-dev/weir/internal/flow"
)

// IPv4 header layout.
const (
	ipv4MinHeaderLen = 20
	ipv4LenOff       = 2
	ipv4IDOff        = 4
	ipv4FragOff      = 6
	ipv4ProtoOff     = 9
	ipv4SrcOff       = 12
	ipv4DstOff       = 16
	ipv4MoreFrags    = 0x2000
	ipv4OffsetMask   = 0x1fff
)

// IPv6 header layout.
const (
	ipv6HeaderLen   = 40
	ipv6PayLenOff   = 4
	ipv6NextOff     = 6
	ipv6SrcOff      = 8
	ipv6DstOff      = 24
	ipv6FragHdrLen  = 8
	ipv6FragOffMask = 0xfff8
	ipv6MoreFrags   = 0x0001
	optPad1         = 0x00
	optJumbo        = 0xc2
)

// IP protocol numbers the decoder looks into.
const (
	protoHopByHop = 0
	protoICMP     = flow.ProtoICMP
	protoTCP      = flow.ProtoTCP
	protoDCCP     = 33
	protoUDP      = flow.ProtoUDP
	protoRouting  = 43
	protoFragment = 44
	protoESP      = 50
	protoAH       = 51
	protoICMPv6   = flow.ProtoICMPv6
	protoNoNext   = 59
	protoDstOpts  = 60
	protoMobility = 135
	protoSCTP     = flow.ProtoSCTP
	protoUDPLite  = 136
	protoHIP      = 139
	protoShim6    = 140
)

// ipv4 decodes the IPv4 packet at data[off:].
func (d *Decoder) ipv4(data []byte, off, wireLen int, p *flow.Packet) bool {
	b := data[off:]
	if len(b) < ipv4MinHeaderLen {
		return d.fail(ReasonTruncatedIPv4)
	}
	_ = b[ipv4MinHeaderLen-1] // bounds-check hint for the fixed header
	if b[0]>>4 != 4 {
		return d.fail(ReasonBadIPVersion)
	}
	hl := int(b[0]&0x0f) * 4
	if hl < ipv4MinHeaderLen {
		return d.fail(ReasonBadIPv4HeaderLength)
	}
	ipLen := int(binary.BigEndian.Uint16(b[ipv4LenOff:]))
	if ipLen != 0 { // the common case first: it falls through
		if ipLen < hl {
			return d.fail(ReasonBadIPv4TotalLength)
		}
		if wireLen > 0 && ipLen > wireLen-off {
			return d.fail(ReasonIPLengthExceedsFrame)
		}
	} else if ipLen = d.zeroLength4(b, hl, avail(data, off, wireLen)); ipLen == 0 {
		return false
	}
	k := &p.Key
	k.IPVersion = 4
	setAddr4(&k.SrcAddr, b[ipv4SrcOff:ipv4SrcOff+4])
	setAddr4(&k.DstAddr, b[ipv4DstOff:ipv4DstOff+4])
	proto := b[ipv4ProtoOff]
	k.Proto = proto
	p.Length = uint32(ipLen)
	frag := binary.BigEndian.Uint16(b[ipv4FragOff:])
	if frag&ipv4OffsetMask == 0 && len(b) >= hl { // the common case first
		if d.decap != 0 && !d.inner { // one branch when off: the rest is in ipv4Tunnel
			return d.ipv4Tunnel(p, proto, b, hl, ipLen, frag)
		}
		if !d.transport(p, proto, b, hl, ipLen) {
			return false
		}
		if frag&ipv4MoreFrags != 0 {
			d.firstFragment(p, proto, uint32(binary.BigEndian.Uint16(b[ipv4IDOff:])))
		}
	} else if frag&ipv4OffsetMask != 0 {
		d.laterFragment(p, proto, uint32(binary.BigEndian.Uint16(b[ipv4IDOff:])))
	} else {
		// The snap length cut the options (the header is within the IP
		// length, so the frame had them): a portless flow keeps the bytes.
		d.stats.CutHeaders++
	}
	d.stats.IPv4++
	d.stats.Decoded++
	return true
}

// zeroLength4 returns the length of an IPv4 packet (header b, of length
// hl) whose header says 0, or 0 after counting why it is malformed. Only
// segmentation offload leaves the length 0 (a TCP or UDP super-packet
// captured before the NIC cut it), never in a later fragment: then it is
// the frame's, from the IP header on (frame bytes).
func (d *Decoder) zeroLength4(b []byte, hl, frame int) int {
	proto := b[ipv4ProtoOff]
	if (proto != protoTCP && proto != protoUDP) || binary.BigEndian.Uint16(b[ipv4FragOff:])&ipv4OffsetMask != 0 {
		d.fail(ReasonZeroIPLength)
		return 0
	}
	if frame < hl { // frame >= len(b) >= 20
		d.fail(ReasonTruncatedIPv4)
		return 0
	}
	if uint64(frame) > math.MaxUint32 { // a bogus wire length: Length could not hold it (uint64: int may be 32 bits)
		d.fail(ReasonIPLengthExceedsFrame)
		return 0
	}
	d.stats.IPLengthFromFrame++
	return frame
}

// ipv6 decodes the IPv6 packet at data[off:], walking its extension headers.
func (d *Decoder) ipv6(data []byte, off, wireLen int, p *flow.Packet) bool {
	b := data[off:]
	if len(b) < ipv6HeaderLen {
		return d.fail(ReasonTruncatedIPv6)
	}
	_ = b[ipv6HeaderLen-1] // bounds-check hint for the fixed header
	if b[0]>>4 != 6 {
		return d.fail(ReasonBadIPVersion)
	}
	nh := b[ipv6NextOff]
	ipLen := ipv6HeaderLen + int(binary.BigEndian.Uint16(b[ipv6PayLenOff:]))
	if ipLen == ipv6HeaderLen && nh != protoNoNext { // "no next header" may really be empty
		switch nh {
		case protoHopByHop: // a Jumbo Payload option (RFC 2675; BIG TCP up to Linux 6.x)
			jumbo, ok := jumboLength(b)
			if !ok {
				return d.fail(ReasonIPv6ExtTruncated)
			}
			if jumbo == 0 {
				return d.fail(ReasonZeroIPLength)
			}
			ipLen += jumbo
		case protoTCP, protoUDP: // a BIG TCP super-packet without the hop-by-hop header
			ipLen = avail(data, off, wireLen) // >= len(b) >= 40
			d.stats.IPLengthFromFrame++
		default:
			return d.fail(ReasonZeroIPLength)
		}
	}
	if (wireLen > 0 && ipLen > wireLen-off) || uint64(ipLen) > math.MaxUint32 { // uint64: int may be 32 bits
		return d.fail(ReasonIPLengthExceedsFrame)
	}
	k := &p.Key
	k.IPVersion = 6
	copy(k.SrcAddr[:], b[ipv6SrcOff:ipv6SrcOff+16])
	copy(k.DstAddr[:], b[ipv6DstOff:ipv6DstOff+16])
	p.Length = uint32(ipLen)

	t := ipv6HeaderLen
	first := false    // saw a first fragment: remember its ports
	var fragNH uint8  // its Fragment header's Next Header
	var fragID uint32 // and ID
walk:
	for n := 0; ; n++ {
		var hl int
		switch nh {
		case protoHopByHop, protoRouting, protoDstOpts, protoMobility, protoHIP, protoShim6, protoAH, protoFragment:
			if n == MaxIPv6ExtHeaders {
				return d.fail(ReasonIPv6ExtChainTooLong)
			}
			if t+2 > ipLen {
				return d.fail(ReasonHeaderExceedsIPLength)
			}
			if t+2 > len(b) {
				return d.cutHeader(p, nh)
			}
			switch nh {
			case protoFragment:
				hl = ipv6FragHdrLen
			case protoAH:
				hl = (int(b[t+1]) + 2) * 4 // AH counts 4-octet units, minus 2
			default:
				hl = (int(b[t+1]) + 1) * 8 // 8-octet units, not counting the first 8
			}
			if t+hl > ipLen {
				return d.fail(ReasonHeaderExceedsIPLength)
			}
			if t+hl > len(b) {
				return d.cutHeader(p, nh)
			}
			if b[t] == protoNoNext && (nh == protoMobility || nh == protoHIP || nh == protoShim6) {
				break walk // the message is this header: key by it, as Wireshark shows it
			}
		default:
			break walk // ESP, no-next-header or a transport protocol
		}
		if nh == protoFragment {
			fo := binary.BigEndian.Uint16(b[t+2:])
			id := binary.BigEndian.Uint32(b[t+4:])
			if fo&ipv6FragOffMask != 0 {
				d.laterFragment(p, b[t], id)
				d.stats.IPv6++
				d.stats.Decoded++
				return true
			}
			if fo&ipv6MoreFrags != 0 {
				first, fragNH, fragID = true, b[t], id
			}
		}
		nh = b[t]
		t += hl
	}
	k.Proto = nh
	if d.decap != 0 && !d.inner { // one branch when off: the rest is in ipv6Tunnel
		return d.ipv6Tunnel(p, nh, b, t, ipLen, first, fragNH, fragID)
	}
	if nh != protoESP && nh != protoNoNext && !d.transport(p, nh, b, t, ipLen) {
		return false
	}
	if first {
		d.firstFragment(p, fragNH, fragID)
	}
	d.stats.IPv6++
	d.stats.Decoded++
	return true
}

// cutHeader keys a packet whose IPv6 extension header nh the snap length
// cut: addresses and IP length are known, the transport is not, so it
// counts in a flow with protocol nh and no ports.
func (d *Decoder) cutHeader(p *flow.Packet, nh uint8) bool {
	p.Key.Proto = nh
	d.stats.CutHeaders++
	d.stats.IPv6++
	d.stats.Decoded++
	return true
}

// setAddr4 is flow.SetAddr4 for a zeroed key: one 8-byte store writes
// ::ffff:a.b.c.d's last 8 bytes (00 00 ff ff a b c d) instead of two copies.
func setAddr4(dst *[16]byte, a []byte) {
	binary.LittleEndian.PutUint64(dst[8:], 0xffff0000|uint64(binary.LittleEndian.Uint32(a))<<32)
}

// jumboLength returns the Jumbo Payload length from the hop-by-hop header
// that follows the fixed IPv6 header in b (0 if there is none); ok is false
// if the capture ends inside that header.
func jumboLength(b []byte) (jumbo int, ok bool) {
	h := b[ipv6HeaderLen:]
	if len(h) < 2 {
		return 0, false
	}
	hl := (int(h[1]) + 1) * 8
	if len(h) < hl {
		return 0, false
	}
	for i := 2; i < hl; {
		if h[i] == optPad1 {
			i++
			continue
		}
		if i+2 > hl {
			break
		}
		ol := int(h[i+1])
		if h[i] == optJumbo && ol == 4 && i+6 <= hl {
			return int(binary.BigEndian.Uint32(h[i+2:])), true
		}
		i += 2 + ol
	}
	return 0, true
}

// transport reads ports, TCP flags or ICMP type/code from the header at b[t:].
// ipLen bounds the header by the IP length, len(b) by the capture.
func (d *Decoder) transport(p *flow.Packet, proto uint8, b []byte, t, ipLen int) bool {
	k := &p.Key
	switch proto {
	case protoTCP:
		if !d.room(t+14, ipLen, len(b)) { // through the flags byte at offset 13
			return false
		}
		h := b[t : t+14]
		k.SrcPort = binary.BigEndian.Uint16(h[0:])
		k.DstPort = binary.BigEndian.Uint16(h[2:])
		f := h[13]
		p.TCPFlags = f
		switch f & (flow.TCPSyn | flow.TCPAck) {
		case flow.TCPSyn:
			p.Role = flow.RoleInitiator
		case flow.TCPSyn | flow.TCPAck:
			p.Role = flow.RoleResponder
		}
	case protoUDP, protoUDPLite, protoSCTP, protoDCCP:
		if !d.room(t+4, ipLen, len(b)) {
			return false
		}
		h := b[t : t+4]
		k.SrcPort = binary.BigEndian.Uint16(h[0:])
		k.DstPort = binary.BigEndian.Uint16(h[2:])
	case protoICMP:
		if !d.room(t+2, ipLen, len(b)) {
			return false
		}
		h := b[t : t+2]
		k.ICMPType, k.ICMPCode, p.Role = icmp4Key[h[0]], h[1], icmp4Role[h[0]]
	case protoICMPv6:
		if !d.room(t+2, ipLen, len(b)) {
			return false
		}
		h := b[t : t+2]
		k.ICMPType, k.ICMPCode, p.Role = icmp6Key[h[0]], h[1], icmp6Role[h[0]]
	}
	return true
}

// room reports whether a header ending at end fits in the IP length and in
// the captured bytes, counting the failure if not.
func (d *Decoder) room(end, ipLen, captured int) bool {
	if end > ipLen {
		return d.fail(ReasonHeaderExceedsIPLength)
	}
	if end > captured {
		return d.fail(ReasonTruncatedTransport)
	}
	return true
}

// firstFragment remembers the transport fields of a first fragment.
// proto is the IPv4 protocol or the IPv6 Fragment header's Next Header.
func (d *Decoder) firstFragment(p *flow.Packet, proto uint8, id uint32) {
	k := &p.Key
	e, evicted := d.frag.insert(&k.SrcAddr, &k.DstAddr, fragMeta(id, proto, k.IPVersion), p.Time)
	e.tproto, e.sport, e.dport, e.icmpType, e.icmpCode = k.Proto, k.SrcPort, k.DstPort, k.ICMPType, k.ICMPCode
	d.stats.Fragments.First++
	if evicted {
		d.stats.Fragments.Evicted++
	}
}

// laterFragment keys a fragment with offset > 0 from its first fragment's
// entry, or with ports 0 if there is none.
func (d *Decoder) laterFragment(p *flow.Packet, proto uint8, id uint32) {
	k := &p.Key
	k.Proto = proto
	if e := d.frag.lookup(&k.SrcAddr, &k.DstAddr, fragMeta(id, proto, k.IPVersion), p.Time); e != nil {
		k.Proto, k.SrcPort, k.DstPort, k.ICMPType, k.ICMPCode = e.tproto, e.sport, e.dport, e.icmpType, e.icmpCode
		d.stats.Fragments.Attributed++
		return
	}
	d.stats.Fragments.Unattributed++
}

// ICMP reply types map to their request type so both directions share one
// key; tables indexed by type avoid a switch per packet.
var icmp4Key, icmp6Key = icmpKeys()
var icmp4Role, icmp6Role = icmpRoles()

// icmpPairs4 and icmpPairs6 list (request, reply) type pairs.
var (
	icmpPairs4 = [...][2]uint8{{8, 0}, {13, 14}, {15, 16}, {17, 18}}
	icmpPairs6 = [...][2]uint8{{128, 129}, {139, 140}}
)

func icmpKeys() (v4, v6 [256]uint8) {
	for i := range v4 {
		v4[i], v6[i] = uint8(i), uint8(i)
	}
	for _, pr := range icmpPairs4 {
		v4[pr[1]] = pr[0]
	}
	for _, pr := range icmpPairs6 {
		v6[pr[1]] = pr[0]
	}
	return v4, v6
}

func icmpRoles() (v4, v6 [256]flow.Role) {
	for _, pr := range icmpPairs4 {
		v4[pr[0]], v4[pr[1]] = flow.RoleInitiator, flow.RoleResponder
	}
	for _, pr := range icmpPairs6 {
		v6[pr[0]], v6[pr[1]] = flow.RoleInitiator, flow.RoleResponder
	}
	return v4, v6
}
