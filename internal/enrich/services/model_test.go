package services

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func mustBuild(t testing.TB, cfg Config, n, m int) *Model {
	t.Helper()
	var nodes []Node
	for i := range n {
		nodes = append(nodes, StressNode(i))
	}
	var lbs []LB
	for j := range m {
		lbs = append(lbs, StressLB(j))
	}
	md, err := Build(cfg, nodes, lbs, []Group{StressGroupOf(m)})
	if err != nil {
		t.Fatal(err)
	}
	return md
}

// One VIP with a port compiles to the documented OVN stages: switch
// pre-stateful and LB, router defrag, DNAT (new and established) and
// un-DNAT, plus the ARP responder over an address set.
func TestRowShapes(t *testing.T) {
	m := mustBuild(t, Config{}, 2, 1)
	got := m.Explain(netip.MustParseAddr("42.0.0.1"), 8080)
	want := []struct {
		stage          string
		prio           uint16
		match, actions string
	}{
		{StageSwitchPreStateful, 120, "reg0[2] == 1 && ip4.dst == 42.0.0.1 && tcp.dst == 8080", "reg1 = 42.0.0.1; reg2[0..15] = 8080; ct_lb_mark;"},
		{StageSwitchLB, 120, "ct.new && ip4.dst == 42.0.0.1 && tcp.dst == 8080", "reg0[1] = 0; ct_lb_mark(backends=42.0.0.2:8081);"},
		{StageRouterIPInput, 90, "arp.op == 1 && arp.tpa == $", "eth.dst = eth.src;"},
		{StageRouterDefrag, 110, "ip && ip4.dst == 42.0.0.1 && tcp", "reg0 = 42.0.0.1; reg9[16..31] = tcp.dst; ct_dnat;"},
		{StageRouterDNAT, 120, "ct.new && !ct.rel && ip4 && reg0 == 42.0.0.1 && tcp && reg9[16..31] == 8080", "ct_lb_mark(backends=42.0.0.2:8081);"},
		{StageRouterDNAT, 120, "ct.est && !ct.rel && ip4 && reg0 == 42.0.0.1 && tcp && reg9[16..31] == 8080 && ct_mark.natted == 1", "next;"},
		{StageRouterUnDNAT, 120, "ip4 && ((ip4.src == 42.0.0.2 && tcp.src == 8081))", "ct_dnat;"},
	}
	if len(got) != len(want) {
		for _, e := range got {
			t.Logf("%s %d %s / %s", e.Row.Stage, e.Row.Priority, e.Row.Match, e.Row.Actions)
		}
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for i, w := range want {
		r := got[i].Row
		if r.Stage != w.stage || r.Priority != w.prio || !strings.HasPrefix(r.Match, w.match) || !strings.HasPrefix(r.Actions, w.actions) {
			t.Errorf("row %d: %s %d %q %q, want %s %d %q %q", i, r.Stage, r.Priority, r.Match, r.Actions, w.stage, w.prio, w.match, w.actions)
		}
		wantDP := []string{"ls0", "ls1"}
		if r.Kind == Router {
			wantDP = []string{"lr0", "lr1"}
		}
		if !slices.Equal(got[i].Datapaths, wantDP) {
			t.Errorf("row %d (%s) on %v, want %v", i, r.Stage, got[i].Datapaths, wantDP)
		}
	}
	if s := got[2].Set; s == nil || !slices.Equal(s.Addrs(), []netip.Addr{netip.MustParseAddr("42.0.0.1")}) {
		t.Errorf("ARP set %v, want {42.0.0.1}", s)
	}
}

// With groups, rows and datapath groups stay constant per VIP as the
// number of nodes grows; without, rows copies grow as N×M.
func TestRowsPerVIPConstant(t *testing.T) {
	const lbs = 20
	var first Stats
	for _, n := range []int{1, 4, 16, 64} {
		s := mustBuild(t, Config{}, n, lbs).Stats()
		if n == 1 {
			first = s
		}
		if s.Rows != 6*lbs+1 || s.DPGroups != 2 || s.AddrSets != 1 {
			t.Errorf("N=%d: %d rows, %d groups, %d sets; want %d, 2, 1", n, s.Rows, s.DPGroups, s.AddrSets, 6*lbs+1)
		}
		if s.Rows != first.Rows {
			t.Errorf("N=%d: rows %d, N=1 had %d", n, s.Rows, first.Rows)
		}
		ng := mustBuild(t, Config{NoGroups: true}, n, lbs)
		if got, want := ng.Stats().RowCopies, ng.Applied(); got != want || want != (6*lbs+1)*n {
			t.Errorf("NoGroups N=%d: %d copies, applied %d, want %d", n, got, want, (6*lbs+1)*n)
		}
	}
}

// Attaching the group to one more node changes one datapath group in
// place (and the ARP group shares it): no row changes.
func TestAttachOneMoreNode(t *testing.T) {
	m := mustBuild(t, Config{}, 5, 50)
	cs, err := m.UpsertNode(StressNode(5))
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.RowsAdded)+len(cs.RowsRemoved)+len(cs.RowsRegrouped) != 0 {
		t.Errorf("rows changed: +%d -%d ~%d", len(cs.RowsAdded), len(cs.RowsRemoved), len(cs.RowsRegrouped))
	}
	if len(cs.GroupsModified) != 2 || len(cs.GroupsAdded)+len(cs.GroupsRemoved) != 0 {
		t.Errorf("groups +%d ~%d -%d, want ~2", len(cs.GroupsAdded), len(cs.GroupsModified), len(cs.GroupsRemoved))
	}
	for _, g := range cs.GroupsModified {
		if g.Len() != 6 {
			t.Errorf("group %d has %d datapaths, want 6", g.ID, g.Len())
		}
	}
	// One more LB, put in the group in the same transaction: its own six
	// rows and one address-set member, nothing else.
	cs, _ = m.Batch(func() error {
		if _, err := m.UpsertLB(StressLB(50)); err != nil {
			return err
		}
		_, err := m.UpsertGroup(StressGroupOf(51))
		return err
	})
	if len(cs.RowsAdded) != 6 || len(cs.RowsRegrouped)+len(cs.RowsRemoved) != 0 || len(cs.SetChanges) != 1 || len(cs.SetsAdded) != 0 ||
		len(cs.GroupsAdded)+len(cs.GroupsModified)+len(cs.GroupsRemoved) != 0 {
		t.Errorf("add LB: +%d ~%d -%d rows, %d set changes, +%d sets, +%d ~%d -%d groups", len(cs.RowsAdded), len(cs.RowsRegrouped), len(cs.RowsRemoved),
			len(cs.SetChanges), len(cs.SetsAdded), len(cs.GroupsAdded), len(cs.GroupsModified), len(cs.GroupsRemoved))
	}
	for _, r := range cs.RowsAdded {
		if r.Group().Len() != 6 {
			t.Errorf("new row applies to %d datapaths, want 6", r.Group().Len())
		}
	}
	// Alone, the LB first sits in a class of its own (no datapaths).
	cs, _ = m.UpsertLB(StressLB(51))
	if len(cs.RowsAdded) != 7 || len(cs.SetsAdded) != 1 {
		t.Errorf("LB outside the group: +%d rows, +%d sets; want 7 (with its ARP row), 1", len(cs.RowsAdded), len(cs.SetsAdded))
	}
	for _, r := range cs.RowsAdded {
		if r.Group().Len() != 0 {
			t.Errorf("LB outside the group applies to %d datapaths", r.Group().Len())
		}
	}
	cs, _ = m.UpsertGroup(StressGroupOf(52))
	if len(cs.RowsRegrouped) != 6 || len(cs.RowsAdded) != 0 || len(cs.SetChanges) != 1 || len(cs.SetsRemoved) != 1 {
		t.Errorf("group add: ~%d rows (want 6), +%d, %d set changes, -%d sets", len(cs.RowsRegrouped), len(cs.RowsAdded), len(cs.SetChanges), len(cs.SetsRemoved))
	}
}

