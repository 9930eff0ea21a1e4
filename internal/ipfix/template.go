// Package ipfix encodes flow records as IPFIX (RFC 7011) messages: the
// records are RFC 5103 biflows, with the responder's counters and TCP flags
// in reverse information elements (private enterprise 29305).
//
// An Encoder packs many records per message up to an MTU, keeps the
// sequence number of its observation domain, and sends its templates in the
// first message and again every RefreshMessages messages or RefreshInterval
// (as UDP transport needs). Encoding a record allocates nothing: each
// template has a fixed layout written at constant offsets.
//
// Records with kernel drops (flow.Record.DropPackets > 0) use two more
// templates that add droppedOctetDeltaCount, droppedPacketDeltaCount and
// forwardingStatus (RFC 7270 4.12, drops.go); they are announced when the
// first such record comes, so an exporter without drops sends exactly what
// it sent before they existed.
//
// Records of sampled traffic (flow.Record.Sampling > 1) use four more
// templates that add selectorId, and the interval N of each selector
// travels in an options record (sampling.go); both are announced when the
// first sampled record comes, again so that unsampled output does not
// change.
//
// Translated records (flow.Record.NATed: the conntrack source) use
// templates that add the post-NAT key (postNATSource/DestinationIPv4 or
// IPv6Address, postNAPTSource/DestinationTransportPort), denied records
// (flow.VerdictDeny: NFLOG) templates that add firewallEvent 3, Flow
// Denied (nat.go); both combine with the drop and sampled ones, 32
// templates in all, each pair announced with the first record that needs
// it. The rule name, conntrack mark and zone, and the enrichment
// (workloads, service) have no IANA element: with a Private Enterprise
// Number configured (Config.PEN) they travel as enterprise elements, in
// 32 more templates with an enterprise block (enterprise.go), announced
// the same way; without one they are not exported.
//
// The node (flow.Record.Node) travels as observationDomainName in an
// options record, announced when it changes (node.go): nothing per record.
//
// The Decoder reads IPFIX, NetFlow v9 and v5 from any exporter into
// flow.Record: the elements above from any template, in any order.
package ipfix

// Version is the IPFIX message version number.
const Version = 10

// ReversePEN is the private enterprise number of RFC 5103's reverse
// information elements.
const ReversePEN = 29305

// Variable is the field length that marks a variable-length field.
const Variable = 0xffff

// Field is one template field: an information element and its length.
type Field struct {
	ID     uint16 // information element id (without the enterprise bit)
	Length uint16 // octets, or Variable
	PEN    uint32 // enterprise number; 0 for IANA elements
}

// Information elements weir exports (IANA ipfix registry numbers).
const (
	IEOctetDeltaCount          = 1
	IEPacketDeltaCount         = 2
	IEProtocolIdentifier       = 4
	IETCPControlBits           = 6
	IESourceTransportPort      = 7
	IESourceIPv4Address        = 8
	IEDestinationTransportPort = 11
	IEDestinationIPv4Address   = 12
	IESourceIPv6Address        = 27
	IEDestinationIPv6Address   = 28
	IEICMPTypeCodeIPv4         = 32
	IESamplingInterval         = 34 // unsigned32: 1 packet in N (deprecated in favour of 305/306, read by every collector)
	IEVLANID                   = 58
	IEInterfaceName            = 82
	IEForwardingStatus         = 89 // unsigned8 (RFC 7270 4.12): status in the top 2 bits, reason in the low 6
	IEDroppedOctetDeltaCount   = 132
	IEDroppedPacketDeltaCount  = 133
	IEFlowEndReason            = 136
	IEICMPTypeCodeIPv6         = 139
	IEObservationDomainID      = 149
	IEFlowStartMilliseconds    = 152
	IEFlowEndMilliseconds      = 153
	IESelectorID               = 302 // unsigned64, sent in 4 octets (RFC 7011 6.2 reduced size)
	IESelectorAlgorithm        = 304 // unsigned16, IANA PSAMP selectorAlgorithm
	// NAT and firewall elements (nat.go).
	IEPostNATSourceIPv4Address         = 225
	IEPostNATDestinationIPv4Address    = 226
	IEPostNAPTSourceTransportPort      = 227
	IEPostNAPTDestinationTransportPort = 228
	IEFirewallEvent                    = 233 // unsigned8: 3 is Flow Denied
	IEPostNATSourceIPv6Address         = 281
	IEPostNATDestinationIPv6Address    = 282
)

// Template ids of the record layouts (data set ids are template ids): the
// biflow of each family, the same with the drop fields for records with
// DropPackets > 0, and all four with selectorId for records with
// Sampling > 1. TemplateSampling is the options template of the
// selectors' intervals (sampling.go). The ids of the templates with the
// post-NAT key and firewallEvent follow it (templateID, nat.go): 265–272
// are the first eight with the post-NAT key, 273–280 with firewallEvent,
// 281–288 with both; the named ones are those conntrack and NFLOG records
// use.
const (
	TemplateIPv4             = 256
	TemplateIPv6             = 257
	TemplateIPv4Drops        = 258
	TemplateIPv6Drops        = 259
	TemplateIPv4Sampled      = 260
	TemplateIPv6Sampled      = 261
	TemplateIPv4DropsSampled = 262
	TemplateIPv6DropsSampled = 263
	TemplateSampling         = 264
	TemplateIPv4NAT          = 265
	TemplateIPv6NAT          = 266
	TemplateIPv4Deny         = 273
	TemplateIPv6Deny         = 274
)

