package services

import (
	"fmt"
	"net/netip"
	"slices"
)

// UpsertNode adds a node (its switch and router datapaths) or replaces
// its attachments and subnets. Only the classes of the groups and load
// balancers whose attachment changed are re-placed.
func (m *Model) UpsertNode(n Node) (ChangeSet, error) {
	if n.Name == "" {
		return ChangeSet{}, ErrNoName
	}
	var pfx []prefixKey
	for _, s := range n.Subnets {
		if !s.IsValid() {
			return ChangeSet{}, fmt.Errorf("%w: node %q: invalid subnet", ErrInvalid, n.Name)
		}
		pfx = append(pfx, s.Masked())
	}
	slices.SortFunc(pfx, func(a, b prefixKey) int { return a.Addr().Compare(b.Addr())*2 + cmpInt(a.Bits(), b.Bits()) })
	pfx = slices.Compact(pfx)
	n = cloneNode(n)
	ns := m.nodes[n.Name]
	for k, name := range [2]string{n.SwitchName(), n.RouterName()} {
		if i, dup := m.dpIndex[k][name]; dup && (ns == nil || ns.idx[k] != i) {
			return ChangeSet{}, fmt.Errorf("%w: node %q: datapath %q belongs to another node", ErrInvalid, n.Name, name)
		}
	}
	m.begin()
	if ns != nil && (ns.n.SwitchName() != n.SwitchName() || ns.n.RouterName() != n.RouterName()) {
		m.dropNode(ns)
		ns = nil
	}
	if ns == nil {
		ns = &nodeState{}
		for k, name := range [2]string{n.SwitchName(), n.RouterName()} {
			ns.idx[k] = m.allocDP(Kind(k), name)
		}
		m.nodes[n.Name] = ns
	}
	ns.n = n
	m.attach(ns,
		[2][]string{dedup(append(slices.Clone(n.Groups), n.SwitchGroups...)), dedup(append(slices.Clone(n.Groups), n.RouterGroups...))},
		[2][]string{dedup(append(slices.Clone(n.LBs), n.SwitchLBs...)), dedup(append(slices.Clone(n.LBs), n.RouterLBs...))},
		pfx)
	return m.end(), nil
}

// RemoveNode removes a node and its datapaths.
func (m *Model) RemoveNode(name string) (ChangeSet, error) {
	ns := m.nodes[name]
	if ns == nil {
		return ChangeSet{}, fmt.Errorf("%w: node %q", ErrNotFound, name)
	}
	m.begin()
	m.dropNode(ns)
	return m.end(), nil
}

func (m *Model) dropNode(ns *nodeState) {
	m.attach(ns, [2][]string{}, [2][]string{}, nil)
	for k := range 2 {
		m.freeDP(Kind(k), ns.idx[k])
	}
	delete(m.nodes, ns.n.Name)
}

func (m *Model) allocDP(k Kind, name string) int {
	var i int
	if f := m.dpFree[k]; len(f) > 0 {
		i = f[len(f)-1]
		m.dpFree[k] = f[:len(f)-1]
		m.dpNames[k][i] = name
	} else {
		i = len(m.dpNames[k])
		m.dpNames[k] = append(m.dpNames[k], name)
	}
	m.dpIndex[k][name] = i
	return i
}

func (m *Model) freeDP(k Kind, i int) {
	delete(m.dpIndex[k], m.dpNames[k][i])
	m.dpNames[k][i] = ""
	m.dpFree[k] = append(m.dpFree[k], i)
}