// An option change replaces only the rows whose text changes.
func TestOptionChange(t *testing.T) {
	m := mustBuild(t, Config{}, 3, 3)
	lb := StressLB(1)
	lb.Options.ForceSNAT = true
	cs, err := m.UpsertLB(lb)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.RowsAdded) != 2 || len(cs.RowsRemoved) != 2 {
		t.Fatalf("force_snat: +%d -%d rows, want the two DNAT rows replaced", len(cs.RowsAdded), len(cs.RowsRemoved))
	}
	for _, r := range cs.RowsAdded {
		if r.Stage != StageRouterDNAT || !strings.HasPrefix(r.Actions, "flags.force_snat_for_lb = 1; ") {
			t.Errorf("added %s %q", r.Stage, r.Actions)
		}
	}
	lb.Options.AffinityTimeout = 60
	cs, _ = m.UpsertLB(lb)
	if len(cs.RowsAdded) != 4 || len(cs.RowsRemoved) != 0 {
		t.Errorf("affinity: +%d -%d rows, want 4 added (check and learn on each side)", len(cs.RowsAdded), len(cs.RowsRemoved))
	}
}

func TestInvalid(t *testing.T) {
	m := New(Config{})
	bad := []LB{
		{},
		{Name: "x", VIPs: []VIP{{}}},
		{Name: "x", VIPs: []VIP{{Frontend: netip.MustParseAddrPort("10.0.0.1:80"), Backends: []netip.AddrPort{netip.MustParseAddrPort("[fd00::1]:80")}}}},
		{Name: "x", Protocol: 9},
	}
	for i, lb := range bad {
		if _, err := m.UpsertLB(lb); err == nil {
			t.Errorf("LB %d accepted", i)
		}
	}
	if _, err := m.RemoveLB("nope"); err == nil {
		t.Error("removing a missing LB succeeded")
	}
	if _, err := m.UpsertNode(Node{Name: "a", Switch: "s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.UpsertNode(Node{Name: "b", Switch: "s"}); err == nil {
		t.Error("two nodes share switch s")
	}
	if s := m.Stats(); s.Nodes != 1 || s.LBs != 0 {
		t.Errorf("stats after rejects: %+v", s)
	}
}
