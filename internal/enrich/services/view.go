package services

import (
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strings"

	"github.com/weir-dev/weir/internal/termsafe"
)

// Stats counts the model and its compiled output.
type Stats struct {
	Nodes, LBs, VIPs, LBGroups int
	Rows                       int // compiled rows (each shared by a datapath group)
	DPGroups                   int // interned datapath groups
	AddrSets                   int // ARP/ND responder address sets
	Classes                    int // placement classes
	RowCopies                  int // Config.NoGroups: rows held per datapath (0 otherwise)
}

// Stats returns the model's counts.
func (m *Model) Stats() Stats {
	s := Stats{Nodes: len(m.nodes), LBs: len(m.lbs), LBGroups: len(m.nbGroups), Rows: m.rows,
		DPGroups: m.dpg.n, AddrSets: m.arp.sets, Classes: len(m.classes), RowCopies: m.copies}
	for _, l := range m.lbs {
		s.VIPs += len(l.lb.VIPs)
	}
	return s
}

// Applied returns the number of (row, datapath) pairs the rows stand for:
// what the datapaths see, the same with groups or without.
func (m *Model) Applied() int {
	n := 0
	m.eachRow(func(r *Row) { n += r.Group().Len() })
	return n
}

// eachRow visits every compiled row: each LB's, then each ARP class's.
func (m *Model) eachRow(f func(*Row)) {
	for _, l := range m.lbs {
		for _, r := range l.rows {
			f(r)
		}
	}
	for _, c := range m.classes {
		for _, a := range c.arps {
			f(a.row)
		}
	}
}

// Rows returns every compiled row, ordered by ID.
func (m *Model) Rows() []*Row {
	var out []*Row
	m.eachRow(func(r *Row) { out = append(out, r) })
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Sets returns every ARP/ND address set, ordered by name.
func (m *Model) Sets() []*AddrSet {
	var out []*AddrSet
	for _, c := range m.classes {
		for _, a := range c.arps {
			out = append(out, a.set)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Canonical returns the compiled output as sorted lines that do not depend
// on IDs or set names: each row's text, an address set's members in place
// of its name, and the datapaths it applies to. Two models with equal
// Canonical output compile to the same thing.
func (m *Model) Canonical() []string {
	sets := map[string]string{}
	for _, s := range m.Sets() {
		var b []string
		for _, a := range s.Addrs() {
			b = append(b, a.String())
		}
		sets["$"+s.Name] = "{" + strings.Join(b, ",") + "}"
	}
	var out []string
	m.eachRow(func(r *Row) {
		match := r.Match
		if i := strings.Index(match, "$"); i >= 0 && r.LB == "" {
			match = match[:i] + sets[match[i:]]
		}
		dps := r.Group().Datapaths()
		sort.Strings(dps)
		out = append(out, fmt.Sprintf("%s %s %d %q %q lb=%q @ %s", r.Kind, r.Stage, r.Priority, match, r.Actions, r.LB, strings.Join(dps, ",")))
	})
	sort.Strings(out)
	return out
}

// Explained is one row that serves a VIP, with where it applies.
type Explained struct {
	Row       *Row
	Datapaths []string
	Set       *AddrSet // for ARP/ND responder rows: the set holding the VIP
}

// Explain returns the rows that serve the VIP addr (and port, unless 0),
// in pipeline order, with the datapaths each applies to.
func (m *Model) Explain(addr netip.Addr, port uint16) []Explained {
	addr = addr.Unmap()
	var out []Explained
	seen := map[*Row]bool{}
	for _, l := range m.lbs {
		for i, v := range l.lb.VIPs {
			if v.Frontend.Addr() != addr || (port != 0 && v.Frontend.Port() != port) {
				continue
			}
			for _, r := range vipRows(nil, &l.lb, &l.lb.VIPs[i]) {
				for _, have := range l.rows {
					if have.text() == r.text() && !seen[have] {
						seen[have] = true
						out = append(out, Explained{Row: have, Datapaths: have.Group().Datapaths()})
					}
				}
			}
			if i < len(l.arp) && l.arp[i] != nil && !seen[l.arp[i].row] {
				ac := l.arp[i]
				seen[ac.row] = true
				out = append(out, Explained{Row: ac.row, Datapaths: ac.g.Datapaths(), Set: ac.set})
			}
		}
	}
	order := map[string]int{}
	for i, s := range []string{StageSwitchPreStateful, StageSwitchAffCheck, StageSwitchLB, StageSwitchAffLearn,
		StageRouterIPInput, StageRouterDefrag, StageRouterAffCheck, StageRouterDNAT, StageRouterAffLearn, StageRouterUnDNAT} {
		order[s] = i
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Row, out[j].Row
		if order[a.Stage] != order[b.Stage] {
			return order[a.Stage] < order[b.Stage]
		}
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		return a.ID < b.ID
	})
	return out
}

// WriteExplain prints Explain's rows as a table of stage, priority, match,
// actions and datapaths (names listed up to max, then a count). Strings
// that came from the inventory are escaped for the terminal (termsafe).
func WriteExplain(w io.Writer, rows []Explained, max int) error {
	for _, e := range rows {
		dps := e.Datapaths
		more := ""
		if max > 0 && len(dps) > max {
			more = fmt.Sprintf(" … (%d datapaths)", len(dps))
			dps = dps[:max]
		}
		// Matches, actions and names hold inventory strings: escaped.
		fmt.Fprintf(w, "%-20s %4d  match:   %s\n", e.Row.Stage, e.Row.Priority, termsafe.String(e.Row.Match))
		fmt.Fprintf(w, "%-20s %4s  actions: %s\n", "", "", termsafe.String(e.Row.Actions))
		if e.Set != nil {
			var as []string
			for _, a := range e.Set.Addrs() {
				as = append(as, a.String())
			}
			if len(as) > 8 {
				as = append(as[:8], fmt.Sprintf("… (%d addresses)", e.Set.Len()))
			}
			fmt.Fprintf(w, "%-20s %4s  set:     $%s = {%s}\n", "", "", termsafe.String(e.Set.Name), strings.Join(as, ", "))
		}
		if _, err := fmt.Fprintf(w, "%-20s %4s  group %d (%s, %d): %s%s\n\n", "", "", e.Row.Group().ID, e.Row.Kind, e.Row.Group().Len(), termsafe.String(strings.Join(dps, " ")), more); err != nil {
			return err
		}
	}
	return nil
}
