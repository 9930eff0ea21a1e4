package services

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Errors returned by the model's operations.
var (
	ErrNoName   = errors.New("services: name is empty")
	ErrNotFound = errors.New("services: no such object")
	ErrInvalid  = errors.New("services: invalid object")
)

// Config tunes a Model.
type Config struct {
	// NoGroups compiles without datapath groups, as OVN did before them:
	// every row is copied once per datapath it applies to. It exists to
	// measure the N×M blow-up groups avoid.
	NoGroups bool
}

// Model is the service model and its compiled rows. Every operation
// updates the rows incrementally and returns the ChangeSet it caused. A
// Model is not safe for concurrent use.
type Model struct {
	cfg Config

	nodes   map[string]*nodeState
	dpIndex [2]map[string]int
	dpNames [2][]string
	dpFree  [2][]int

	lbs       map[string]*lbState
	nbGroups  map[string]*Group
	lbGroups  map[string]map[string]struct{} // LB name → names of existing groups holding it
	lbAttach  map[string]*[2]bitset          // LB name → datapaths it is attached to directly
	grpAttach map[string]*[2]bitset          // group name → datapaths it is attached to

	classes   map[string]*class
	byGroup   map[string]map[*class]struct{} // group name → classes whose key holds it
	dpg       groups
	arp       arpIndex
	nextRowID uint64
	rows      int // compiled rows (LB and ARP)
	copies    int // NoGroups: rows × datapaths

	tr      *tracker
	depth   int
	pending map[**DPGroup]*regroupReq // holders whose datapaths changed in this operation
}

type nodeState struct {
	n        Node
	idx      [2]int
	groups   [2][]string // attached groups per kind, sorted, deduplicated
	lbs      [2][]string
	prefixes []prefixKey
}

// class is a placement class: the load balancers attached to the same
// datapaths for the same reason (the same groups, or one LB's own direct
// attachments). Rows point at their LB, the LB at its class, the class at
// its interned datapath groups, so attaching a group to one more node
// updates one class and one group, not every row.
type class struct {
	key    string
	groups []string // group names in the key
	lb     string   // set when the class is one LB's own (direct attachments)
	dp     [2]bitset
	g      [2]*DPGroup
	lbs    map[*lbState]struct{}
	arps   map[string]*arpClass
}

func (c *class) group(k Kind) *DPGroup { return c.g[k] }

type lbState struct {
	lb   LB
	cls  *class
	rows []*Row
	arp  []*arpClass // per VIP: the ARP class its address is in (nil: not reachable)
}

func (l *lbState) group(k Kind) *DPGroup { return l.cls.g[k] }

// New returns an empty model.
func New(cfg Config) *Model {
	m := &Model{
		cfg:       cfg,
		nodes:     make(map[string]*nodeState),
		lbs:       make(map[string]*lbState),
		nbGroups:  make(map[string]*Group),
		lbGroups:  make(map[string]map[string]struct{}),
		lbAttach:  make(map[string]*[2]bitset),
		grpAttach: make(map[string]*[2]bitset),
		classes:   make(map[string]*class),
		byGroup:   make(map[string]map[*class]struct{}),
	}
	m.dpIndex[Switch] = make(map[string]int)
	m.dpIndex[Router] = make(map[string]int)
	m.arp.init()
	return m
}

