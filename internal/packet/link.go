// Package packet decodes captured frames into flow.Packet values without
// allocating: link layer, VLAN tags, IPv4/IPv6 (options, extension headers,
// fragments) and the transport header's ports, ICMP type/code and TCP flags.
package packet

// LinkType is a capture's link-layer header type, numbered as pcap's
// LINKTYPE_* values so files and sockets need no translation.
type LinkType uint16

// Link types the decoder understands.
const (
	LinkEthernet LinkType = 1   // LINKTYPE_ETHERNET
	LinkRaw      LinkType = 101 // LINKTYPE_RAW: IPv4 or IPv6, told apart by the version nibble
	LinkSLL      LinkType = 113 // LINKTYPE_LINUX_SLL: Linux cooked capture v1
	LinkIPv4     LinkType = 228 // LINKTYPE_IPV4
	LinkIPv6     LinkType = 229 // LINKTYPE_IPV6
	LinkSLL2     LinkType = 276 // LINKTYPE_LINUX_SLL2: Linux cooked capture v2 (what "any" produces)
)

// String names the link type.
func (l LinkType) String() string {
	switch l {
	case LinkEthernet:
		return "ethernet"
	case LinkRaw:
		return "raw"
	case LinkSLL:
		return "linux-sll"
	case LinkIPv4:
		return "ipv4"
	case LinkIPv6:
		return "ipv6"
	case LinkSLL2:
		return "linux-sll2"
	}
	return "linktype-" + itoa(int(l))
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
