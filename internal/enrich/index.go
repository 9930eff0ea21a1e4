package enrich

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/weir-dev/weir/internal/flow"
)

// Index answers enrichment lookups: address → workload (longest prefix
// match) and (protocol, address, port) → service. It is built once from an
// Inventory and never changes afterwards, so any number of goroutines may
// use it at once; records point into its entries.
type Index struct {
	// Workloads by family (0 IPv4, 1 IPv6): host addresses in a hash
	// map, wider prefixes in a flattened range table.
	exact  [2]map[[16]byte]*flow.Workload
	ranges [2]ranges

	// endpoints holds VIPs and backends in one map: one lookup serves
	// both, as a record's destination is looked up as either.
	endpoints map[svcKey]endpoint
	portless  bool // some VIP or backend has port 0: a miss also tries port 0

	workloads, services, vipCount, conflicts int
}

// svcKey is a service frontend or backend: 20 bytes, no padding.
type svcKey struct {
	addr  [16]byte // IPv4-mapped for IPv4, as in flow.Key
	port  uint16   // 0: every port
	proto uint8    // IP protocol number
	fam   uint8    // 0 IPv4, 1 IPv6
}

// endpoint is what a (protocol, address, port) says about a flow sent to
// it: the service whose VIP it is, and the service(s) it is a backend of.
type endpoint struct {
	vip     *flow.Service     // nil: not a VIP
	backend *flow.Service     // nil: not a backend
	match   flow.ServiceMatch // of backend: ServiceMatchBackend or ServiceMatchAmbiguous
}

func family(v uint8) uint8 {
	if v == 4 {
		return 0
	}
	return 1
}

func addrFamily(a netip.Addr) uint8 {
	if a.Is4() {
		return 0
	}
	return 1
}

// NewIndex validates inv (see Inventory.Validate) and builds its index.
// The index keeps no reference to inv.
func NewIndex(inv *Inventory) (*Index, error) {
	if err := inv.Validate(); err != nil {
		return nil, err
	}
	return buildIndex(inv), nil
}

// EmptyIndex returns an index that knows nothing: every lookup misses.
func EmptyIndex() *Index { return buildIndex(&Inventory{}) }

// buildIndex builds the index of a valid inventory.
func buildIndex(inv *Inventory) *Index {
	x := &Index{endpoints: map[svcKey]endpoint{}}
	x.buildWorkloads(inv.Workloads)
	x.buildServices(inv)
	return x
}

func (x *Index) buildWorkloads(ws []Workload) {
	entries := make([]flow.Workload, len(ws)) // one allocation for all
	nHost := 0
	for i := range ws {
		for _, p := range ws[i].Addrs {
			if p.IsSingleIP() {
				nHost++
			}
		}
	}
	for f := range x.exact {
		x.exact[f] = make(map[[16]byte]*flow.Workload, nHost/2)
	}
	var wide [2][]rangePrefix
	seen := map[netip.Prefix]bool{} // wider prefixes already claimed
	for i := range ws {
		w := &ws[i]
		e := &entries[i]
		*e = flow.Workload{Name: w.Name, Namespace: w.Namespace, Node: w.Node}
		x.workloads++
		for _, p := range w.Addrs {
			p = p.Masked()
			f := addrFamily(p.Addr())
			if p.IsSingleIP() {
				k := p.Addr().As16()
				if _, dup := x.exact[f][k]; dup {
					x.conflicts++ // the first workload listing it keeps it
					continue
				}
				x.exact[f][k] = e
				continue
			}
			if seen[p] {
				x.conflicts++
				continue
			}
			seen[p] = true
			first, last := prefixRange(p)
			bits := p.Bits()
			if f == 0 {
				bits += 96
			}
			wide[f] = append(wide[f], rangePrefix{first: first, last: last, bits: bits, w: e})
		}
	}
	for f := range wide {
		x.ranges[f] = buildRanges(wide[f])
	}
}

func (x *Index) buildServices(inv *Inventory) {
	groupsOf := map[string][]string{} // LB name → names of the groups holding it
	for _, g := range inv.Groups {
		for _, lb := range g.LBs {
			if !slices.Contains(groupsOf[lb], g.Name) {
				groupsOf[lb] = append(groupsOf[lb], g.Name)
			}
		}
	}
	type served struct {
		names, groups []string
		backend       string
	}
	byBackend := map[svcKey]*served{}
	var order []svcKey // backends in inventory order, for a deterministic build
	for i := range inv.LBs {
		lb := &inv.LBs[i]
		x.services++
		gs := groupsOf[lb.Name]
		slices.Sort(gs)
		group := strings.Join(gs, ",")
		proto := lb.Protocol.IPProto()
		for _, v := range lb.VIPs {
			x.vipCount++
			list := make([]string, len(v.Backends))
			for j, b := range v.Backends {
				list[j] = formatEndpoint(b)
			}
			svc := &flow.Service{Name: lb.Name, Backends: strings.Join(list, ","), Group: group}
			k := endpointKey(proto, v.Frontend)
			ep := x.endpoints[k]
			ep.vip = svc
			x.endpoints[k] = ep
			if v.Frontend.Port() == 0 {
				x.portless = true
			}
			for _, b := range v.Backends {
				k := endpointKey(proto, b)
				s := byBackend[k]
				if s == nil {
					s = &served{backend: formatEndpoint(b)}
					byBackend[k] = s
					order = append(order, k)
					if b.Port() == 0 {
						x.portless = true
					}
				}
				if !slices.Contains(s.names, lb.Name) {
					s.names = append(s.names, lb.Name)
				}
				for _, g := range gs {
					if !slices.Contains(s.groups, g) {
						s.groups = append(s.groups, g)
					}
				}
			}
		}
	}
	for _, k := range order {
		s := byBackend[k]
		slices.Sort(s.names)
		slices.Sort(s.groups)
		ep := x.endpoints[k]
		ep.match = flow.ServiceMatchBackend
		if len(s.names) > 1 {
			ep.match = flow.ServiceMatchAmbiguous
		}
		ep.backend = &flow.Service{Name: strings.Join(s.names, ","), Backends: s.backend, Group: strings.Join(s.groups, ",")}
		x.endpoints[k] = ep
	}
}

