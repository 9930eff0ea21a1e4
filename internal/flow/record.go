package flow

import (
	"fmt"
	"net/netip"
)

// EndReason says why a Record was emitted.
type EndReason uint8

// End reasons. The numeric values are weir's own; sinks map them to their
// formats (IPFIX flowEndReason maps idle→1, active→2, end→3, eof and
// shutdown→4, full→5).
const (
	ReasonNone     EndReason = iota
	ReasonIdle               // no packet for the idle timeout
	ReasonActive             // long-lived flow: delta since last report, state kept
	ReasonEnd                // TCP FIN both ways or RST, after the linger
	ReasonFull               // table full: the stalest flows were evicted
	ReasonEOF                // the input ended
	ReasonShutdown           // SIGINT/SIGTERM or a programmatic stop
	numReasons
)

var reasonNames = [numReasons]string{"none", "idle", "active", "end", "full", "eof", "shutdown"}

// NumReasons is the number of EndReason values, for per-reason counter arrays.
const NumReasons = int(numReasons)

// String returns the reason's name as used in JSON records and metrics.
func (r EndReason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Packet is one observed packet's contribution to a flow. Sources set Time
// and Iface; the decoder fills the rest.
type Packet struct {
	Key      Key    // wire orientation: Src sent this packet
	Time     int64  // capture time, Unix nanoseconds
	Length   uint32 // IP total length: IP header + payload (IPFIX octetDeltaCount)
	TCPFlags uint8  // TCP flags byte (FIN=0x01 … CWR=0x80); 0 for other protocols
	Role     Role   // what this packet says about who opened the flow
	Iface    uint16 // interface index from an Ifaces registry
	VLAN     uint16 // outermost 802.1Q VLAN ID (12 bits), 0 if untagged
}

// Role is the decoder's hint about which endpoint opened a flow. The table
// orients a flow by its first packet and corrects that with these hints, so
// it needs no protocol knowledge of its own.
type Role uint8

// Roles.
const (
	RoleUnknown   Role = iota // no hint (most packets)
	RoleInitiator             // sender opened the flow: TCP SYN without ACK, ICMP echo/timestamp request
	RoleResponder             // sender answers: TCP SYN+ACK, ICMP echo/timestamp reply
)

// TCP flag bits as they appear in the TCP header's flags byte.
const (
	TCPFin = 0x01
	TCPSyn = 0x02
	TCPRst = 0x04
	TCPPsh = 0x08
	TCPAck = 0x10
	TCPUrg = 0x20
	TCPEce = 0x40
	TCPCwr = 0x80
)

// Record is a flow as it leaves the table: one record per eviction. With
// active timeouts a long flow yields several records whose counters are
// deltas that sum to the flow's totals.
//
// Key is in initiator orientation: Packets/Bytes/TCPFlags count what the
// initiator (Key.Src) sent, the Rev* fields what the responder sent.
type Record struct {
	Key         Key
	Packets     uint64
	Bytes       uint64 // sum of IP total lengths
	RevPackets  uint64
	RevBytes    uint64
	TCPFlags    uint8 // OR of flags sent by the initiator
	RevTCPFlags uint8
	EndReason   EndReason
	VLAN        uint16 // outermost VLAN ID of the flow's first packet, 0 if untagged (not part of Key)
	Start       int64  // first packet in this record, Unix ns
	End         int64  // last packet in this record, Unix ns
	Iface       string // interface the flow was first seen on
	// Node names where the record was observed: the host's name (or
	// --node-name), for collected records the exporter's. "" when not set.
	Node string
	// TunnelSrc and TunnelDst are the outer endpoints of the tunnel the
	// flow's first packet came through, when the source keyed it by the
	// packet inside (weir capture --decap): TunnelSrc is the outer address
	// on the initiator's side. Invalid (the zero Addr) otherwise. Not part
	// of the key: the same inner 5-tuple through two tunnels is one flow.
	TunnelSrc, TunnelDst netip.Addr
	// DropPackets and DropBytes count the flow's packets (both ways) the
	// kernel dropped since the last record, and DropReason names the
	// latest drop's reason (the kernel's skb_drop_reason without its
	// prefix, e.g. "NETFILTER_DROP"). Only the eBPF source with drops on
	// fills them; a flow whose packets were all dropped before any
	// watched interface saw them has Packets 0.
	DropPackets uint64
	DropBytes   uint64
	DropReason  string
	// Sampling is N when the counts are of 1 packet in N (eBPF source
	// with --sampling; with --sample-flows, of 1 flow in N, counted
	// whole); 0 or 1: every packet was counted.
	Sampling uint32
	// PostNAT is the flow's key after network address translation, in
	// the orientation of Key: PostNAT.Src is what the initiator's address
	// and port became (SNAT, masquerade), PostNAT.Dst where the
	// connection was sent (DNAT: the backend behind a service VIP).
	// Only the conntrack source fills it, and only for translated
	// connections: PostNAT.IPVersion is 0 otherwise (see NATed).
	PostNAT Key
	// Verdict is what a firewall rule did with the flow's packets:
	// VerdictDeny for deny flows (NFLOG), VerdictNone when not known.
	Verdict Verdict
	// Rule names the rule behind Verdict: the NFLOG log prefix, trailing
	// spaces removed. Empty when Verdict is VerdictNone.
	Rule string
	// Mark and Zone are the conntrack mark and zone of the connection
	// (conntrack source; 0 otherwise). For deny flows Mark is the packet
	// mark of the last dropped packet.
	Mark uint32
	Zone uint16
	// SrcWorkload and DstWorkload name the workloads at the two ends
	// (Key.Src and Key.Dst), and Service the service (load balancer) the
	// flow reached, with ServiceMatch saying how it was found. Enrichment
	// (internal/enrich) fills them when an inventory is configured; nil
	// when the address is not in it. They point into the enrichment
	// index's immutable entries, so filling them costs no allocation:
	// never modify what they point to.
	SrcWorkload  *Workload
	DstWorkload  *Workload
	Service      *Service
	ServiceMatch ServiceMatch
}

// Workload is what the inventory knows of one end of a flow.
type Workload struct {
	Name      string // pod, VM or host name
	Namespace string // "" outside Kubernetes-like inventories
	Node      string // node the workload runs on, "" if not known
}

// Service is what the inventory knows of the service a flow reached.
type Service struct {
	// Name is the load balancer's name ("namespace/name" for a Kubernetes
	// Service). For ServiceMatchAmbiguous it lists every service the
	// backend serves, sorted and comma-separated.
	Name string
	// Backends lists the backends of the VIP the flow was sent to
	// ("10.0.0.5:8080,10.0.0.6:8080"); for backend matches, the backend
	// itself.
	Backends string
	// Group names the load-balancer group(s) the load balancer is in,
	// comma-separated; "" if none.
	Group string
}

// ServiceMatch says how enrichment tied a flow to its Service.
type ServiceMatch uint8

// Service matches.
const (
	ServiceMatchNone      ServiceMatch = iota // no service
	ServiceMatchVIP                           // Key.Dst is a service VIP (and port)
	ServiceMatchNAT                           // conntrack: the original destination is a VIP, PostNAT.Dst the backend it was sent to
	ServiceMatchBackend                       // Key.Dst is a backend of exactly one service
	ServiceMatchAmbiguous                     // Key.Dst is a backend of several services: Service.Name lists them all
	numServiceMatches
)

var serviceMatchNames = [numServiceMatches]string{"", "vip", "nat", "backend", "ambiguous"}

// String returns the match's name in JSON records ("" for none).
func (m ServiceMatch) String() string {
	if m < numServiceMatches {
		return serviceMatchNames[m]
	}
	return fmt.Sprintf("match(%d)", uint8(m))
}

// ParseServiceMatch is the inverse of ServiceMatch.String.
func ParseServiceMatch(s string) (ServiceMatch, error) {
	for i, n := range serviceMatchNames {
		if n == s {
			return ServiceMatch(i), nil
		}
	}
	return ServiceMatchNone, fmt.Errorf("flow: unknown service match %q", s)
}

// NATed reports whether the record carries a translated key.
func (r *Record) NATed() bool { return r.PostNAT.IPVersion != 0 }

// Verdict is a firewall's decision about a flow.
type Verdict uint8

// Verdicts.
const (
	VerdictNone Verdict = iota // not known (every packet source; conntrack connections)
	VerdictDeny                // dropped by a rule that logged the packets (NFLOG)
	numVerdicts
)

var verdictNames = [numVerdicts]string{"", "deny"}

// String returns the verdict's name in JSON records ("" for VerdictNone).
func (v Verdict) String() string {
	if v < numVerdicts {
		return verdictNames[v]
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

// ParseVerdict is the inverse of Verdict.String.
func ParseVerdict(s string) (Verdict, error) {
	for i, n := range verdictNames {
		if n == s {
			return Verdict(i), nil
		}
	}
	return VerdictNone, fmt.Errorf("flow: unknown verdict %q", s)
}

// MaxIfaces bounds the names one Ifaces registry holds; names past the
// bound are all recorded as OtherIface.
const MaxIfaces = 65535

// OtherIface names the interfaces registered after MaxIfaces-1 others.
const OtherIface = "(other)"

// Ifaces interns interface names to the small indexes carried in Packet.
// It is not safe for concurrent use; register names before capture starts.
type Ifaces struct {
	names  []string
	byName map[string]uint16

	// Tunnels (IndexTunnel): an index whose packets came through a tunnel
	// names its interface again, with the tunnel's endpoints beside it.
	tunnels        []tunnelKey // by index; shorter than names when the last ones are plain
	byTunnel       map[tunnelKey]uint16
	lastTunnel     tunnelKey
	lastTunnelIdx  uint16
	lastTunnelOK   bool
	tunnelOverflow uint64
}

// Index returns the index of name, registering it if new.
func (f *Ifaces) Index(name string) uint16 {
	if i, ok := f.byName[name]; ok {
		return i
	}
	if f.byName == nil {
		f.byName = make(map[string]uint16)
	}
	if len(f.names) >= MaxIfaces-1 {
		// Bounded: later names share one index, so a host whose
		// interfaces churn for months cannot wrap the 16-bit index.
		name = OtherIface
		if i, ok := f.byName[name]; ok {
			return i
		}
	}
	i := uint16(len(f.names))
	f.names = append(f.names, name)
	f.byName[name] = i
	return i
}

// Name returns the name registered at index i, or "" if none is.
func (f *Ifaces) Name(i uint16) string {
	if f == nil || int(i) >= len(f.names) {
		return ""
	}
	return f.names[i]
}
