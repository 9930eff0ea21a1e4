package services

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"
)

// inputs is the test's own copy of what the model was told.
type inputs struct {
	nodes  map[string]Node
	lbs    map[string]LB
	groups map[string]Group
}

func (in *inputs) build(t *testing.T, cfg Config) *Model {
	t.Helper()
	var ns []Node
	var ls []LB
	var gs []Group
	for _, n := range in.nodes {
		ns = append(ns, n)
	}
	for _, l := range in.lbs {
		ls = append(ls, l)
	}
	for _, g := range in.groups {
		gs = append(gs, g)
	}
	m, err := Build(cfg, ns, ls, gs)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// mirror is a consumer that knows the compiled output only through
// ChangeSets, as a southbound database would.
type mirror struct {
	rows   map[uint64]*Row // the row as first seen; its group ID below
	rowG   map[uint64]uint32
	groups map[uint32][]string
	sets   map[string][]netip.Addr
}

func newMirror() *mirror {
	return &mirror{rows: map[uint64]*Row{}, rowG: map[uint64]uint32{}, groups: map[uint32][]string{}, sets: map[string][]netip.Addr{}}
}

func (mr *mirror) apply(t *testing.T, cs *ChangeSet) {
	t.Helper()
	for _, g := range cs.GroupsRemoved {
		if _, ok := mr.groups[g.ID]; !ok {
			t.Fatalf("removed group %d was never added", g.ID)
		}
		delete(mr.groups, g.ID)
	}
	for _, g := range cs.GroupsAdded {
		if _, ok := mr.groups[g.ID]; ok {
			t.Fatalf("group %d added twice", g.ID)
		}
		mr.groups[g.ID] = g.Datapaths()
	}
	for _, g := range cs.GroupsModified {
		if _, ok := mr.groups[g.ID]; !ok {
			t.Fatalf("modified group %d is unknown", g.ID)
		}
		mr.groups[g.ID] = g.Datapaths()
	}
	for _, r := range cs.RowsRemoved {
		if _, ok := mr.rows[r.ID]; !ok {
			t.Fatalf("removed row %d unknown", r.ID)
		}
		delete(mr.rows, r.ID)
	}
	for _, r := range cs.RowsAdded {
		if _, ok := mr.rows[r.ID]; ok {
			t.Fatalf("row %d added twice", r.ID)
		}
		mr.rows[r.ID] = r
		mr.rowG[r.ID] = r.Group().ID
	}
	for _, r := range cs.RowsRegrouped {
		if _, ok := mr.rows[r.ID]; !ok {
			t.Fatalf("regrouped row %d unknown", r.ID)
		}
		mr.rowG[r.ID] = r.Group().ID
	}
	for _, s := range cs.SetsRemoved {
		delete(mr.sets, s.Name)
	}
	for _, s := range cs.SetsAdded {
		mr.sets[s.Name] = s.Addrs()
	}
	for _, c := range cs.SetChanges {
		cur := mr.sets[c.Set.Name]
		for _, a := range c.Removed {
			i := slices.Index(cur, a)
			if i < 0 {
				t.Fatalf("set %s: removed %s it did not hold", c.Set.Name, a)
			}
			cur = slices.Delete(cur, i, i+1)
		}
		cur = append(cur, c.Added...)
		mr.sets[c.Set.Name] = cur
	}
}

func (mr *mirror) canonical() []string {
	var out []string
	for id, r := range mr.rows {
		match := r.Match
		if i := strings.Index(match, "$"); i >= 0 && r.LB == "" {
			as := slices.Clone(mr.sets[match[i+1:]])
			sort.Slice(as, func(a, b int) bool { return as[a].Less(as[b]) })
			var b []string
			for _, a := range as {
				b = append(b, a.String())
			}
			match = match[:i] + "{" + strings.Join(b, ",") + "}"
		}
		dps := slices.Clone(mr.groups[mr.rowG[id]])
		sort.Strings(dps)
		out = append(out, fmt.Sprintf("%s %s %d %q %q lb=%q @ %s", r.Kind, r.Stage, r.Priority, match, r.Actions, r.LB, strings.Join(dps, ",")))
	}
	sort.Strings(out)
	return out
}

var (
	propAddrs = []string{"10.0.0.1", "10.0.0.2", "10.1.2.3", "42.0.0.1", "192.168.1.1", "fd00::1", "fd00:1::5", "2001:db8::1"}
	propNets  = []string{"10.0.0.1/8", "10.1.0.1/16", "42.0.0.1/8", "192.168.1.1/24", "fd00::1/16", "fd00:1::1/32", "2001:db8::1/64"}
)

func randLB(r *rand.Rand, name string) LB {
	lb := LB{Name: name, Protocol: Protocol(r.IntN(3))}
	for range r.IntN(3) {
		a := netip.MustParseAddr(propAddrs[r.IntN(len(propAddrs))])
		port := []uint16{0, 80, 443}[r.IntN(3)]
		v := VIP{Frontend: netip.AddrPortFrom(a, port)}
		for range r.IntN(3) {
			b := a.Next().Next()
			if r.IntN(2) == 0 {
				b = b.Next()
			}
			bp := uint16(8080 + r.IntN(2))
			if port == 0 {
				bp = 0
			}
			v.Backends = append(v.Backends, netip.AddrPortFrom(b, bp))
		}
		lb.VIPs = append(lb.VIPs, v)
	}
	lb.Options = Options{SkipSNAT: r.IntN(4) == 0, ForceSNAT: r.IntN(4) == 0, Reject: r.IntN(2) == 0}
	if r.IntN(4) == 0 {
		lb.Options.AffinityTimeout = 30
	}
	return lb
}

func pick(r *rand.Rand, prefix string, n, max int) []string {
	var out []string
	for range r.IntN(max + 1) {
		out = append(out, fmt.Sprintf("%s%d", prefix, r.IntN(n)))
	}
	return out
}

func randNode(r *rand.Rand, name string) Node {
	n := Node{Name: name, Groups: pick(r, "g", 4, 2), SwitchGroups: pick(r, "g", 4, 1), RouterGroups: pick(r, "g", 4, 1),
		LBs: pick(r, "lb", 8, 1), SwitchLBs: pick(r, "lb", 8, 1), RouterLBs: pick(r, "lb", 8, 1)}
	for range r.IntN(3) {
		n.Subnets = append(n.Subnets, netip.MustParsePrefix(propNets[r.IntN(len(propNets))]))
	}
	return n
}

// TestIncrementalEqualsRecompute runs random sequences of adds, removes,
// option changes and attachments; after every step the incremental model
// must equal a full recompute from the same inputs, and a mirror fed only
// the ChangeSets must equal the model.
func TestIncrementalEqualsRecompute(t *testing.T) {
	steps := 400
	if testing.Short() {
		steps = 100
	}
	for _, cfg := range []Config{{}, {NoGroups: true}} {
		for seed := range uint64(8) {
			t.Run(fmt.Sprintf("nogroups=%v/seed=%d", cfg.NoGroups, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 99))
				m := New(cfg)
				in := &inputs{nodes: map[string]Node{}, lbs: map[string]LB{}, groups: map[string]Group{}}
				mr := newMirror()
				for step := range steps {
					var cs ChangeSet
					var err error
					var what string
					switch op := r.IntN(10); {
					case op < 3:
						lb := randLB(r, fmt.Sprintf("lb%d", r.IntN(8)))
						what = "upsert " + lb.Name
						cs, err = m.UpsertLB(lb)
						in.lbs[lb.Name] = lb
					case op == 3:
						name := fmt.Sprintf("lb%d", r.IntN(8))
						what = "remove " + name
						cs, err = m.RemoveLB(name)
						if _, ok := in.lbs[name]; !ok {
							err = nil // expected ErrNotFound
						}
						delete(in.lbs, name)
					case op < 6 && r.IntN(2) == 0:
						name, lbs := fmt.Sprintf("g%d", r.IntN(4)), pick(r, "lb", 8, 2)
						g, ok := in.groups[name]
						if r.IntN(2) == 0 {
							what = "add to " + name
							cs, err = m.AddToGroup(name, lbs...)
							g.LBs = append(slices.Clone(g.LBs), lbs...)
						} else {
							what = "remove from " + name
							cs, err = m.RemoveFromGroup(name, lbs...)
							g.LBs = slices.DeleteFunc(slices.Clone(g.LBs), func(s string) bool { return slices.Contains(lbs, s) })
						}
						if !ok {
							err = nil // expected ErrNotFound
						} else {
							in.groups[name] = g
						}
					case op < 6:
						g := Group{Name: fmt.Sprintf("g%d", r.IntN(4)), LBs: pick(r, "lb", 8, 5)}
						what = "group " + g.Name
						cs, err = m.UpsertGroup(g)
						in.groups[g.Name] = g
					case op == 6:
						name := fmt.Sprintf("g%d", r.IntN(4))
						what = "remove " + name
						cs, err = m.RemoveGroup(name)
						if _, ok := in.groups[name]; !ok {
							err = nil
						}
						delete(in.groups, name)
					case op < 9:
						n := randNode(r, fmt.Sprintf("n%d", r.IntN(6)))
						what = "node " + n.Name
						cs, err = m.UpsertNode(n)
						in.nodes[n.Name] = n
					default:
						name := fmt.Sprintf("n%d", r.IntN(6))
						what = "remove " + name
						cs, err = m.RemoveNode(name)
						if _, ok := in.nodes[name]; !ok {
							err = nil
						}
						delete(in.nodes, name)
					}
					if err != nil {
						t.Fatalf("step %d %s: %v", step, what, err)
					}
					mr.apply(t, &cs)
					got, want := m.Canonical(), in.build(t, cfg).Canonical()
					if !slices.Equal(got, want) {
						t.Fatalf("step %d (%s): incremental differs from recompute:\n%s", step, what, lineDiff(got, want))
					}
					if mc := mr.canonical(); !slices.Equal(mc, got) {
						t.Fatalf("step %d (%s): change sets do not add up to the model:\n%s", step, what, lineDiff(mc, got))
					}
					checkGroups(t, m)
					if cfg.NoGroups {
						if c, a := m.Stats().RowCopies, m.Applied(); c != a {
							t.Fatalf("step %d (%s): %d row copies, %d applied", step, what, c, a)
						}
					}
				}
			})
		}
	}
}

// checkGroups: every interned group is held, reference counts are exact,
// and no two groups of a kind share a membership.
func checkGroups(t *testing.T, m *Model) {
	t.Helper()
	held := map[*DPGroup]int{}
	for _, c := range m.classes {
		held[c.g[Switch]]++
		held[c.g[Router]]++
		for _, a := range c.arps {
			held[a.g]++
		}
	}
	n := 0
	for _, l := range m.dpg.byHash {
		for _, g := range l {
			n++
			if held[g] != g.refs {
				t.Fatalf("group %d: refs %d, held %d times", g.ID, g.refs, held[g])
			}
			for _, o := range l {
				if o != g && o.Kind == g.Kind && o.members.equal(g.members) {
					t.Fatalf("groups %d and %d have the same members", g.ID, o.ID)
				}
			}
		}
	}
	if n != len(held) || n != m.dpg.n {
		t.Fatalf("%d interned groups, %d held, count %d", n, len(held), m.dpg.n)
	}
}

func lineDiff(a, b []string) string {
	var sb strings.Builder
	for _, x := range a {
		if !slices.Contains(b, x) {
			sb.WriteString("- " + x + "\n")
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			sb.WriteString("+ " + x + "\n")
		}
	}
	return sb.String()
}
