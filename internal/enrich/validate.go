package enrich

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/weir-dev/weir/internal/enrich/services"
)

// Inventory sections, as InventoryError.Section names them (the inventory
// file's keys).
const (
	SectionWorkloads = "workloads"
	SectionLBs       = "load_balancers"
	SectionGroups    = "lb_groups"
	SectionNodes     = "nodes"
)

// MaxInventoryErrors bounds the problems Validate reports at once.
const MaxInventoryErrors = 20

// InventoryError is one problem in an Inventory: the entry it is in and
// what is wrong.
type InventoryError struct {
	Section string // SectionWorkloads, SectionLBs, SectionGroups or SectionNodes
	Index   int    // the entry's position in its section
	Name    string // the entry's name, "" if it has none
	Msg     string
}

// Error returns e.g. `load_balancers[3] "shop/web": vip 10.96.0.1:80: …`.
func (e *InventoryError) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("%s[%d]: %s", e.Section, e.Index, e.Msg)
	}
	return fmt.Sprintf("%s[%d] %q: %s", e.Section, e.Index, e.Name, e.Msg)
}

// validator collects InventoryErrors up to MaxInventoryErrors.
type validator struct {
	errs []error
	more int
}

func (v *validator) add(section string, i int, name, format string, a ...any) {
	if len(v.errs) >= MaxInventoryErrors {
		v.more++
		return
	}
	v.errs = append(v.errs, &InventoryError{Section: section, Index: i, Name: name, Msg: fmt.Sprintf(format, a...)})
}

func (v *validator) err() error {
	if v.more > 0 {
		v.errs = append(v.errs, fmt.Errorf("and %d more problems", v.more))
	}
	return errors.Join(v.errs...)
}

