package ipfix

import (
	"strconv"
	"strings"
)

// forwardingStatus values (RFC 7270 4.12) of the Dropped status: the top
// two bits are the status (10: dropped), the low six the reason code;
// these are whole-octet values.
const (
	fwdDropped         = 128 // unknown
	fwdACLDeny         = 129
	fwdACLDrop         = 130
	fwdUnroutable      = 131
	fwdAdjacency       = 132
	fwdFragmentation   = 133 // fragmentation needed and DF set
	fwdBadChecksum     = 134 // bad header checksum
	fwdBadTotalLength  = 135
	fwdBadHeaderLength = 136
	fwdBadTTL          = 137
	fwdPolicer         = 138
	fwdWRED            = 139
	fwdRPF             = 140
	fwdForUs           = 141
	fwdBadOutIface     = 142 // bad output interface
	fwdHardware        = 143
)

// dropCodes maps the Linux kernel's drop reasons (flow.Record.DropReason:
// skb_drop_reason names without their prefix) to the forwardingStatus
// codes of RFC 7270 4.12 (status Dropped, 128..143). A name ending in
// "*" matches by prefix, when no whole name does. Any other reason (the
// RFC has no code for it, or Linux does not tell the cases apart) is 128,
// unknown. The RFC gives only the codes' names: packet filters are "ACL
// drop", security policy refusals "ACL deny", and drops of packets that
// were addressed to this host, by its own stack, "for us".
var dropCodes = []dropCode{
	{"NETFILTER_DROP", fwdACLDrop},          // an nftables/iptables rule dropped or rejected it
	{"TC_INGRESS", fwdACLDrop},              // a tc filter's drop action on ingress
	{"TC_EGRESS", fwdACLDrop},               // a tc filter's drop action on egress
	{"XDP", fwdACLDrop},                     // an XDP program dropped it
	{"BPF_CGROUP_EGRESS", fwdACLDrop},       // a cgroup BPF program refused to send it
	{"XFRM_POLICY", fwdACLDeny},             // IPsec (xfrm) policy check refused it
	{"SECURITY_HOOK", fwdACLDeny},           // a Linux security module refused it
	{"IP_INNOROUTES", fwdUnroutable},        // no route on input
	{"IP_OUTNOROUTES", fwdUnroutable},       // no route on output
	{"IP_INADDRERRORS", fwdUnroutable},      // destination address unusable (IPSTATS_MIB_INADDRERRORS)
	{"IP_INVALID_DEST", fwdUnroutable},      // destination invalid (0.0.0.0, martian)
	{"NEIGH_*", fwdAdjacency},               // ARP/NDP resolution failed, its queue full, the entry dead
	{"PKT_TOO_BIG", fwdFragmentation},       // over the MTU and not to be fragmented (DF set, IPv6)
	{"FRAG_*", fwdFragmentation},            // reassembly timed out, fragment too far from the others
	{"DUP_FRAG", fwdFragmentation},          // duplicate fragment
	{"IP_CSUM", fwdBadChecksum},             // IPv4 header checksum
	{"TCP_CSUM", fwdBadChecksum},            // TCP checksum
	{"UDP_CSUM", fwdBadChecksum},            // UDP checksum
	{"ICMP_CSUM", fwdBadChecksum},           // ICMP checksum
	{"SKB_CSUM", fwdBadChecksum},            // checksum found bad while checking the packet
	{"PKT_TOO_SMALL", fwdBadTotalLength},    // shorter than its IP (or UDP) length field says
	{"IP_INHDR", fwdBadHeaderLength},        // bad IP header: version, header length (also TTL expiry when forwarding)
	{"HDR_TRUNC", fwdBadHeaderLength},       // a header cut short
	{"IPV6_BAD_EXTHDR", fwdBadHeaderLength}, // malformed IPv6 extension header
	{"TCP_MINTTL", fwdBadTTL},               // TTL/hop limit under the socket's IP_MINTTL
	{"IPV6_NDISC_HOP_LIMIT", fwdBadTTL},     // neighbour discovery message with a hop limit other than 255
	{"IP_RPFILTER", fwdRPF},                 // reverse path filter (rp_filter)
	{"IP_LOCAL_SOURCE", fwdRPF},             // source validation: a local address as source
	{"IP_INVALID_SOURCE", fwdRPF},           // source validation: martian source
	{"QDISC_CONGESTED", fwdWRED},            // a qdisc's AQM (RED family) dropped it for congestion
	{"CAKE_FLOOD", fwdWRED},                 // CAKE's flood protection (BLUE AQM)
	{"DUALPI2_STEP_DROP", fwdWRED},          // DualPI2's AQM step threshold
	{"QDISC_*", fwdPolicer},                 // a qdisc's limit: QDISC_DROP, QDISC_OVERLIMIT
	{"FQ_*", fwdPolicer},                    // fq's band, horizon or per-flow limit
	{"NO_SOCKET", fwdForUs},                 // addressed to this host, no socket (closed port)
	{"SOCKET_*", fwdForUs},                  // addressed to this host, its socket refused it (filter, full buffer, closing)
	{"PROTO_MEM", fwdForUs},                 // addressed to this host, the protocol's memory limit hit
	{"IP_NOPROTO", fwdForUs},                // addressed to this host, no handler for its protocol
	{"TCP_*", fwdForUs},                     // addressed to this host, refused by TCP (sequence, window, state, MD5/AO)
}

// dropCode is a drop reason (or, in dropByPrefix, a prefix of reasons)
// and its forwardingStatus.
type dropCode struct {
	reason string
	code   uint8
}

// dropCodeNames names the 64 reason codes of the Dropped status, as a
// decoded record's DropReason: RFC 7270's names in upper snake case, and
// "DROP_<code>" for the codes it leaves unassigned.
var dropCodeNames = func() (n [64]string) {
	for i := range n {
		n[i] = "DROP_" + strconv.Itoa(fwdDropped+i)
	}
	copy(n[:], []string{"UNKNOWN", "ACL_DENY", "ACL_DROP", "UNROUTABLE", "ADJACENCY", "FRAGMENTATION_AND_DF_SET",
		"BAD_HEADER_CHECKSUM", "BAD_TOTAL_LENGTH", "BAD_HEADER_LENGTH", "BAD_TTL", "POLICER", "WRED", "RPF",
		"FOR_US", "BAD_OUTPUT_INTERFACE", "HARDWARE"})
	return n
}()

// dropByName and dropByPrefix index dropCodes, the first with the names
// of dropCodeNames too (a record decoded from IPFIX keeps its code when
// it is exported again).
var dropByName, dropByPrefix = func() (map[string]uint8, []dropCode) {
	m := map[string]uint8{}
	for i, n := range dropCodeNames {
		m[n] = uint8(fwdDropped + i)
	}
	var pre []dropCode
	for _, c := range dropCodes {
		if p, ok := strings.CutSuffix(c.reason, "*"); ok {
			pre = append(pre, dropCode{p, c.code})
		} else {
			m[c.reason] = c.code
		}
	}
	return m, pre
}()

// dropStatus is the forwardingStatus of a record whose latest drop had
// reason (flow.Record.DropReason), by dropByName and dropByPrefix; 128
// for a reason neither knows.
func dropStatus(reason string) uint8 {
	if c, ok := dropByName[reason]; ok {
		return c
	}
	for _, p := range dropByPrefix {
		if strings.HasPrefix(reason, p.reason) {
			return p.code
		}
	}
	return fwdDropped
}
