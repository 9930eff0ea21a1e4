package testhost

import (
	"net/netip"
	"strconv"
	"sync"
)

// HubKind says how the hosts of a Net are joined.
type HubKind int

const (
	// Bridge joins the hosts with a Linux bridge (BridgeName) in the hub
	// namespace: one Ethernet segment, one IPv4 /24 and one IPv6 /64.
	Bridge HubKind = iota + 1
	// Router joins the hosts with an IP router: the hub namespace forwards
	// IPv4 and IPv6, each host has its own /30 and /64 to the hub and a
	// default route via the hub.
	Router
)

// String returns "bridge", "router" or "HubKind(n)".
func (k HubKind) String() string {
	switch k {
	case Bridge:
		return "bridge"
	case Router:
		return "router"
	}
	return "HubKind(" + strconv.Itoa(int(k)) + ")"
}

// MaxHosts is the most hosts one Net can have over its life, hosts added
// later included (the address plan gives each Net 64 host slots).
const MaxHosts = 64

// BridgeName is the bridge device in the hub namespace of a Bridge Net.
const BridgeName = "br0"

// Net is a hub namespace and test hosts joined to it, each by its own veth
// pair. Build one with NewNet; grow it with AddHost.
//
// A Net is silent: its interfaces have ARP and multicast turned off and
// every neighbour (and, for a Bridge, every bridge forwarding entry) is
// static, so no ARP, neighbour discovery, MLD or router solicitation is ever
// sent, and the bridge never floods unicast to ports other than the
// destination's. The only frames on the wire are the ones tests send.
// Consequences: a host only reaches the addresses of its Net (other hosts,
// and for a Router the hub's own addresses); link-local IPv6 addresses exist
// but have no neighbour entries.
//
// Where a packet between two hosts is seen in the hub:
//   - Bridge: on the sender's hub port (received), on BridgeName (the bridge
//     is promiscuous, so every forwarded frame is also passed up to it, and
//     dropped there: the hub has no addresses and IPv6 is off in it), and on
//     the receiver's hub port (sent) — exactly three times;
//   - Router: on the sender's hub port (received) and on the receiver's hub
//     port (sent) — exactly twice, with the TTL/hop limit one lower.
type Net struct {
	// Kind is how the hosts are joined.
	Kind HubKind
	// Hub is the hub namespace. Its Iface is BridgeName for a Bridge and
	// empty for a Router (which has one interface per host, see HubIface);
	// its Addr4 and Addr6 are not set (see HubAddr).
	Hub *Host
	// Hosts are the test hosts in order of creation. AddHost appends to it,
	// so do not read it while another goroutine calls AddHost.
	Hosts []*Host

	mu     sync.Mutex // serialises AddHost and cleanup
	id     uint64     // name sequence number (shared with pairs)
	slot   uint64     // address slot k
	next   int        // next host number
	closed bool       // cleanup ran
	nsList []string   // namespaces that may exist, for cleanup
	ports  []string   // hub-side veth ends that may exist, for cleanup
}

// HubIface returns the name of the hub-side veth end that leads to h, or ""
// if h is not a host of n.
func (n *Net) HubIface(h *Host) string {
	if h == nil || h.owner != n {
		return ""
	}
	return h.hubIf
}

// HubAddr returns the hub's own IPv6 (if v6 is set) or IPv4 address on the
// interface facing h, which is h's default gateway, for a Router Net. It
// returns the zero Addr for a Bridge Net (the hub has no address) or if h
// is not a host of n.
func (n *Net) HubAddr(h *Host, v6 bool) netip.Addr {
	if h == nil || h.owner != n {
		return netip.Addr{}
	}
	if v6 {
		return h.hub6
	}
	return h.hub4
}

// netHost fills in the addresses, prefix lengths and MACs of host number i
// of a Net in address slot k (see the address plan in testhost.go).
func netHost(kind HubKind, k uint64, i int, h *Host) {
	k %= 256
	b4 := base4.As4()
	s := base6.As16()
	sub := 0xc000 | uint16(k)<<6 // 16 subnet bits of the /48: 2 fixed, 8 for k, 6 for i
	switch kind {
	case Bridge:
		h.Addr4 = netip.AddrFrom4([4]byte{b4[0], b4[1] + 1, byte(k), byte(i + 1)})
		s[6], s[7], s[15] = byte(sub>>8), byte(sub), byte(i+1)
		h.Addr6 = netip.AddrFrom16(s)
		h.bits4, h.bits6 = 24, 64
	case Router:
		h.Addr4 = netip.AddrFrom4([4]byte{b4[0], b4[1] + 1, byte(k), byte(4*i + 2)})
		h.hub4 = netip.AddrFrom4([4]byte{b4[0], b4[1] + 1, byte(k), byte(4*i + 1)})
		sub |= uint16(i) & 0x3f
		s[6], s[7], s[15] = byte(sub>>8), byte(sub), 2
		h.Addr6 = netip.AddrFrom16(s)
		s[15] = 1
		h.hub6 = netip.AddrFrom16(s)
		h.bits4, h.bits6 = 30, 64
	}
	// Locally administered unicast MACs; unique within the Net, which is
	// all that matters (every Net is its own Ethernet segment).
	h.mac = [6]byte{0x02, 0x77, 0xee, 0x01, 0, byte(i)}
	h.hubMAC = [6]byte{0x02, 0x77, 0xee, 0x02, 0, byte(i)}
}

// bridgeMAC is the fixed address of BridgeName (else the bridge takes its
// lowest port's address, which changes as ports come and go).
var bridgeMAC = [6]byte{0x02, 0x77, 0xee, 0x03, 0, 0}