// attach moves ns's datapaths to the given groups, direct LBs and subnets,
// re-placing only what changed.
func (m *Model) attach(ns *nodeState, groups, lbs [2][]string, pfx []prefixKey) {
	dirtyGroups := map[string]struct{}{}
	dirtyLBs := map[string]struct{}{}
	for k := range 2 {
		i := ns.idx[k]
		add, del := diff(ns.groups[k], groups[k])
		for _, g := range add {
			a := m.grpAttach[g]
			if a == nil {
				a = new([2]bitset)
				m.grpAttach[g] = a
			}
			a[k].set(i)
			dirtyGroups[g] = struct{}{}
		}
		for _, g := range del {
			a := m.grpAttach[g]
			a[k].clear(i)
			if a[Switch].count()+a[Router].count() == 0 {
				delete(m.grpAttach, g)
			}
			dirtyGroups[g] = struct{}{}
		}
		ns.groups[k] = groups[k]
		add, del = diff(ns.lbs[k], lbs[k])
		for _, l := range add {
			a := m.lbAttach[l]
			if a == nil {
				a = new([2]bitset)
				m.lbAttach[l] = a
			}
			a[k].set(i)
			dirtyLBs[l] = struct{}{}
		}
		for _, l := range del {
			a := m.lbAttach[l]
			a[k].clear(i)
			if a[Switch].count()+a[Router].count() == 0 {
				delete(m.lbAttach, l)
			}
			dirtyLBs[l] = struct{}{}
		}
		ns.lbs[k] = lbs[k]
	}
	dirty := map[*class]struct{}{}
	for name := range dirtyLBs {
		if l := m.lbs[name]; l != nil {
			m.reclass(l)
			if l.cls.lb != "" {
				dirty[l.cls] = struct{}{}
			}
		}
	}
	for g := range dirtyGroups {
		for c := range m.byGroup[g] {
			dirty[c] = struct{}{}
		}
	}
	for c := range dirty {
		if _, live := m.classes[c.key]; live && m.classes[c.key] == c {
			m.placeClass(c)
		}
	}
	changed, appeared := m.arp.setRouter(ns.idx[Router], ns.prefixes, pfx)
	ns.prefixes = pfx
	m.subnetsChanged(changed, appeared)
}

// diff returns what is in b and not a, and in a and not b (both sorted).
func diff(a, b []string) (add, del []string) {
	for _, x := range b {
		if _, ok := slices.BinarySearch(a, x); !ok {
			add = append(add, x)
		}
	}
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); !ok {
			del = append(del, x)
		}
	}
	return add, del
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cloneNode(n Node) Node {
	n.Subnets = slices.Clone(n.Subnets)
	n.Groups = slices.Clone(n.Groups)
	n.SwitchGroups = slices.Clone(n.SwitchGroups)
	n.RouterGroups = slices.Clone(n.RouterGroups)
	n.LBs = slices.Clone(n.LBs)
	n.SwitchLBs = slices.Clone(n.SwitchLBs)
	n.RouterLBs = slices.Clone(n.RouterLBs)
	return n
}

func cloneLB(lb LB) LB {
	vips := make([]VIP, len(lb.VIPs))
	for i, v := range lb.VIPs {
		vips[i] = VIP{Frontend: v.Frontend, Backends: slices.Clone(v.Backends)}
	}
	lb.VIPs = vips
	return lb
}

// validLB checks a load balancer and unmaps IPv4-mapped IPv6 addresses so
// that IPv4 and IPv6 go through one path.
func validLB(lb *LB) error {
	if int(lb.Protocol) >= len(protoNames) {
		return fmt.Errorf("%w: load balancer %q: protocol %d", ErrInvalid, lb.Name, lb.Protocol)
	}
	for i := range lb.VIPs {
		v := &lb.VIPs[i]
		if !v.Frontend.Addr().IsValid() {
			return fmt.Errorf("%w: load balancer %q: VIP %d has no address", ErrInvalid, lb.Name, i)
		}
		v.Frontend = netip.AddrPortFrom(v.Frontend.Addr().Unmap(), v.Frontend.Port())
		for j, b := range v.Backends {
			if !b.Addr().IsValid() {
				return fmt.Errorf("%w: load balancer %q: VIP %s: backend %d has no address", ErrInvalid, lb.Name, v.Frontend, j)
			}
			b = netip.AddrPortFrom(b.Addr().Unmap(), b.Port())
			if b.Addr().Is4() != v.Frontend.Addr().Is4() {
				return fmt.Errorf("%w: load balancer %q: VIP %s and backend %s are of different families", ErrInvalid, lb.Name, v.Frontend, b)
			}
			if v.Frontend.Port() != 0 && b.Port() == 0 {
				return fmt.Errorf("%w: load balancer %q: VIP %s has a port, backend %s has none", ErrInvalid, lb.Name, v.Frontend, b)
			}
		}
	}
	return nil
}
