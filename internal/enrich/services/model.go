// Package services models load balancers the way OVN's northbound database
// does — nodes with a switch and a gateway router datapath, load balancers
// (VIP:port → backends), load-balancer groups attached to datapaths — and
// compiles them, incrementally, into the logical rows each datapath needs.
//
// Each compiled row is shared by a datapath group (the set of datapaths it
// applies to), interned by membership, so a load balancer attached to N
// nodes through one group costs a constant number of rows, not N of each.
// Adding, changing or removing one load balancer, or attaching a group to
// one more node, touches only the rows and groups involved and reports
// them as a ChangeSet.
package services

import (
	"fmt"
	"net/netip"
	"strings"
)

// Protocol is a load balancer's transport protocol.
type Protocol uint8

// Protocols. ProtoTCP is the zero value, as in OVN.
const (
	ProtoTCP Protocol = iota
	ProtoUDP
	ProtoSCTP
)

var protoNames = [...]string{"tcp", "udp", "sctp"}

// String returns "tcp", "udp" or "sctp".
func (p Protocol) String() string {
	if int(p) < len(protoNames) {
		return protoNames[p]
	}
	return fmt.Sprintf("proto(%d)", uint8(p))
}

// ParseProtocol is the inverse of String; "" is tcp.
func ParseProtocol(s string) (Protocol, error) {
	if s == "" {
		return ProtoTCP, nil
	}
	for i, n := range protoNames {
		if strings.EqualFold(n, s) {
			return Protocol(i), nil
		}
	}
	return 0, fmt.Errorf("services: unknown protocol %q", s)
}

// IPProto returns the IP protocol number (6, 17, 132).
func (p Protocol) IPProto() uint8 {
	switch p {
	case ProtoUDP:
		return 17
	case ProtoSCTP:
		return 132
	}
	return 6
}

// VIP is one frontend of a load balancer and the backends behind it.
type VIP struct {
	// Frontend is the virtual address and port; port 0 balances every
	// port of the protocol (OVN's VIP without a port).
	Frontend netip.AddrPort
	// Backends receive the connections; an empty list rejects them (with
	// Options.Reject) or drops them.
	Backends []netip.AddrPort
}

// Options are the load balancer options that change the compiled rows.
type Options struct {
	SkipSNAT        bool   // gateway routers do not SNAT traffic to the backends (skip_snat)
	ForceSNAT       bool   // gateway routers SNAT it to their own address (lb_force_snat_ip=router_ip)
	Reject          bool   // a VIP with no backends answers with a reset/ICMP error (reject)
	HairpinSNATIP   string // source address for hairpinned traffic (hairpin_snat_ip), "" none
	AffinityTimeout uint32 // seconds of session affinity (affinity_timeout), 0 none
}

// LB is a load balancer: a name, a protocol and its VIPs.
type LB struct {
	// Name identifies the load balancer ("namespace/name" for a
	// Kubernetes Service); it is what enrichment reports as the service.
	Name     string
	Protocol Protocol
	VIPs     []VIP
	Options  Options
}

// Group is a load-balancer group: a set of load balancers attached to
// datapaths as one (OVN's Load_Balancer_Group).
type Group struct {
	Name string
	LBs  []string // load balancer names
}

// Node is one node: a logical switch and a gateway router, and what is
// attached to them.
type Node struct {
	Name string
	// Switch and Router name the node's datapaths; "" means "ls-"+Name
	// and "lr-"+Name.
	Switch string
	Router string
	// Subnets are the router's port networks (gateway address and
	// prefix, e.g. 10.244.1.1/24); ARP/ND responders answer only for
	// VIPs inside one of them.
	Subnets []netip.Prefix
	// Groups are attached to both datapaths; SwitchGroups and
	// RouterGroups to one.
	Groups       []string
	SwitchGroups []string
	RouterGroups []string
	// LBs are attached directly to both datapaths; SwitchLBs and
	// RouterLBs to one.
	LBs       []string
	SwitchLBs []string
	RouterLBs []string
}

// SwitchName returns the node's switch datapath name.
func (n *Node) SwitchName() string {
	if n.Switch != "" {
		return n.Switch
	}
	return "ls-" + n.Name
}

// RouterName returns the node's router datapath name.
func (n *Node) RouterName() string {
	if n.Router != "" {
		return n.Router
	}
	return "lr-" + n.Name
}
