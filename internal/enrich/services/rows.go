package services

import (
	"net/netip"
	"strconv"
	"strings"
)

// Row is one compiled logical row: a match and actions at a priority in a
// pipeline stage, applied to the datapaths of its group. Rows are modelled
// on the logical flows ovn-northd generates for load balancers (stage
// names, registers and actions as OVN writes them); they are not
// byte-identical to any OVN release.
type Row struct {
	ID       uint64
	Kind     Kind
	Stage    string
	Priority uint16
	Match    string
	Actions  string
	// LB names the load balancer the row comes from; "" for ARP/ND
	// responder rows, which serve an address set.
	LB string

	holder interface{ group(Kind) *DPGroup }
	copies []*Row // Config.NoGroups: one copy per datapath
	dp     int    // a copy's datapath index
}

// Group returns the datapath group the row applies to.
func (r *Row) Group() *DPGroup { return r.holder.group(r.Kind) }

// text is the row's identity within one load balancer.
func (r *Row) text() string {
	return r.Kind.String() + "\x00" + r.Stage + "\x00" + strconv.Itoa(int(r.Priority)) + "\x00" + r.Match + "\x00" + r.Actions
}

// Stage names, in pipeline order.
const (
	StageSwitchPreStateful = "ls_in_pre_stateful"
	StageSwitchAffCheck    = "ls_in_lb_aff_check"
	StageSwitchLB          = "ls_in_lb"
	StageSwitchAffLearn    = "ls_in_lb_aff_learn"
	StageRouterIPInput     = "lr_in_ip_input"
	StageRouterDefrag      = "lr_in_defrag"
	StageRouterAffCheck    = "lr_in_lb_aff_check"
	StageRouterDNAT        = "lr_in_dnat"
	StageRouterAffLearn    = "lr_in_lb_aff_learn"
	StageRouterUnDNAT      = "lr_out_undnat"
)

func fmtAddrPort(a netip.AddrPort) string {
	if a.Port() == 0 {
		return a.Addr().String()
	}
	return a.String()
}

