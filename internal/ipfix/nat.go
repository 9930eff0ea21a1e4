package ipfix

import (
	"encoding/binary"

	"github.com/weir-dev/weir/internal/flow"
)

// NAT and verdicts on the wire. A translated record (flow.Record.NATed:
// conntrack) is sent in a NAT template, which adds the post-NAT key in the
// record's orientation: postNATSourceIPv4Address (225) or
// postNATSourceIPv6Address (281) with postNAPTSourceTransportPort (227),
// what the initiator's address and port became; postNATDestinationIPv4Address
// (226) or postNATDestinationIPv6Address (282) with
// postNAPTDestinationTransportPort (228), where the connection went. All
// four are sent, translated or not (an SNAT-only record repeats its
// destination), as Cisco ASA's NSEL and nfdump do. A denied record
// (flow.VerdictDeny: NFLOG) is sent in a deny template, which adds
// firewallEvent (233) = 3, Flow Denied. The two combine, and combine with
// the drop and sampled templates: the index bits tNAT and tDeny
// (template.go). Their pairs are announced with the first record that
// needs them, so output without NAT or verdicts does not change.
//
// What is left out, and why:
//   - firewallEvent on NAT-only records: conntrack says nothing about a
//     rule's decision (the connection was neither created nor denied by a
//     rule weir saw), and 0 "ignore" would only add an octet.
//   - natEvent (230): it names NAT logging events (RFC 8158: session
//     create, delete, …); a flow record with counters, emitted idle,
//     active or at its end, is none of them.
//   - the rule name (flow.Record.Rule, the NFLOG prefix), the conntrack
//     mark and zone: IANA has no element for them. They travel as weir's
//     enterprise elements when a PEN is configured (enterprise.go).
//     (ulogd2 exports the prefix and mark as netfilter's enterprise
//     elements 21373/3 and 21373/4; no collector weir is tested with
//     reads them.)
//   - the post-NAT key of a record whose PostNAT family differs from its
//     key's (NAT64; Linux conntrack does not translate between families):
//     the template pair goes by the key's family, so such a record is
//     sent without its NAT fields.

// firewallDenied is firewallEvent's Flow Denied (IANA registry).
const firewallDenied = 3

// ieCiscoFwEvent is NetFlow v9's NF_F_FW_EVENT (Cisco ASA NSEL), the
// field firewallEvent was registered after, with the same values.
const ieCiscoFwEvent = 40005

// natFields are the post-NAT elements of a NAT template.
func natFields(v6 bool) []Field {
	src, dst, l := uint16(IEPostNATSourceIPv4Address), uint16(IEPostNATDestinationIPv4Address), uint16(4)
	if v6 {
		src, dst, l = IEPostNATSourceIPv6Address, IEPostNATDestinationIPv6Address, 16
	}
	return []Field{
		{ID: src, Length: l},
		{ID: dst, Length: l},
		{ID: IEPostNAPTSourceTransportPort, Length: 2},
		{ID: IEPostNAPTDestinationTransportPort, Length: 2},
	}
}

// natBits are the index bits of r's NAT and verdict (tNAT, tDeny).
func natBits(r *flow.Record) int {
	ti := 0
	if r.PostNAT.IPVersion != 0 && r.PostNAT.IPVersion == r.Key.IPVersion {
		ti = tNAT
	}
	if r.Verdict == flow.VerdictDeny {
		ti |= tDeny
	}
	return ti
}

// appendNAT writes the NAT and deny fields of template ti.
func appendNAT(b []byte, r *flow.Record, ti int) []byte {
	if ti&tNAT != 0 {
		n := &r.PostNAT
		if ti&tIPv6 != 0 {
			b = append(b, n.SrcAddr[:]...)
			b = append(b, n.DstAddr[:]...)
		} else {
			b = append(b, n.SrcAddr[12:]...)
			b = append(b, n.DstAddr[12:]...)
		}
		b = binary.BigEndian.AppendUint16(b, n.SrcPort)
		b = binary.BigEndian.AppendUint16(b, n.DstPort)
	}
	if ti&tDeny != 0 {
		b = append(b, firewallDenied)
	}
	return b
}

// Post-NAT elements a decoded record carried (postNAT.have).
const (
	postSrcAddr = 1 << iota
	postDstAddr
	postSrcPort
	postDstPort
	postV6 // an address was IPv6
)

// postNAT is what a record's elements say of its translation (decoding).
type postNAT struct {
	src, dst         [16]byte
	srcPort, dstPort uint16
	have             uint8
}

// set keeps a post-NAT address element; an unspecified one (0.0.0.0, ::),
// which exporters that always send the fields put in for untranslated
// flows, is as if absent.
func (p *postNAT) set(dst *[16]byte, f []byte, bit uint8) {
	for _, c := range f {
		if c != 0 {
			if len(f) == 4 {
				flow.SetAddr4(dst, f)
			} else {
				copy(dst[:], f)
				bit |= postV6
			}
			p.have |= bit
			return
		}
	}
}

// apply sets r.PostNAT from the post-NAT elements, after the key is
// complete: what they leave out (or send as 0) was not translated and is
// taken from the key, when of the same family. A post-NAT key equal to
// the key is no translation: PostNAT stays zero, as the conntrack source
// leaves it.
func (p *postNAT) apply(r *flow.Record) {
	n := r.Key
	if p.have&(postSrcAddr|postDstAddr) != 0 {
		v := uint8(4)
		if p.have&postV6 != 0 {
			v = 6
		}
		if v != n.IPVersion {
			n.SrcAddr, n.DstAddr, n.IPVersion = [16]byte{}, [16]byte{}, v
		}
		if p.have&postSrcAddr != 0 {
			n.SrcAddr = p.src
		}
		if p.have&postDstAddr != 0 {
			n.DstAddr = p.dst
		}
	}
	if n.Proto != flow.ProtoICMP && n.Proto != flow.ProtoICMPv6 {
		if p.have&postSrcPort != 0 && p.srcPort != 0 {
			n.SrcPort = p.srcPort
		}
		if p.have&postDstPort != 0 && p.dstPort != 0 {
			n.DstPort = p.dstPort
		}
	}
	if n != r.Key {
		r.PostNAT = n
	}
}