// Validate checks what the index and the service model rely on, and
// returns every problem found (InventoryErrors joined, at most
// MaxInventoryErrors), or nil:
//
//   - every workload, load balancer, group and node has a name, unique in
//     its section (workloads: unique per namespace);
//   - addresses are valid, IPv4 written as IPv4 (not ::ffff:a.b.c.d), and
//     prefixes have no host bits set;
//   - a load balancer's protocol is known, its VIPs are unique across all
//     load balancers (per protocol), and each VIP's backends are of the
//     VIP's address family, each listed once;
//   - groups and nodes name only load balancers and groups that exist.
//
// An address listed by two workloads is not an error: the first keeps it
// (Index.Conflicts counts them).
func (inv *Inventory) Validate() error {
	var v validator
	type wkey struct{ ns, name string }
	wseen := map[wkey]int{}
	for i := range inv.Workloads {
		w := &inv.Workloads[i]
		if w.Name == "" {
			v.add(SectionWorkloads, i, "", "no name")
		} else if j, dup := wseen[wkey{w.Namespace, w.Name}]; dup {
			v.add(SectionWorkloads, i, w.Name, "same namespace and name as workloads[%d]", j)
		} else {
			wseen[wkey{w.Namespace, w.Name}] = i
		}
		for _, p := range w.Addrs {
			if msg := checkPrefix(p); msg != "" {
				v.add(SectionWorkloads, i, w.Name, "%s", msg)
			}
		}
	}
	lbs := map[string]int{}
	vips := map[svcKey]string{}
	for i := range inv.LBs {
		lb := &inv.LBs[i]
		if lb.Name == "" {
			v.add(SectionLBs, i, "", "no name")
		} else if j, dup := lbs[lb.Name]; dup {
			v.add(SectionLBs, i, lb.Name, "same name as load_balancers[%d]", j)
		} else {
			lbs[lb.Name] = i
		}
		if lb.Protocol > services.ProtoSCTP {
			v.add(SectionLBs, i, lb.Name, "unknown protocol %s", lb.Protocol)
			continue
		}
		if ip := lb.Options.HairpinSNATIP; ip != "" {
			if _, err := netip.ParseAddr(ip); err != nil {
				v.add(SectionLBs, i, lb.Name, "hairpin_snat_ip %q is not an IP address", ip)
			}
		}
		for _, vip := range lb.VIPs {
			fe := vip.Frontend
			if msg := checkAddr(fe.Addr()); msg != "" {
				v.add(SectionLBs, i, lb.Name, "vip %s: %s", fe, msg)
				continue
			}
			k := endpointKey(lb.Protocol.IPProto(), fe)
			if other, dup := vips[k]; dup {
				v.add(SectionLBs, i, lb.Name, "vip %s/%s is also a VIP of %q", formatEndpoint(fe), lb.Protocol, other)
			} else {
				vips[k] = lb.Name
			}
			bseen := map[netip.AddrPort]bool{}
			for _, b := range vip.Backends {
				switch {
				case checkAddr(b.Addr()) != "":
					v.add(SectionLBs, i, lb.Name, "vip %s: backend %s: %s", formatEndpoint(fe), b, checkAddr(b.Addr()))
				case b.Addr().Is4() != fe.Addr().Is4():
					v.add(SectionLBs, i, lb.Name, "vip %s: backend %s is %s, the VIP %s",
						formatEndpoint(fe), formatEndpoint(b), familyName(b.Addr()), familyName(fe.Addr()))
				case bseen[b]:
					v.add(SectionLBs, i, lb.Name, "vip %s: backend %s listed twice", formatEndpoint(fe), formatEndpoint(b))
				}
				bseen[b] = true
			}
		}
	}
	groups := map[string]int{}
	for i := range inv.Groups {
		g := &inv.Groups[i]
		if g.Name == "" {
			v.add(SectionGroups, i, "", "no name")
		} else if j, dup := groups[g.Name]; dup {
			v.add(SectionGroups, i, g.Name, "same name as lb_groups[%d]", j)
		} else {
			groups[g.Name] = i
		}
		checkRefs(&v, SectionGroups, i, g.Name, "load_balancers", "load balancer", g.LBs, lbs)
	}
	nodes := map[string]int{}
	for i := range inv.Nodes {
		n := &inv.Nodes[i]
		if n.Name == "" {
			v.add(SectionNodes, i, "", "no name")
		} else if j, dup := nodes[n.Name]; dup {
			v.add(SectionNodes, i, n.Name, "same name as nodes[%d]", j)
		} else {
			nodes[n.Name] = i
		}
		for _, p := range n.Subnets {
			if !p.IsValid() || p.Addr().Is4In6() {
				v.add(SectionNodes, i, n.Name, "subnet %s is not a valid prefix", p)
			}
		}
		checkRefs(&v, SectionNodes, i, n.Name, "groups", "group", n.Groups, groups)
		checkRefs(&v, SectionNodes, i, n.Name, "switch_groups", "group", n.SwitchGroups, groups)
		checkRefs(&v, SectionNodes, i, n.Name, "router_groups", "group", n.RouterGroups, groups)
		checkRefs(&v, SectionNodes, i, n.Name, "load_balancers", "load balancer", n.LBs, lbs)
		checkRefs(&v, SectionNodes, i, n.Name, "switch_load_balancers", "load balancer", n.SwitchLBs, lbs)
		checkRefs(&v, SectionNodes, i, n.Name, "router_load_balancers", "load balancer", n.RouterLBs, lbs)
	}
	return v.err()
}

// checkRefs reports names in refs that known does not hold, or that refs
// lists twice.
func checkRefs(v *validator, section string, i int, name, field, what string, refs []string, known map[string]int) {
	seen := map[string]bool{}
	for _, r := range refs {
		if _, ok := known[r]; !ok {
			v.add(section, i, name, "%s: no %s named %q", field, what, r)
		} else if seen[r] {
			v.add(section, i, name, "%s: %q listed twice", field, r)
		}
		seen[r] = true
	}
}

// checkAddr says what is wrong with an inventory address, or "".
func checkAddr(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "not a valid address"
	case a.Is4In6():
		return fmt.Sprintf("write the IPv4 address %s as such, not IPv4-mapped", a.Unmap())
	case a.Zone() != "":
		return fmt.Sprintf("%s: addresses with a zone are not supported", a)
	}
	return ""
}

// checkPrefix says what is wrong with a workload prefix, or "".
func checkPrefix(p netip.Prefix) string {
	if !p.IsValid() {
		return fmt.Sprintf("address %s is not valid", p)
	}
	if msg := checkAddr(p.Addr()); msg != "" {
		return fmt.Sprintf("address %s: %s", p, msg)
	}
	if m := p.Masked(); m != p {
		return fmt.Sprintf("address %s has host bits set (the network is %s)", p, m)
	}
	return ""
}

func familyName(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}