// vipRows appends the rows one VIP of lb needs on switches and routers.
func vipRows(out []*Row, lb *LB, v *VIP) []*Row {
	a := v.Frontend.Addr()
	as := a.String()
	port := v.Frontend.Port()
	ps := strconv.Itoa(int(port))
	proto := lb.Protocol.String()
	ipf, sreg, rreg := "ip4", "reg1", "reg0"
	if a.Is6() && !a.Is4In6() {
		ipf, sreg, rreg = "ip6", "xxreg1", "xxreg0"
	}
	prio := uint16(110)
	if port != 0 {
		prio = 120
	}
	var bk strings.Builder
	for i, b := range v.Backends {
		if i > 0 {
			bk.WriteByte(',')
		}
		if port == 0 {
			bk.WriteString(b.Addr().String())
		} else {
			bk.WriteString(b.String())
		}
	}
	backends := bk.String()
	add := func(k Kind, stage string, prio uint16, match, actions string) {
		out = append(out, &Row{Kind: k, Stage: stage, Priority: prio, Match: match, Actions: actions, LB: lb.Name})
	}

	// Switch: pre-stateful sends the VIP's packets to conntrack with the
	// VIP saved in registers; the LB stage picks a backend for new ones.
	swDst := ipf + ".dst == " + as
	rtDst := ipf + " && " + rreg + " == " + as
	if port != 0 {
		swDst += " && " + proto + ".dst == " + ps
		rtDst += " && " + proto + " && reg9[16..31] == " + ps
		add(Switch, StageSwitchPreStateful, prio, "reg0[2] == 1 && "+swDst, sreg+" = "+as+"; reg2[0..15] = "+ps+"; ct_lb_mark;")
	} else {
		add(Switch, StageSwitchPreStateful, prio, "reg0[2] == 1 && "+swDst, sreg+" = "+as+"; ct_lb_mark;")
	}
	var snat string
	switch {
	case lb.Options.ForceSNAT:
		snat = "flags.force_snat_for_lb = 1; "
	case lb.Options.SkipSNAT:
		snat = "flags.skip_snat_for_lb = 1; "
	}
	lbAct, rtAct := "reg0[1] = 0; ct_lb_mark(backends="+backends+");", snat+"ct_lb_mark(backends="+backends+");"
	if len(v.Backends) == 0 {
		lbAct, rtAct = "drop;", "drop;"
		if lb.Options.Reject {
			lbAct, rtAct = "reg0 = 0; reject { outport <-> inport; next(pipeline=egress,table=5);};", "reject { outport <-> inport; next(pipeline=egress,table=1);};"
		}
	}
	aff := lb.Options.AffinityTimeout > 0 && len(v.Backends) > 0
	if aff {
		add(Switch, StageSwitchAffCheck, 100, "ct.new && "+swDst, "reg9[6] = chk_lb_aff(); next;")
	}
	add(Switch, StageSwitchLB, prio, "ct.new && "+swDst, lbAct)

	// Router: defrag saves the VIP and port, DNAT balances new
	// connections and passes established ones, un-DNAT restores the
	// VIP on replies from the backends.
	if port != 0 {
		add(Router, StageRouterDefrag, prio-10, "ip && "+ipf+".dst == "+as+" && "+proto, rreg+" = "+as+"; reg9[16..31] = "+proto+".dst; ct_dnat;")
	} else {
		add(Router, StageRouterDefrag, prio-10, "ip && "+ipf+".dst == "+as, rreg+" = "+as+"; ct_dnat;")
	}
	if aff {
		add(Router, StageRouterAffCheck, 100, "ct.new && !ct.rel && "+rtDst, "reg9[6] = chk_lb_aff(); next;")
	}
	add(Router, StageRouterDNAT, prio, "ct.new && !ct.rel && "+rtDst, rtAct)
	if len(v.Backends) == 0 {
		return out
	}
	add(Router, StageRouterDNAT, prio, "ct.est && !ct.rel && "+rtDst+" && ct_mark.natted == 1", snat+"next;")
	var un strings.Builder
	un.WriteString(ipf + " && (")
	for i, b := range v.Backends {
		if i > 0 {
			un.WriteString(" || ")
		}
		if port == 0 {
			un.WriteString(ipf + ".src == " + b.Addr().String())
		} else {
			un.WriteString("(" + ipf + ".src == " + b.Addr().String() + " && " + proto + ".src == " + strconv.Itoa(int(b.Port())) + ")")
		}
	}
	un.WriteString(")")
	add(Router, StageRouterUnDNAT, 120, un.String(), "ct_dnat;")
	if aff {
		t := strconv.FormatUint(uint64(lb.Options.AffinityTimeout), 10)
		for _, b := range v.Backends {
			bs, bp := b.Addr().String(), strconv.Itoa(int(b.Port()))
			learn := "commit_lb_aff(vip = \"" + fmtAddrPort(v.Frontend) + "\", backend = \"" + fmtAddrPort(b) + "\", proto = " + proto + ", timeout = " + t + ");"
			sw := "reg9[6] == 0 && ct.new && " + ipf + " && " + sreg + " == " + as + " && " + ipf + ".dst == " + bs
			rt := "reg9[6] == 0 && ct.new && " + ipf + " && " + rreg + " == " + as + " && " + ipf + ".dst == " + bs
			if port != 0 {
				sw += " && reg2[0..15] == " + ps + " && " + proto + ".dst == " + bp
				rt += " && reg9[16..31] == " + ps + " && " + proto + ".dst == " + bp
			}
			add(Switch, StageSwitchAffLearn, 100, sw, learn)
			add(Router, StageRouterAffLearn, 100, rt, learn)
		}
	}
	return out
}

// arpRow is the ARP (IPv4) or neighbour-discovery (IPv6) responder row for
// one address set of VIPs.
func arpRow(set string, v6 bool) *Row {
	if v6 {
		return &Row{Kind: Router, Stage: StageRouterIPInput, Priority: 90,
			Match:   "nd_ns && nd.target == $" + set,
			Actions: "nd_na { eth.src = xreg0[0..47]; nd.tll = xreg0[0..47]; outport = inport; flags.loopback = 1; output; };"}
	}
	return &Row{Kind: Router, Stage: StageRouterIPInput, Priority: 90,
		Match:   "arp.op == 1 && arp.tpa == $" + set,
		Actions: "eth.dst = eth.src; eth.src = xreg0[0..47]; arp.op = 2; arp.tha = arp.sha; arp.sha = xreg0[0..47]; arp.tpa <-> arp.spa; outport = inport; flags.loopback = 1; output;"}
}
