package packet

// Reason labels why a frame was not decoded into a flow packet. Every
// rejected frame is counted under exactly one Reason in Stats.Errors.
type Reason uint8

// Reasons, in the order of the layers they concern.
const (
	ReasonTruncatedLink         Reason = iota // capture shorter than the link-layer header (NFLOG: its TLVs before the packet)
	ReasonUnknownLinkType                     // link type the decoder does not understand
	ReasonBadNFLOG                            // NFLOG: version not 0, or a TLV shorter than its header or longer than the frame
	ReasonNFLOGNoPayload                      // NFLOG: no packet TLV (the rule copied no bytes)
	ReasonTruncatedVLAN                       // capture ends inside an 802.1Q/802.1ad tag, a VN-Tag or a MACsec SecTAG
	ReasonTooManyVLANTags                     // more than MaxVLANTags stacked tags (802.1Q, VN-Tag, MACsec, LLC/SNAP)
	ReasonTruncatedPPPoE                      // capture ends inside the PPPoE session header or its PPP protocol field
	ReasonBadPPPoE                            // PPPoE session header whose version/type is not 1/1 or code not 0
	ReasonTruncatedMPLS                       // capture ends inside the MPLS label stack, control word or pseudowire Ethernet header
	ReasonTooManyMPLSLabels                   // more than MaxMPLSLabels labels before bottom of stack
	ReasonTooManyEncapsulations               // more than MaxEncapsulations layers (pseudowires, GRE/VXLAN Ethernet) nested
	ReasonBadIPVersion                        // version nibble disagrees with the ethertype / link type
	ReasonTruncatedIPv4                       // capture ends inside the fixed IPv4 header
	ReasonBadIPv4HeaderLength                 // IHL < 5
	ReasonBadIPv4TotalLength                  // total length < IHL*4
	ReasonTruncatedIPv6                       // capture ends inside the fixed IPv6 header
	ReasonIPv6ExtTruncated                    // capture ends inside a hop-by-hop header that must say the Jumbo length
	ReasonIPv6ExtChainTooLong                 // more than MaxIPv6ExtHeaders extension headers
	ReasonZeroIPLength                        // IP length 0 where no offload makes one (see "Lengths")
	ReasonIPLengthExceedsFrame                // IP length claims more bytes than the frame had on the wire
	ReasonHeaderExceedsIPLength               // an extension or transport header runs past the IP length
	ReasonTruncatedTransport                  // capture ends before the ports (or TCP flags / ICMP code)
	numReasons
)

// NumReasons is the number of Reason values, for per-reason counter arrays.
const NumReasons = int(numReasons)

var reasonNames = [numReasons]string{
	"truncated_link",
	"unknown_link_type",
	"bad_nflog",
	"nflog_no_payload",
	"truncated_vlan",
	"too_many_vlan_tags",
	"truncated_pppoe",
	"bad_pppoe",
	"truncated_mpls",
	"too_many_mpls_labels",
	"too_many_encapsulations",
	"bad_ip_version",
	"truncated_ipv4",
	"bad_ipv4_header_length",
	"bad_ipv4_total_length",
	"truncated_ipv6",
	"ipv6_ext_truncated",
	"ipv6_ext_chain_too_long",
	"zero_ip_length",
	"ip_length_exceeds_frame",
	"header_exceeds_ip_length",
	"truncated_transport",
}

// String returns the reason's snake_case name, as used in metrics labels.
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "reason_" + itoa(int(r))
}