// Build compiles a model from scratch: the full recompute that incremental
// operations must always agree with.
func Build(cfg Config, nodes []Node, lbs []LB, groups []Group) (*Model, error) {
	m := New(cfg)
	m.begin() // one tracker for the whole build
	defer m.end()
	// Nodes first: their subnets are then in place before any VIP is
	// filed, so no VIP is re-filed as subnets appear, and the cost is
	// linear in nodes + load balancers.
	for i := range nodes {
		if _, err := m.UpsertNode(nodes[i]); err != nil {
			return nil, err
		}
	}
	for i := range groups {
		if _, err := m.UpsertGroup(groups[i]); err != nil {
			return nil, err
		}
	}
	for i := range lbs {
		if _, err := m.UpsertLB(lbs[i]); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// begin and end bracket an operation; they nest, so a Batch reports one
// ChangeSet for all the operations inside it.
func (m *Model) begin() {
	if m.depth == 0 {
		m.tr = newTracker()
		m.pending = make(map[**DPGroup]*regroupReq)
	}
	m.depth++
}

func (m *Model) end() ChangeSet {
	if m.depth--; m.depth > 0 {
		return ChangeSet{}
	}
	m.resolve()
	cs := m.tr.finish(m)
	m.tr, m.pending = nil, nil
	return cs
}

// Batch runs f, which calls the model's operations, and returns their
// combined ChangeSet: what a client that commits them in one transaction
// (as the OVN stress script adds a load balancer and puts it in the group)
// sees. The operations inside return empty ChangeSets.
func (m *Model) Batch(f func() error) (ChangeSet, error) {
	m.begin()
	err := f()
	return m.end(), err
}

// UpsertLB adds a load balancer or replaces the one with its name; only
// rows whose text changes are replaced.
func (m *Model) UpsertLB(lb LB) (ChangeSet, error) {
	if lb.Name == "" {
		return ChangeSet{}, ErrNoName
	}
	if err := validLB(&lb); err != nil {
		return ChangeSet{}, err
	}
	lb = cloneLB(lb)
	m.begin()
	if l := m.lbs[lb.Name]; l == nil {
		l = &lbState{lb: lb}
		m.lbs[lb.Name] = l
		m.reclass(l) // joins its class and the ARP sets of its VIPs
		m.compileLB(l)
	} else {
		m.leaveARP(l)
		l.lb = lb
		m.compileLB(l)
		m.joinARP(l)
	}
	return m.end(), nil
}

// RemoveLB removes a load balancer and its rows.
func (m *Model) RemoveLB(name string) (ChangeSet, error) {
	l := m.lbs[name]
	if l == nil {
		return ChangeSet{}, fmt.Errorf("%w: load balancer %q", ErrNotFound, name)
	}
	m.begin()
	m.leaveARP(l)
	for _, r := range l.rows {
		m.tr.rowRemoved(r)
		m.rows--
	}
	l.rows = nil
	m.setClass(l, nil)
	delete(m.lbs, name)
	return m.end(), nil
}

// compileLB regenerates l's rows and keeps those whose text is unchanged.
func (m *Model) compileLB(l *lbState) {
	var fresh []*Row
	for i := range l.lb.VIPs {
		fresh = vipRows(fresh, &l.lb, &l.lb.VIPs[i])
	}
	old := make(map[string]*Row, len(l.rows))
	for _, r := range l.rows {
		old[r.text()] = r
	}
	rows := fresh[:0]
	seen := make(map[string]bool, len(fresh))
	for _, r := range fresh {
		t := r.text()
		if seen[t] {
			continue // two VIPs that compile alike (same address and port listed twice)
		}
		seen[t] = true
		if o := old[t]; o != nil {
			delete(old, t)
			rows = append(rows, o)
			continue
		}
		m.nextRowID++
		r.ID = m.nextRowID
		r.holder = l
		m.rows++
		m.tr.rowAdded(r)
		rows = append(rows, r)
	}
	for _, r := range old {
		m.rows--
		m.tr.rowRemoved(r)
	}
	l.rows = slices.Clip(rows)
}

// UpsertGroup adds a load-balancer group or replaces its member list.
func (m *Model) UpsertGroup(g Group) (ChangeSet, error) {
	if g.Name == "" {
		return ChangeSet{}, ErrNoName
	}
	m.begin()
	g.LBs = dedup(g.LBs)
	var old []string
	fresh := m.nbGroups[g.Name] == nil
	if !fresh {
		old = m.nbGroups[g.Name].LBs
	}
	add, del := diff(old, g.LBs)
	if fresh {
		add = g.LBs
	}
	m.nbGroups[g.Name] = &g
	m.joinGroup(g.Name, add)
	m.leaveGroup(g.Name, del)
	return m.end(), nil
}

// AddToGroup puts load balancers into an existing group: the incremental
// form of UpsertGroup, costing the work of the members added.
func (m *Model) AddToGroup(group string, lbs ...string) (ChangeSet, error) {
	g := m.nbGroups[group]
	if g == nil {
		return ChangeSet{}, fmt.Errorf("%w: group %q", ErrNotFound, group)
	}
	m.begin()
	var add []string
	for _, n := range lbs {
		if _, in := m.lbGroups[n][group]; !in && !slices.Contains(add, n) {
			add = append(add, n)
		}
	}
	g.LBs = append(g.LBs, add...)
	sort.Strings(g.LBs)
	m.joinGroup(group, add)
	return m.end(), nil
}

// RemoveFromGroup takes load balancers out of a group.
func (m *Model) RemoveFromGroup(group string, lbs ...string) (ChangeSet, error) {
	g := m.nbGroups[group]
	if g == nil {
		return ChangeSet{}, fmt.Errorf("%w: group %q", ErrNotFound, group)
	}
	m.begin()
	var del []string
	for _, n := range lbs {
		if i, in := slices.BinarySearch(g.LBs, n); in {
			g.LBs = slices.Delete(g.LBs, i, i+1)
			del = append(del, n)
		}
	}
	m.leaveGroup(group, del)
	return m.end(), nil
}

func (m *Model) joinGroup(group string, lbs []string) {
	for _, n := range lbs {
		s := m.lbGroups[n]
		if s == nil {
			s = make(map[string]struct{})
			m.lbGroups[n] = s
		}
		s[group] = struct{}{}
	}
	m.reclassNames(lbs)
}

func (m *Model) leaveGroup(group string, lbs []string) {
	for _, n := range lbs {
		delete(m.lbGroups[n], group)
	}
	m.reclassNames(lbs)
}

// RemoveGroup removes a load-balancer group: its LBs leave the datapaths
// they reached only through it.
func (m *Model) RemoveGroup(name string) (ChangeSet, error) {
	old := m.nbGroups[name]
	if old == nil {
		return ChangeSet{}, fmt.Errorf("%w: group %q", ErrNotFound, name)
	}
	m.begin()
	delete(m.nbGroups, name)
	m.leaveGroup(name, old.LBs)
	return m.end(), nil
}

func (m *Model) reclassNames(names []string) {
	for _, n := range names {
		if l := m.lbs[n]; l != nil {
			m.reclass(l)
		}
	}
}

// classKey names l's placement: the existing groups holding it, and the LB
// itself when it is attached directly anywhere.
func (m *Model) classKey(name string) (key string, groups []string, own bool) {
	for g := range m.lbGroups[name] {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	if a := m.lbAttach[name]; a != nil && (a[Switch].count() > 0 || a[Router].count() > 0) {
		own = true
	}
	key = strings.Join(groups, "\x00")
	if own {
		key += "\x01" + name
	}
	return key, groups, own
}

// reclass moves l to the class its current placement calls for.
func (m *Model) reclass(l *lbState) {
	key, groups, own := m.classKey(l.lb.Name)
	c := m.classes[key]
	if c == nil {
		c = &class{key: key, groups: groups, lbs: make(map[*lbState]struct{}), arps: make(map[string]*arpClass)}
		if own {
			c.lb = l.lb.Name
		}
		m.classes[key] = c
		for _, g := range groups {
			s := m.byGroup[g]
			if s == nil {
				s = make(map[*class]struct{})
				m.byGroup[g] = s
			}
			s[c] = struct{}{}
		}
		m.placeClass(c)
	}
	if l.cls == c {
		return
	}
	m.leaveARP(l)
	m.setClass(l, c)
	for _, r := range l.rows {
		m.tr.rowRegrouped(r)
	}
	m.joinARP(l)
}

// setClass moves l from its class to c (nil: none), dropping a class left
// empty.
func (m *Model) setClass(l *lbState, c *class) {
	if o := l.cls; o != nil {
		delete(o.lbs, l)
		if len(o.lbs) == 0 {
			m.dropClass(o)
		}
	}
	l.cls = c
	if c != nil {
		c.lbs[l] = struct{}{}
	}
}

func (m *Model) dropClass(c *class) {
	delete(m.classes, c.key)
	for _, g := range c.groups {
		delete(m.byGroup[g], c)
		if len(m.byGroup[g]) == 0 {
			delete(m.byGroup, g)
		}
	}
	for k := range 2 {
		delete(m.pending, &c.g[k])
		m.release(c.g[k])
		c.g[k] = nil
	}
}

// placeClass recomputes c's datapaths from its groups' and LB's
// attachments and re-interns its datapath groups.
func (m *Model) placeClass(c *class) {
	for k := range 2 {
		var dp bitset
		for _, g := range c.groups {
			if a := m.grpAttach[g]; a != nil {
				dp.or(a[k])
			}
		}
		if c.lb != "" {
			if a := m.lbAttach[c.lb]; a != nil {
				dp.or(a[k])
			}
		}
		c.dp[k] = dp
		kind := Kind(k)
		m.regroupLater(&c.g[kind], kind, dp, func() {
			for l := range c.lbs {
				for _, r := range l.rows {
					if r.Kind == kind {
						m.tr.rowRegrouped(r)
					}
				}
			}
		})
	}
	for _, a := range c.arps {
		m.placeARP(a)
	}
}

// regroup points *cur at the interned group with these members. A group
// held by nobody else is changed in place (same ID: the rows do not
// change); it reports whether *cur now names a different group.
func (m *Model) regroup(cur **DPGroup, k Kind, members bitset) bool {
	h := members.hash()
	if g := *cur; g != nil && g.members.equal(members) {
		return false
	}
	if g := m.dpg.find(k, members, h); g != nil {
		g.refs++
		m.release(*cur)
		*cur = g
		return true
	}
	if g := *cur; g != nil && g.refs == 1 {
		m.dpg.unlink(g)
		g.members, g.hash = members.clone(), h
		m.dpg.link(g)
		m.tr.groupModified(g)
		return false
	}
	m.dpg.nextID++
	g := &DPGroup{ID: m.dpg.nextID, Kind: k, members: members.clone(), hash: h, refs: 1, m: m}
	m.dpg.link(g)
	m.dpg.n++
	m.tr.groupAdded(g)
	m.release(*cur)
	*cur = g
	return true
}

// regroupReq is a holder's new membership, resolved at the end of the
// operation so that every holder of a group moving alike is seen at once.
type regroupReq struct {
	k       Kind
	members bitset
	changed func() // the holder's rows now name another group
}

func (m *Model) regroupLater(cur **DPGroup, k Kind, members bitset, changed func()) {
	m.pending[cur] = &regroupReq{k: k, members: members, changed: changed}
}

// resolve applies the pending memberships. When all holders of a group
// move to the same new membership, and no group has it yet, the group is
// changed in place: its ID stays and no row changes (attaching a group to
// one more node changes one datapath group, not every row).
func (m *Model) resolve() {
	byOld := map[*DPGroup][]**DPGroup{}
	for cur, rq := range m.pending {
		if g := *cur; g != nil && g.members.equal(rq.members) {
			continue
		}
		byOld[*cur] = append(byOld[*cur], cur)
	}
	for g, curs := range byOld {
		if g != nil && len(curs) == g.refs {
			x := m.pending[curs[0]].members
			same := true
			for _, c := range curs[1:] {
				same = same && m.pending[c].members.equal(x)
			}
			if same && m.dpg.find(g.Kind, x, x.hash()) == nil {
				m.dpg.unlink(g)
				g.members, g.hash = x.clone(), x.hash()
				m.dpg.link(g)
				m.tr.groupModified(g)
				continue
			}
		}
		for _, c := range curs {
			rq := m.pending[c]
			if m.regroup(c, rq.k, rq.members) {
				rq.changed()
			}
		}
	}
	if m.cfg.NoGroups {
		for cur := range m.pending {
			if *cur != nil {
				m.tr.groupTouched(*cur)
			}
		}
	}
}

func (m *Model) release(g *DPGroup) {
	if g == nil {
		return
	}
	g.refs--
	if g.refs == 0 {
		m.dpg.unlink(g)
		m.dpg.n--
		m.tr.groupRemoved(g)
	}
}

func dedup(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return slices.Compact(s)
}
