package packet

import (
	"encoding/binary"

	"github.com/weir-dev/weir/internal/flow"
)

// PPPoE session stage (RFC 2516): version/type 0x11, code 0, session ID,
// length, then the PPP protocol field.
const (
	pppoeHdrLen  = 6
	pppoeVerType = 0x11
)

// MPLS (RFC 3032) and Ethernet pseudowires (RFC 4448).
const (
	mplsLabelLen   = 4
	mplsBottom     = 0x01 // bottom-of-stack bit in a label entry's third byte
	pwControlWord  = 4
	firstNibbleCW  = 0 // a control word (or an associated channel header) starts with 0000
	firstNibbleIP4 = 4
	firstNibbleIP6 = 6
)

// pppoe decodes a PPPoE session header at data[off:] and the PPP frame in it.
func (d *Decoder) pppoe(data []byte, off, wireLen int, p *flow.Packet, depth int) bool {
	if len(data) < off+pppoeHdrLen+1 {
		return d.fail(ReasonTruncatedPPPoE)
	}
	if data[off] != pppoeVerType || data[off+1] != 0 {
		return d.fail(ReasonBadPPPoE)
	}
	off += pppoeHdrLen
	proto, n := pppProtocol(data[off:])
	if n == 0 {
		return d.fail(ReasonTruncatedPPPoE)
	}
	return d.pppPayload(proto, data, off+n, wireLen, p, depth, ethTypePPPoE)
}

// mpls walks an MPLS label stack at data[off:] to its bottom and decodes
// what follows by its first nibble: 4 IPv4, 6 IPv6, 0 an Ethernet
// pseudowire (RFC 4448), with a control word unless pwControlWordAt says
// the Ethernet header starts right away. Anything else (an associated
// channel) is non-IP, counted under et.
func (d *Decoder) mpls(data []byte, et uint16, off, wireLen int, p *flow.Packet, depth int) bool {
	for n := 0; ; n++ {
		if n == MaxMPLSLabels {
			return d.fail(ReasonTooManyMPLSLabels)
		}
		if len(data) < off+mplsLabelLen {
			return d.fail(ReasonTruncatedMPLS)
		}
		bottom := data[off+2]&mplsBottom != 0
		off += mplsLabelLen
		if bottom {
			break
		}
	}
	if len(data) <= off {
		return d.fail(ReasonTruncatedMPLS)
	}
	switch data[off] >> 4 {
	case firstNibbleIP4:
		return d.ipv4(data, off, wireLen, p)
	case firstNibbleIP6:
		return d.ipv6(data, off, wireLen, p)
	case firstNibbleCW:
		if !pwControlWordAt(data, off) {
			return d.bridged(data, off, wireLen, p, depth, ReasonTruncatedMPLS)
		}
		return d.bridged(data, off+pwControlWord, wireLen, p, depth, ReasonTruncatedMPLS)
	}
	return d.nonIP(et)
}

// pwControlWordAt tells whether the pseudowire at data[off:], whose first
// nibble is 0, starts with a control word (RFC 4448) or directly with an
// Ethernet header whose destination MAC begins with a 0 nibble (most vendor
// addresses do): the ethertype where a header without control word would
// have it must be a common one, and the one after a control word not.
// When both or neither look right, the control word wins, as the RFCs
// recommend it.
func pwControlWordAt(data []byte, off int) bool {
	if len(data) < off+ethHeaderLen+pwControlWord {
		return true
	}
	return !commonEtherType(binary.BigEndian.Uint16(data[off+ethTypeOff:])) ||
		commonEtherType(binary.BigEndian.Uint16(data[off+pwControlWord+ethTypeOff:]))
}

// commonEtherType reports ethertypes a pseudowire's frames commonly carry.
func commonEtherType(et uint16) bool {
	switch et {
	case ethTypeIPv4, ethTypeIPv6, ethType8021Q, ethTypeQinQ, ethType9100, ethTypeMPLS, ethTypeMPLSMC,
		ethTypePPPoE, ethTypePPPoEDiscovery, ethTypeARP, ethTypeLLDP:
		return true
	}
	return false
}
