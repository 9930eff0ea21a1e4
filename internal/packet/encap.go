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

// Ethernet shims: headers between an Ethernet header and the ethertype of
// what they carry, seen in captures of data-centre and carrier links.
const (
	ethTypeVNTag      = 0x8926 // Cisco VN-Tag: a 4-byte tag, then the ethertype
	ethTypePBB        = 0x88e7 // 802.1ah backbone service instance tag: 4 bytes, then the customer's Ethernet header
	ethTypeFabricPath = 0x8903 // Cisco FabricPath: FTag and TTL (2 bytes), then the original Ethernet frame
	ethTypeMACsec     = 0x88e5 // 802.1AE SecTAG: 6 bytes (14 with an SCI), then the user data

	vnTagLen         = 4
	pbbITagLen       = 4
	fabricPathTagLen = 2
	snapLen          = 8 // 802.2 LLC (DSAP, SSAP, control) and SNAP (OUI, ethertype)
	macsecTagLen     = 6 // TCI/AN, short length, packet number
	macsecSCILen     = 8
	macsecTCIV       = 0x80 // version: must be 0
	macsecTCISC      = 0x20 // an SCI follows the packet number
	macsecTCIE       = 0x08 // encrypted
	macsecTCIC       = 0x04 // changed text
)

// shim returns the ethertype behind a VN-Tag or a MACsec SecTAG (et) at
// data[off:] and the bytes up to the data it announces. ok is false when
// the tag is cut by the snap length (n < 0), or for MACsec whose user data
// is encrypted or changed: only integrity-protected frames carry their
// ethertype in the clear.
func shim(data []byte, et uint16, off int) (next uint16, n int, ok bool) {
	n = vnTagLen
	if et == ethTypeMACsec {
		if len(data) <= off {
			return 0, -1, false
		}
		tci := data[off]
		if tci&(macsecTCIV|macsecTCIE|macsecTCIC) != 0 {
			return 0, 0, false
		}
		n = macsecTagLen
		if tci&macsecTCISC != 0 {
			n += macsecSCILen
		}
	}
	if len(data) < off+n+2 {
		return 0, -1, false
	}
	return binary.BigEndian.Uint16(data[off+n:]), n + 2, true
}

// llcSNAP returns the ethertype an 802.2 LLC header with SNAP carries at
// data[off:], after an 802.3 length (or Linux cooked protocol 4, 802.2)
// et: the SNAP OUIs of encapsulated ethertypes, RFC 1042 (00-00-00) and
// 802.1H (00-00-f8). Other LLC frames (spanning tree, CDP, …) are non-IP.
func llcSNAP(data []byte, et uint16, off int) (uint16, bool) {
	if et >= ethMinType || len(data) < off+snapLen {
		return 0, false
	}
	b := data[off : off+snapLen]
	if b[0] != 0xaa || b[1] != 0xaa || b[2] != 0x03 || b[3] != 0 || b[4] != 0 || (b[5] != 0 && b[5] != 0xf8) {
		return 0, false
	}
	return binary.BigEndian.Uint16(b[6:]), true
}
