// Package iana holds the service and protocol names weir understands, as
// Debian's /etc/services (netbase) and /etc/protocols list them. It is built
// in rather than read from /etc so that filters and queries mean the same on
// every host.
package iana

// Transport protocol sets of a named port.
const (
	TCP = 1 << iota // the service is listed for TCP
	UDP             // the service is listed for UDP
)

// Service is a named port and the transports /etc/services lists it for.
type Service struct {
	Port   uint16
	Protos uint8 // TCP|UDP bits
}

var services = map[string]Service{
	"ftp-data": {20, TCP}, "ftp": {21, TCP}, "ssh": {22, TCP}, "telnet": {23, TCP},
	"smtp": {25, TCP}, "domain": {53, TCP | UDP}, "bootps": {67, UDP},
	"bootpc": {68, UDP}, "tftp": {69, UDP}, "http": {80, TCP}, "www": {80, TCP},
	"kerberos": {88, TCP | UDP}, "pop3": {110, TCP}, "ntp": {123, UDP},
	"netbios-ns": {137, UDP}, "netbios-dgm": {138, UDP}, "netbios-ssn": {139, TCP},
	"imap": {143, TCP}, "imap2": {143, TCP}, "snmp": {161, TCP | UDP},
	"snmp-trap": {162, TCP | UDP}, "bgp": {179, TCP}, "ldap": {389, TCP | UDP},
	"https": {443, TCP | UDP}, "microsoft-ds": {445, TCP}, "isakmp": {500, UDP},
	"syslog": {514, UDP}, "printer": {515, TCP}, "dhcpv6-client": {546, UDP},
	"dhcpv6-server": {547, UDP}, "submission": {587, TCP}, "ipp": {631, TCP},
	"ldaps": {636, TCP | UDP}, "domain-s": {853, TCP | UDP}, "rsync": {873, TCP},
	"imaps": {993, TCP}, "pop3s": {995, TCP}, "openvpn": {1194, TCP | UDP},
	"radius": {1812, TCP | UDP}, "radius-acct": {1813, TCP | UDP},
	"nfs": {2049, TCP | UDP}, "mysql": {3306, TCP}, "ms-wbt-server": {3389, TCP},
	"ipsec-nat-t": {4500, UDP}, "sip": {5060, TCP | UDP}, "sip-tls": {5061, TCP | UDP},
	"mdns": {5353, UDP}, "postgresql": {5432, TCP}, "redis": {6379, TCP},
	"http-alt": {8080, TCP}, "webcache": {8080, TCP},
}

var protocols = map[string]uint8{
	"icmp": 1, "igmp": 2, "ipencap": 4, "tcp": 6, "egp": 8, "igp": 9, "udp": 17,
	"ipv6": 41, "ipv6-route": 43, "ipv6-frag": 44, "rsvp": 46, "gre": 47, "esp": 50, "ah": 51,
	"ipv6-icmp": 58, "ipv6-nonxt": 59, "ipv6-opts": 60, "eigrp": 88, "ospf": 89, "ipip": 94,
	"pim": 103, "vrrp": 112, "l2tp": 115, "sctp": 132,
}

// protoShort are the display names of the common protocol numbers
// ("icmpv6" reads better in a table than /etc/protocols' "ipv6-icmp").
var protoShort = map[uint8]string{
	1: "icmp", 2: "igmp", 6: "tcp", 17: "udp", 47: "gre", 50: "esp", 51: "ah",
	58: "icmpv6", 89: "ospf", 112: "vrrp", 132: "sctp",
}

// LookupService returns the named service.
func LookupService(name string) (Service, bool) {
	s, ok := services[name]
	return s, ok
}

// LookupProto returns the IP protocol number of name: /etc/protocols names,
// plus "icmpv6" and "icmp6" for 58.
func LookupProto(name string) (uint8, bool) {
	if name == "icmpv6" || name == "icmp6" {
		return 58, true
	}
	return EtcProtocol(name)
}

// EtcProtocol returns the IP protocol number of name as /etc/protocols
// lists it, without weir's aliases (what libpcap's "proto NAME" accepts).
func EtcProtocol(name string) (uint8, bool) {
	n, ok := protocols[name]
	return n, ok
}

// ProtoName is the display name of protocol n: a short name for the common
// ones, else the decimal number.
func ProtoName(n uint8) string {
	if s, ok := protoShort[n]; ok {
		return s
	}
	return itoa(n)
}

func itoa(n uint8) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	var b [3]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = '0' + n%10
		n /= 10
	}
	return string(b[i:])
}
