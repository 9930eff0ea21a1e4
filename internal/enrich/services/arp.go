package services

import (
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// prefixKey is a router subnet with its host bits cleared.
type prefixKey = netip.Prefix

// AddrSet is an address set of VIPs that ARP/ND responder rows answer
// for. VIPs share a set when the same routers can reach them: those that
// have the VIPs' load balancers and a port subnet holding them.
type AddrSet struct {
	Name    string
	members map[netip.Addr]int // reference count: one address may be several VIPs
}

// Addrs returns the set's addresses in order.
func (s *AddrSet) Addrs() []netip.Addr {
	out := make([]netip.Addr, 0, len(s.members))
	for a := range s.members {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}

// Len returns the number of addresses in the set.
func (s *AddrSet) Len() int { return len(s.members) }

// arpClass is the VIPs of one placement class that match the same router
// subnets: one address set, one responder row, one router group.
type arpClass struct {
	key      string
	cls      *class
	prefixes []prefixKey
	v6       bool
	g        *DPGroup
	set      *AddrSet
	row      *Row
}

func (a *arpClass) group(Kind) *DPGroup { return a.g }

// arpIndex maps router subnets to the routers that have them; a VIP's
// matching subnets are found with one map probe per distinct prefix
// length, so the cost does not grow with the number of routers.
type arpIndex struct {
	routers  map[prefixKey]bitset
	lens     [2]map[int]int // family → prefix length → distinct prefixes of that length
	sorted   [2][]int
	byPrefix map[prefixKey]map[*arpClass]struct{}
	nextSet  int
	sets     int
}

func (x *arpIndex) init() {
	x.routers = make(map[prefixKey]bitset)
	x.lens = [2]map[int]int{{}, {}}
	x.byPrefix = make(map[prefixKey]map[*arpClass]struct{})
}

func fam(a netip.Addr) int {
	if a.Is4() {
		return 0
	}
	return 1
}

// match returns the distinct subnets holding a, shortest first.
func (x *arpIndex) match(a netip.Addr) []prefixKey {
	var out []prefixKey
	for _, l := range x.sorted[fam(a)] {
		p, _ := a.Prefix(l)
		if _, ok := x.routers[p]; ok {
			out = append(out, p)
		}
	}
	return out
}

// setRouter replaces router rt's subnets and returns the subnets whose
// router set changed, and those that appeared or disappeared.
func (x *arpIndex) setRouter(rt int, old, new []prefixKey) (changed, appeared []prefixKey) {
	in := func(s []prefixKey, p prefixKey) bool {
		for _, q := range s {
			if q == p {
				return true
			}
		}
		return false
	}
	for _, p := range old {
		if in(new, p) {
			continue
		}
		changed = append(changed, p)
		b := x.routers[p]
		b.clear(rt)
		if b.count() == 0 {
			delete(x.routers, p)
			f := fam(p.Addr())
			if x.lens[f][p.Bits()]--; x.lens[f][p.Bits()] == 0 {
				delete(x.lens[f], p.Bits())
			}
			appeared = append(appeared, p)
		}
	}
	for _, p := range new {
		if in(old, p) {
			continue
		}
		changed = append(changed, p)
		b, ok := x.routers[p]
		if !ok {
			x.lens[fam(p.Addr())][p.Bits()]++
			appeared = append(appeared, p)
		}
		b.set(rt)
		x.routers[p] = b
	}
	for f := range 2 {
		x.sorted[f] = x.sorted[f][:0]
		for l := range x.lens[f] {
			x.sorted[f] = append(x.sorted[f], l)
		}
		sort.Ints(x.sorted[f])
	}
	return changed, appeared
}

// joinARP puts each VIP of l into the address set of its class and
// matching subnets.
func (m *Model) joinARP(l *lbState) {
	l.arp = make([]*arpClass, len(l.lb.VIPs))
	for i := range l.lb.VIPs {
		a := l.lb.VIPs[i].Frontend.Addr()
		ps := m.arp.match(a)
		if len(ps) == 0 {
			continue // no router subnet holds it: no responder answers
		}
		var kb strings.Builder
		kb.WriteString(strconv.Itoa(fam(a)))
		for _, p := range ps {
			kb.WriteByte(' ')
			kb.WriteString(p.String())
		}
		key := kb.String()
		ac := l.cls.arps[key]
		if ac == nil {
			ac = m.newARP(l.cls, key, ps, a.Is6())
		}
		l.arp[i] = ac
		if ac.set.members[a]++; ac.set.members[a] == 1 {
			m.tr.addrAdded(ac.set, a)
		}
	}
}

func (m *Model) newARP(c *class, key string, ps []prefixKey, v6 bool) *arpClass {
	m.arp.nextSet++
	m.arp.sets++
	name := "lb_vips_v4_" + strconv.Itoa(m.arp.nextSet)
	if v6 {
		name = "lb_vips_v6_" + strconv.Itoa(m.arp.nextSet)
	}
	ac := &arpClass{key: key, cls: c, prefixes: ps, v6: v6, set: &AddrSet{Name: name, members: map[netip.Addr]int{}}}
	ac.row = arpRow(name, v6)
	m.nextRowID++
	ac.row.ID = m.nextRowID
	ac.row.holder = ac
	m.rows++
	c.arps[key] = ac
	for _, p := range ps {
		s := m.arp.byPrefix[p]
		if s == nil {
			s = make(map[*arpClass]struct{})
			m.arp.byPrefix[p] = s
		}
		s[ac] = struct{}{}
	}
	m.tr.setAdded(ac.set)
	m.tr.rowAdded(ac.row)
	m.placeARP(ac)
	return ac
}

// leaveARP takes l's VIPs out of their address sets, dropping sets left
// empty with their rows.
func (m *Model) leaveARP(l *lbState) {
	for i, ac := range l.arp {
		if ac == nil {
			continue
		}
		a := l.lb.VIPs[i].Frontend.Addr()
		if ac.set.members[a]--; ac.set.members[a] > 0 {
			continue
		}
		delete(ac.set.members, a)
		m.tr.addrRemoved(ac.set, a)
		if len(ac.set.members) > 0 {
			continue
		}
		delete(ac.cls.arps, ac.key)
		for _, p := range ac.prefixes {
			delete(m.arp.byPrefix[p], ac)
			if len(m.arp.byPrefix[p]) == 0 {
				delete(m.arp.byPrefix, p)
			}
		}
		m.arp.sets--
		m.rows--
		m.tr.setRemoved(ac.set)
		m.tr.rowRemoved(ac.row)
		delete(m.pending, &ac.g)
		m.release(ac.g)
		ac.g = nil
	}
	l.arp = nil
}

// placeARP recomputes the routers that answer for ac's VIPs: those of its
// class that have one of its subnets.
func (m *Model) placeARP(ac *arpClass) {
	var reach bitset
	for _, p := range ac.prefixes {
		reach.or(m.arp.routers[p])
	}
	reach = reach.and(ac.cls.dp[Router])
	m.regroupLater(&ac.g, Router, reach, func() { m.tr.rowRegrouped(ac.row) })
}

// subnetsChanged re-files the VIPs inside subnets that appeared or
// disappeared and re-places the ARP classes of subnets whose routers
// changed.
func (m *Model) subnetsChanged(changed, appeared []prefixKey) {
	if len(appeared) > 0 {
		for _, l := range m.lbs {
			for i := range l.lb.VIPs {
				a := l.lb.VIPs[i].Frontend.Addr()
				hit := false
				for _, p := range appeared {
					if p.Contains(a) {
						hit = true
						break
					}
				}
				if hit {
					m.leaveARP(l)
					m.joinARP(l)
					break
				}
			}
		}
	}
	for _, p := range changed {
		for ac := range m.arp.byPrefix[p] {
			m.placeARP(ac)
		}
	}
}