// endpointKey is the lookup key of a frontend or backend of a protocol.
func endpointKey(p uint8, ap netip.AddrPort) svcKey {
	a := ap.Addr()
	return svcKey{addr: a.As16(), port: ap.Port(), proto: p, fam: addrFamily(a)}
}

// formatEndpoint writes a backend as in Service.Backends: addr:port,
// [v6]:port, or the bare address when the port is 0 (every port).
func formatEndpoint(ap netip.AddrPort) string {
	if ap.Port() == 0 {
		return ap.Addr().String()
	}
	return ap.String()
}

// Workload returns the workload owning address a (longest prefix match)
// of IP version v (4 or 6; IPv4 IPv4-mapped, as in flow.Key), or nil.
func (x *Index) Workload(a *[16]byte, v uint8) *flow.Workload {
	f := family(v)
	if w, ok := x.exact[f][*a]; ok {
		return w
	}
	r := &x.ranges[f]
	if len(r.starts) == 0 {
		return nil
	}
	return r.lookup(load128(a))
}

// endpoint finds (proto, a, port) among the VIPs and backends: exact is
// the entry of that port, wild the port-0 (every port) entry, looked up
// only when the index has any.
func (x *Index) endpoint(proto uint8, a *[16]byte, port uint16, v uint8) (exact, wild endpoint) {
	k := svcKey{addr: *a, port: port, proto: proto, fam: family(v)}
	exact = x.endpoints[k]
	if x.portless && port != 0 {
		k.port = 0
		wild = x.endpoints[k]
	}
	return exact, wild
}

// VIP returns the service whose VIP is (proto, a, port), or nil. A VIP
// with port 0 matches every port of its protocol.
func (x *Index) VIP(proto uint8, a *[16]byte, port uint16, v uint8) *flow.Service {
	exact, wild := x.endpoint(proto, a, port, v)
	if exact.vip != nil {
		return exact.vip
	}
	return wild.vip
}

// Enrich fills r's SrcWorkload, DstWorkload, Service and ServiceMatch
// (clearing what the inventory does not know):
//
//   - SrcWorkload and DstWorkload: the workloads owning Key.Src and Key.Dst.
//   - Key.Dst a service VIP: Service is its load balancer, ServiceMatchVIP;
//     if r is NATed (conntrack) ServiceMatchNAT, and when Key.Dst is no
//     workload, DstWorkload is the one owning PostNAT.Dst (the backend
//     the connection was sent to: the real peer).
//   - Otherwise Key.Dst a backend: ServiceMatchBackend, or
//     ServiceMatchAmbiguous when it serves several load balancers.
//
// It allocates nothing.
func (x *Index) Enrich(r *flow.Record) {
	k := &r.Key
	r.SrcWorkload = x.Workload(&k.SrcAddr, k.IPVersion)
	r.DstWorkload = x.Workload(&k.DstAddr, k.IPVersion)
	r.Service, r.ServiceMatch = nil, flow.ServiceMatchNone
	if len(x.endpoints) == 0 {
		return
	}
	exact, wild := x.endpoint(k.Proto, &k.DstAddr, k.DstPort, k.IPVersion)
	svc := exact.vip
	if svc == nil {
		svc = wild.vip
	}
	if svc != nil {
		r.Service, r.ServiceMatch = svc, flow.ServiceMatchVIP
		if r.NATed() {
			r.ServiceMatch = flow.ServiceMatchNAT
			if r.DstWorkload == nil {
				r.DstWorkload = x.Workload(&r.PostNAT.DstAddr, r.PostNAT.IPVersion)
			}
		}
		return
	}
	if exact.backend == nil {
		exact = wild
	}
	if exact.backend != nil {
		r.Service, r.ServiceMatch = exact.backend, exact.match
	}
}

// Workloads returns the number of workloads indexed.
func (x *Index) Workloads() int { return x.workloads }

// Services returns the number of load balancers indexed.
func (x *Index) Services() int { return x.services }

// VIPs returns the number of VIPs indexed.
func (x *Index) VIPs() int { return x.vipCount }

// Conflicts returns the number of workload addresses (or prefixes) listed
// by more than one workload: the first workload listing one keeps it.
func (x *Index) Conflicts() int { return x.conflicts }