// Template is a template id and its fields in order.
type Template struct {
	ID     uint16
	Fields []Field
}

// Template index bits: template i is for a record of IPv6 (i&tIPv6), with
// drops (i&tDrops), sampled (i&tSampled), translated (i&tNAT), denied
// (i&tDeny), enriched (i&tEnt: the enterprise block, enterprise.go, only
// in an Encoder with a PEN). Pair p (templates 2p and 2p+1) differs only
// by family.
const (
	tIPv6    = 1
	tDrops   = 2
	tSampled = 4
	tNAT     = 8
	tDeny    = 16
	tEnt     = 32
)

// templateID is the id of template i: 256..263 for the first eight (as
// before NAT and verdicts), then 265.. past the sampling options
// template's 264 (289..320 for the enterprise ones).
func templateID(i int) uint16 {
	if i < 8 {
		return uint16(TemplateIPv4 + i)
	}
	return uint16(TemplateSampling + 1 + i - 8)
}

// icmpFirst: icmpTypeCode goes before the transport ports. nfdump (1.7.1
// to 1.7.8 at least) stores icmpTypeCode and destinationTransportPort in
// the same slot, the later in the template winning, and puts the port back
// only for TCP and UDP: with icmpTypeCode after the ports, an SCTP (or any
// other ported protocol's) record showed destination port 0. For ICMP
// nfdump takes icmpTypeCode whenever it is not 0, and the port weir sends
// for ICMP is 0, so both orders read the same there.

// biflowFields is the layout of template i (the index bits above), its
// enterprise elements under pen. Fixed-length fields come first, so each
// sits at a constant offset; the interface name (variable) is last but
// for the enterprise strings. The drop, sampled, NAT, deny and enterprise
// templates are the plain ones with their fields inserted, in that order,
// before the name, so all share every other offset.
func biflowFields(i int, pen uint32) []Field {
	srcID, dstID, addrLen, icmpID := uint16(IESourceIPv4Address), uint16(IEDestinationIPv4Address), uint16(4), uint16(IEICMPTypeCodeIPv4)
	if i&tIPv6 != 0 {
		srcID, dstID, addrLen, icmpID = IESourceIPv6Address, IEDestinationIPv6Address, 16, IEICMPTypeCodeIPv6
	}
	fs := []Field{
		{ID: IEFlowStartMilliseconds, Length: 8},
		{ID: IEFlowEndMilliseconds, Length: 8},
		{ID: IEOctetDeltaCount, Length: 8},
		{ID: IEPacketDeltaCount, Length: 8},
		{ID: IEOctetDeltaCount, Length: 8, PEN: ReversePEN},
		{ID: IEPacketDeltaCount, Length: 8, PEN: ReversePEN},
		{ID: srcID, Length: addrLen},
		{ID: dstID, Length: addrLen},
		{ID: icmpID, Length: 2}, // before the ports: see icmpFirst
		{ID: IESourceTransportPort, Length: 2},
		{ID: IEDestinationTransportPort, Length: 2},
		{ID: IETCPControlBits, Length: 2},
		{ID: IETCPControlBits, Length: 2, PEN: ReversePEN},
		{ID: IEVLANID, Length: 2},
		{ID: IEProtocolIdentifier, Length: 1},
		{ID: IEFlowEndReason, Length: 1},
	}
	if i&tDrops != 0 {
		fs = append(fs,
			Field{ID: IEDroppedOctetDeltaCount, Length: 8},
			Field{ID: IEDroppedPacketDeltaCount, Length: 8},
			Field{ID: IEForwardingStatus, Length: 1},
		)
	}
	if i&tSampled != 0 {
		fs = append(fs, Field{ID: IESelectorID, Length: 4})
	}
	if i&tNAT != 0 {
		fs = append(fs, natFields(i&tIPv6 != 0)...)
	}
	if i&tDeny != 0 {
		fs = append(fs, Field{ID: IEFirewallEvent, Length: 1})
	}
	if i&tEnt != 0 {
		fs = append(fs, entFixedFields(pen)...)
	}
	fs = append(fs, Field{ID: IEInterfaceName, Length: Variable})
	if i&tEnt != 0 {
		fs = append(fs, entStringFields(pen)...)
	}
	return fs
}

// Templates are the record layouts, in pairs of IPv4 and IPv6 biflows:
// plain, with the drop fields, with selectorId, with both, and all four
// again with the post-NAT key, with firewallEvent, with both (template i
// has the index bits above, and id templateID(i)). An Encoder announces
// the plain pair from its first message and each other pair from its
// first record that needs it. The 32 with the enterprise block (index bit
// tEnt) depend on the PEN: each Encoder with one makes its own
// (enterpriseTemplates).
var Templates = func() (ts [32]Template) {
	for i := range ts {
		ts[i] = Template{ID: templateID(i), Fields: biflowFields(i, 0)}
	}
	return ts
}()

// fixedLen is the length of a template's fixed-length part.
func fixedLen(t *Template) int {
	n := 0
	for _, f := range t.Fields {
		if f.Length != Variable {
			n += int(f.Length)
		}
	}
	return n
}
