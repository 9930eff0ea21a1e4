// Package ipfix encodes flow records as IPFIX (RFC 7011) messages: the
// records are RFC 5103 biflows, with the responder's counters and TCP flags
// in reverse information elements (private enterprise 29305).
//
// An Encoder packs many records per message up to an MTU, keeps the
// sequence number of its observation domain, and sends its templates in the
// first message and again every RefreshMessages messages or RefreshInterval
// (as UDP transport needs). Encoding a record allocates nothing: each
// template has a fixed layout written at constant offsets.
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
	IEVLANID                   = 58
	IEInterfaceName            = 82
	IEFlowEndReason            = 136
	IEICMPTypeCodeIPv6         = 139
	IEFlowStartMilliseconds    = 152
	IEFlowEndMilliseconds      = 153
)

// Template ids of the two record layouts (data set ids are template ids).
const (
	TemplateIPv4 = 256
	TemplateIPv6 = 257
)

// Template is a template id and its fields in order.
type Template struct {
	ID     uint16
	Fields []Field
}

// biflowFields is the layout of both templates; addrID/addrLen and icmpID
// differ by family. Fixed-length fields come first, so each sits at a
// constant offset; the interface name (variable) is last.
func biflowFields(srcID, dstID, addrLen, icmpID uint16) []Field {
	return []Field{
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
		{ID: IEInterfaceName, Length: Variable},
	}
}

// Templates are the record layouts: IPv4 and IPv6 biflows.
var Templates = [2]Template{
	{ID: TemplateIPv4, Fields: biflowFields(IESourceIPv4Address, IEDestinationIPv4Address, 4, IEICMPTypeCodeIPv4)},
	{ID: TemplateIPv6, Fields: biflowFields(IESourceIPv6Address, IEDestinationIPv6Address, 16, IEICMPTypeCodeIPv6)},
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
