// Package packet decodes captured frames into flow.Packet values without
// allocating: link layer (Ethernet, Linux cooked, raw IP, BSD loopback,
// NFLOG, PPP, PPPoE and HDLC), VLAN tags, PPPoE sessions, MPLS label stacks and
// Ethernet pseudowires, IPv4/IPv6 (options, extension headers, fragments),
// the transport header's ports, ICMP type/code and TCP flags, and, when
// asked (Config.Decap), the packet inside a VXLAN, Geneve, GRE or IP-in-IP
// tunnel.
package packet

// LinkType is a capture's link-layer header type, numbered as pcap's
// LINKTYPE_* values so files and sockets need no translation.
type LinkType uint16

// Link types the decoder understands.
const (
	LinkNull     LinkType = 0   // LINKTYPE_NULL: BSD loopback, a 4-byte address family in the capturing host's byte order
	LinkEthernet LinkType = 1   // LINKTYPE_ETHERNET
	LinkPPP      LinkType = 9   // LINKTYPE_PPP: a PPP protocol field, optionally after HDLC address/control bytes (RFC 1661/1662)
	LinkPPPHDLC  LinkType = 50  // LINKTYPE_PPP_HDLC: PPP in HDLC-like framing, or Cisco HDLC
	LinkPPPoE    LinkType = 51  // LINKTYPE_PPP_ETHER: a PPPoE session header, no Ethernet header
	LinkRaw      LinkType = 101 // LINKTYPE_RAW: IPv4 or IPv6, told apart by the version nibble
	LinkCHDLC    LinkType = 104 // LINKTYPE_C_HDLC: Cisco HDLC (address, control, ethertype)
	LinkLoop     LinkType = 108 // LINKTYPE_LOOP: OpenBSD loopback, the address family in network byte order
	LinkSLL      LinkType = 113 // LINKTYPE_LINUX_SLL: Linux cooked capture v1
	LinkIPv4     LinkType = 228 // LINKTYPE_IPV4
	LinkIPv6     LinkType = 229 // LINKTYPE_IPV6
	LinkNFLOG    LinkType = 239 // LINKTYPE_NFLOG: Linux NFLOG (tcpdump -i nflog:N), TLVs around the packet
	LinkSLL2     LinkType = 276 // LINKTYPE_LINUX_SLL2: Linux cooked capture v2 (what "any" produces)
)

// String names the link type.
func (l LinkType) String() string {
	switch l {
	case LinkNull:
		return "null"
	case LinkEthernet:
		return "ethernet"
	case LinkPPP:
		return "ppp"
	case LinkPPPHDLC:
		return "ppp-hdlc"
	case LinkPPPoE:
		return "ppp-ether"
	case LinkRaw:
		return "raw"
	case LinkCHDLC:
		return "c-hdlc"
	case LinkLoop:
		return "loop"
	case LinkSLL:
		return "linux-sll"
	case LinkIPv4:
		return "ipv4"
	case LinkIPv6:
		return "ipv6"
	case LinkNFLOG:
		return "nflog"
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
