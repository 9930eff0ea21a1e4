package services

import (
	"net/netip"
	"sort"
)

// ChangeSet is what one operation changed in the compiled output: rows
// added, removed or moved to another datapath group, datapath groups
// added, changed in place or removed, and address sets added, removed or
// changed. Applying it to a copy of the previous output yields the new
// one. The pointers are valid until the next operation.
type ChangeSet struct {
	RowsAdded     []*Row
	RowsRemoved   []*Row
	RowsRegrouped []*Row // same row, now applied to another group (Row.Group)

	GroupsAdded    []*DPGroup
	GroupsModified []*DPGroup // same ID, new members
	GroupsRemoved  []*DPGroup

	SetsAdded   []*AddrSet
	SetsRemoved []*AddrSet
	SetChanges  []SetChange

	// CopiesAdded and CopiesRemoved count per-datapath row copies
	// (Config.NoGroups only).
	CopiesAdded, CopiesRemoved int
}

// SetChange lists the addresses added to and removed from one address set.
type SetChange struct {
	Set     *AddrSet
	Added   []netip.Addr
	Removed []netip.Addr
}

// Empty reports whether nothing changed.
func (c *ChangeSet) Empty() bool {
	return len(c.RowsAdded)+len(c.RowsRemoved)+len(c.RowsRegrouped)+len(c.GroupsAdded)+
		len(c.GroupsModified)+len(c.GroupsRemoved)+len(c.SetsAdded)+len(c.SetsRemoved)+
		len(c.SetChanges)+c.CopiesAdded+c.CopiesRemoved == 0
}

// tracker collects one operation's net changes: an object added and then
// removed within the operation is not reported at all.
type tracker struct {
	rowsAdded, rowsRemoved, rowsRegrouped      map[*Row]struct{}
	groupsAdded, groupsModified, groupsRemoved map[*DPGroup]struct{}
	groupsTouched                              map[*DPGroup]struct{}
	setsAdded, setsRemoved                     map[*AddrSet]struct{}
	setAdds, setDels                           map[*AddrSet]map[netip.Addr]struct{}
}

func newTracker() *tracker {
	return &tracker{
		rowsAdded: map[*Row]struct{}{}, rowsRemoved: map[*Row]struct{}{}, rowsRegrouped: map[*Row]struct{}{},
		groupsAdded: map[*DPGroup]struct{}{}, groupsModified: map[*DPGroup]struct{}{}, groupsRemoved: map[*DPGroup]struct{}{},
		groupsTouched: map[*DPGroup]struct{}{},
		setsAdded:     map[*AddrSet]struct{}{}, setsRemoved: map[*AddrSet]struct{}{},
		setAdds: map[*AddrSet]map[netip.Addr]struct{}{}, setDels: map[*AddrSet]map[netip.Addr]struct{}{},
	}
}

func (t *tracker) rowAdded(r *Row) { t.rowsAdded[r] = struct{}{} }

func (t *tracker) rowRemoved(r *Row) {
	delete(t.rowsRegrouped, r)
	if _, ok := t.rowsAdded[r]; ok {
		delete(t.rowsAdded, r)
		return
	}
	t.rowsRemoved[r] = struct{}{}
}

func (t *tracker) rowRegrouped(r *Row) {
	if _, ok := t.rowsAdded[r]; !ok {
		t.rowsRegrouped[r] = struct{}{}
	}
}

func (t *tracker) groupAdded(g *DPGroup) { t.groupsAdded[g] = struct{}{} }

func (t *tracker) groupModified(g *DPGroup) {
	t.groupsTouched[g] = struct{}{}
	if _, ok := t.groupsAdded[g]; !ok {
		t.groupsModified[g] = struct{}{}
	}
}

func (t *tracker) groupTouched(g *DPGroup) { t.groupsTouched[g] = struct{}{} }

func (t *tracker) groupRemoved(g *DPGroup) {
	delete(t.groupsModified, g)
	if _, ok := t.groupsAdded[g]; ok {
		delete(t.groupsAdded, g)
		return
	}
	t.groupsRemoved[g] = struct{}{}
}

func (t *tracker) setAdded(s *AddrSet) { t.setsAdded[s] = struct{}{} }

func (t *tracker) setRemoved(s *AddrSet) {
	delete(t.setAdds, s)
	delete(t.setDels, s)
	if _, ok := t.setsAdded[s]; ok {
		delete(t.setsAdded, s)
		return
	}
	t.setsRemoved[s] = struct{}{}
}

// addrAdded and addrRemoved record a member change of a set that existed
// before the operation (a new set is reported whole).
func (t *tracker) addrAdded(s *AddrSet, a netip.Addr) {
	if _, ok := t.setsAdded[s]; ok {
		return
	}
	if d := t.setDels[s]; d != nil {
		if _, ok := d[a]; ok {
			delete(d, a)
			return
		}
	}
	mp := t.setAdds[s]
	if mp == nil {
		mp = map[netip.Addr]struct{}{}
		t.setAdds[s] = mp
	}
	mp[a] = struct{}{}
}

func (t *tracker) addrRemoved(s *AddrSet, a netip.Addr) {
	if _, ok := t.setsAdded[s]; ok {
		return
	}
	if d := t.setAdds[s]; d != nil {
		if _, ok := d[a]; ok {
			delete(d, a)
			return
		}
	}
	mp := t.setDels[s]
	if mp == nil {
		mp = map[netip.Addr]struct{}{}
		t.setDels[s] = mp
	}
	mp[a] = struct{}{}
}

func (t *tracker) finish(m *Model) ChangeSet {
	var cs ChangeSet
	cs.RowsAdded = rowList(t.rowsAdded)
	cs.RowsRemoved = rowList(t.rowsRemoved)
	cs.RowsRegrouped = rowList(t.rowsRegrouped)
	cs.GroupsAdded = groupList(t.groupsAdded)
	cs.GroupsModified = groupList(t.groupsModified)
	cs.GroupsRemoved = groupList(t.groupsRemoved)
	cs.SetsAdded = setList(t.setsAdded)
	cs.SetsRemoved = setList(t.setsRemoved)
	seen := map[*AddrSet]bool{}
	for _, mp := range []map[*AddrSet]map[netip.Addr]struct{}{t.setAdds, t.setDels} {
		for s := range mp {
			if seen[s] {
				continue
			}
			seen[s] = true
			c := SetChange{Set: s, Added: addrList(t.setAdds[s]), Removed: addrList(t.setDels[s])}
			if len(c.Added)+len(c.Removed) > 0 {
				cs.SetChanges = append(cs.SetChanges, c)
			}
		}
	}
	sort.Slice(cs.SetChanges, func(i, j int) bool { return cs.SetChanges[i].Set.Name < cs.SetChanges[j].Set.Name })
	if m.cfg.NoGroups {
		m.expand(t, &cs)
	}
	return cs
}

func rowList(mp map[*Row]struct{}) []*Row {
	out := make([]*Row, 0, len(mp))
	for r := range mp {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func groupList(mp map[*DPGroup]struct{}) []*DPGroup {
	out := make([]*DPGroup, 0, len(mp))
	for g := range mp {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func setList(mp map[*AddrSet]struct{}) []*AddrSet {
	out := make([]*AddrSet, 0, len(mp))
	for s := range mp {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func addrList(mp map[netip.Addr]struct{}) []netip.Addr {
	out := make([]netip.Addr, 0, len(mp))
	for a := range mp {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}
