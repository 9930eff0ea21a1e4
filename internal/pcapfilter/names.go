package pcapfilter

import "github.com/weir-dev/weir/internal/iana"

// Protocol qualifiers ("pname" in pcap's grammar).
type proto uint8

const (
	pDefault proto = iota
	pLink          // ether, link
	pIP
	pIP6
	pARP
	pRARP
	pTCP
	pUDP
	pSCTP
	pICMP
	pICMP6
	pIGMP
	pAH
	pESP
	pPIM
	pVRRP
	pIGRP
	pCARP
)

var protoNames = map[string]proto{
	"ether": pLink, "link": pLink, "ip": pIP, "ip6": pIP6, "arp": pARP, "rarp": pRARP,
	"tcp": pTCP, "udp": pUDP, "sctp": pSCTP, "icmp": pICMP, "icmp6": pICMP6, "igmp": pIGMP,
	"ah": pAH, "esp": pESP, "pim": pPIM, "vrrp": pVRRP, "igrp": pIGRP, "carp": pCARP,
}

func (p proto) String() string {
	for k, v := range protoNames {
		if v == p && k != "link" {
			return k
		}
	}
	return "default"
}

// IP protocol numbers.
const (
	ipprotoICMP   = 1
	ipprotoIGMP   = 2
	ipprotoTCP    = 6
	ipprotoIGRP   = 9
	ipprotoUDP    = 17
	ipprotoFrag   = 44 // IPv6 fragment header
	ipprotoESP    = 50
	ipprotoAH     = 51
	ipprotoICMPv6 = 58
	ipprotoPIM    = 103
	ipprotoVRRP   = 112 // also CARP
	ipprotoSCTP   = 132
)

// Ethernet types.
const (
	etherIP   = 0x0800
	etherARP  = 0x0806
	etherRARP = 0x8035
	etherIP6  = 0x86dd
	etherMTU  = 1500 // type/length values up to this are 802.3 lengths
)

// Port protocol sets for named ports.
const (
	portTCP = iana.TCP
	portUDP = iana.UDP
)

// etherProtoNames are the names "ether proto \NAME" accepts.
var etherProtoNames = map[string]uint32{
	"ip": etherIP, "ip6": etherIP6, "arp": etherARP, "rarp": etherRARP,
}

// constNames are the named constants of arithmetic expressions.
var constNames = map[string]uint32{
	"tcpflags": 13, "tcp-fin": 0x01, "tcp-syn": 0x02, "tcp-rst": 0x04, "tcp-push": 0x08,
	"tcp-ack": 0x10, "tcp-urg": 0x20, "tcp-ece": 0x40, "tcp-cwr": 0x80,
	"icmptype": 0, "icmpcode": 1,
	"icmp-echoreply": 0, "icmp-unreach": 3, "icmp-sourcequench": 4, "icmp-redirect": 5,
	"icmp-echo": 8, "icmp-routeradvert": 9, "icmp-routersolicit": 10, "icmp-timxceed": 11,
	"icmp-paramprob": 12, "icmp-tstamp": 13, "icmp-tstampreply": 14, "icmp-ireq": 15,
	"icmp-ireqreply": 16, "icmp-maskreq": 17, "icmp-maskreply": 18,
	"icmp6type": 0, "icmp6code": 1,
	"icmp6-destinationunreach": 1, "icmp6-packettoobig": 2, "icmp6-timeexceeded": 3,
	"icmp6-parameterproblem": 4, "icmp6-echo": 128, "icmp6-echoreply": 129,
	"icmp6-multicastlistenerquery": 130, "icmp6-multicastlistenerreportv1": 131,
	"icmp6-multicastlistenerdone": 132, "icmp6-routersolicit": 133, "icmp6-routeradvert": 134,
	"icmp6-neighborsolicit": 135, "icmp6-neighboradvert": 136, "icmp6-redirect": 137,
	"icmp6-routerrenum": 138, "icmp6-nodeinformationquery": 139,
	"icmp6-nodeinformationresponse": 140, "icmp6-ineighbordiscoverysolicit": 141,
	"icmp6-ineighbordiscoveryadvert": 142, "icmp6-multicastlistenerreportv2": 143,
	"icmp6-homeagentdiscoveryrequest": 144, "icmp6-homeagentdiscoveryreply": 145,
	"icmp6-mobileprefixsolicit": 146, "icmp6-mobileprefixadvert": 147,
	"icmp6-certpathsolicit": 148, "icmp6-certpathadvert": 149,
	"icmp6-multicastrouteradvert": 151, "icmp6-multicastroutersolicit": 152,
	"icmp6-multicastrouterterminate": 153,
}

// keywords are the words the grammar reserves (besides protocol names).
var keywords = map[string]bool{
	"and": true, "or": true, "not": true, "src": true, "dst": true, "host": true, "net": true,
	"mask": true, "port": true, "portrange": true, "proto": true, "broadcast": true,
	"multicast": true, "less": true, "greater": true, "len": true, "vlan": true,
	"inbound": true, "outbound": true,
}

// unsupported are pcap-filter primitives this compiler rejects by name.
var unsupported = map[string]bool{
	"gateway": true, "decnet": true, "iso": true, "esis": true, "es-is": true, "isis": true,
	"is-is": true, "clnp": true, "l1": true, "l2": true, "iih": true, "lsp": true, "snp": true,
	"csnp": true, "psnp": true, "atalk": true, "aarp": true, "lat": true, "sca": true,
	"moprc": true, "mopdl": true, "stp": true, "ipx": true, "netbeui": true, "llc": true,
	"wlan": true, "type": true, "subtype": true, "dir": true, "ra": true, "ta": true,
	"addr1": true, "addr2": true, "addr3": true, "addr4": true, "mpls": true, "pppoed": true,
	"pppoes": true, "geneve": true, "vxlan": true, "radio": true, "fddi": true, "tr": true,
	"protochain": true, "ifname": true, "on": true, "rnr": true, "rulenum": true,
	"reason": true, "rset": true, "ruleset": true, "srnr": true, "subrulenum": true,
	"action": true, "ifindex": true, "atm": true, "vpi": true, "vci": true, "lane": true,
	"oamf4s": true, "oamf4e": true, "oamf4": true, "oam": true, "metac": true, "bcc": true,
	"sc": true, "ilmic": true, "connectmsg": true, "metaconnect": true, "hdlc": true,
	"sio": true, "opc": true, "dpc": true, "sls": true, "byte": true, "mtp2": true, "mtp3": true,
}

// isReserved reports whether w is a keyword, protocol name or unsupported
// primitive (and so cannot be a bare name).
func isReserved(w string) bool {
	_, isProto := protoNames[w]
	return keywords[w] || isProto || unsupported[w]
}

// suggest returns the known word closest to w (edit distance at most 2,
// and less than the word's length), or "".
func suggest(w string) string {
	best, bestD := "", 3
	try := func(k string) {
		d := editDistance(w, k)
		if d >= len(w) {
			return
		}
		if d < bestD || d == bestD && k < best {
			best, bestD = k, d
		}
	}
	for k := range keywords {
		try(k)
	}
	for k := range protoNames {
		try(k)
	}
	for k := range constNames {
		try(k)
	}
	return best
}

// editDistance is the Levenshtein distance, bounded in cost by the short
// words it is used on (at most MaxExprLen bytes are ever compared).
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	var prev, cur [65]int
	for j := 0; j <= len(b); j++ {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			c = min(c, prev[j]+1, cur[j-1]+1)
			cur[j] = c
		}
		prev = cur
	}
	return prev[len(b)]
}
