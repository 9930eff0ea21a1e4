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
)

// Template ids of the record layouts (data set ids are template ids): the
// biflow of each family, the same with the drop fields for records with
// DropPackets > 0, and all four with selectorId for records with
// Sampling > 1. TemplateSampling is the options template of the
// selectors' intervals (sampling.go).
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
)

// Template is a template id and its fields in order.
type Template struct {
	ID     uint16
	Fields []Field
}

// biflowFields is the layout of the templates; addrID/addrLen and icmpID
// differ by family, drops adds the drop fields and sampled selectorId.
// Fixed-length fields come first, so each sits at a constant offset; the
// interface name (variable) is last. The drop and sampled templates are
// the plain ones with their fields inserted before the name, so all share
// every other offset.
func biflowFields(srcID, dstID, addrLen, icmpID uint16, drops, sampled bool) []Field {
	fs := []Field{
		{ID: IEFlowStartMilliseconds, Length: 8},
		{ID: IEFlowEndMilliseconds, Length: 8},
		{ID: IEOctetDeltaCount, Length: 8},
		{ID: IEPacketDeltaCount, Length: 8},
		{ID: IEOctetDeltaCount, Length: 8, PEN: ReversePEN},
		{ID: IEPacketDeltaCount, Length: 8, PEN: ReversePEN},
		{ID: srcID, Length: addrLen},
		{ID: dstID, Length: addrLen},
		{ID: IESourceTransportPort, Length: 2},
		{ID: IEDestinationTransportPort, Length: 2},
		{ID: icmpID, Length: 2},
		{ID: IETCPControlBits, Length: 2},
		{ID: IETCPControlBits, Length: 2, PEN: ReversePEN},
		{ID: IEVLANID, Length: 2},
		{ID: IEProtocolIdentifier, Length: 1},
		{ID: IEFlowEndReason, Length: 1},
	}
	if drops {
		fs = append(fs,
			Field{ID: IEDroppedOctetDeltaCount, Length: 8},
			Field{ID: IEDroppedPacketDeltaCount, Length: 8},
			Field{ID: IEForwardingStatus, Length: 1},
		)
	}
	if sampled {
		fs = append(fs, Field{ID: IESelectorID, Length: 4})
	}
	return append(fs, Field{ID: IEInterfaceName, Length: Variable})
}

// Templates are the record layouts, in pairs of IPv4 and IPv6 biflows:
// plain, with the drop fields, with selectorId, with both. Template i is
// for a record of IPv6 (i&1), with drops (i&2), sampled (i&4). An Encoder
// announces the plain pair from its first message and each other pair from
// its first record that needs it.
var Templates = [8]Template{
	{ID: TemplateIPv4, Fields: biflowFields(IESourceIPv4Address, IEDestinationIPv4Address, 4, IEICMPTypeCodeIPv4, false, false)},
	{ID: TemplateIPv6, Fields: biflowFields(IESourceIPv6Address, IEDestinationIPv6Address, 16, IEICMPTypeCodeIPv6, false, false)},
	{ID: TemplateIPv4Drops, Fields: biflowFields(IESourceIPv4Address, IEDestinationIPv4Address, 4, IEICMPTypeCodeIPv4, true, false)},
	{ID: TemplateIPv6Drops, Fields: biflowFields(IESourceIPv6Address, IEDestinationIPv6Address, 16, IEICMPTypeCodeIPv6, true, false)},
	{ID: TemplateIPv4Sampled, Fields: biflowFields(IESourceIPv4Address, IEDestinationIPv4Address, 4, IEICMPTypeCodeIPv4, false, true)},
	{ID: TemplateIPv6Sampled, Fields: biflowFields(IESourceIPv6Address, IEDestinationIPv6Address, 16, IEICMPTypeCodeIPv6, false, true)},
	{ID: TemplateIPv4DropsSampled, Fields: biflowFields(IESourceIPv4Address, IEDestinationIPv4Address, 4, IEICMPTypeCodeIPv4, true, true)},
	{ID: TemplateIPv6DropsSampled, Fields: biflowFields(IESourceIPv6Address, IEDestinationIPv6Address, 16, IEICMPTypeCodeIPv6, true, true)},
}

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
