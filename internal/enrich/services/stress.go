package services

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// StressGroup is the load-balancer group of the stress topology.
const StressGroup = "cluster-lbs"

// StressNode returns node i of the topology of OVN's lb-group-stress
// script: switch ls<i> and gateway router lr<i>, both attached to
// StressGroup. The script adds no router ports; these routers get two so
// the ARP responder is exercised: 10.<i/256>.<i%256>.1/24 towards the
// switch and a gateway port 42.254.<i/250>.<i%250+1>/8 on the network the
// VIPs are in.
func StressNode(i int) Node {
	return Node{
		Name:   fmt.Sprintf("node%d", i),
		Switch: fmt.Sprintf("ls%d", i),
		Router: fmt.Sprintf("lr%d", i),
		Subnets: []netip.Prefix{
			netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i / 256), byte(i % 256), 1}), 24),
			netip.PrefixFrom(netip.AddrFrom4([4]byte{42, 254, byte(i / 250), byte(i%250 + 1)}), 8),
		},
		Groups: []string{StressGroup},
	}
}

// StressLB returns load balancer j of the stress script: lb<j>, TCP, VIP
// 42.<j/255>.<j%255>.1:8080 with the one backend 42.<j/255>.<j%255>.2:8081.
func StressLB(j int) LB {
	a, b := byte(j/255), byte(j%255)
	return LB{
		Name:     fmt.Sprintf("lb%d", j),
		Protocol: ProtoTCP,
		VIPs: []VIP{{
			Frontend: netip.AddrPortFrom(netip.AddrFrom4([4]byte{42, a, b, 1}), 8080),
			Backends: []netip.AddrPort{netip.AddrPortFrom(netip.AddrFrom4([4]byte{42, a, b, 2}), 8081)},
		}},
	}
}

// StressGroupOf returns StressGroup holding lb0 … lb<m-1>.
func StressGroupOf(m int) Group {
	g := Group{Name: StressGroup, LBs: make([]string, m)}
	for j := range m {
		g.LBs[j] = fmt.Sprintf("lb%d", j)
	}
	return g
}

// StressTopology is the topology of StressNode and StressLB for spec
// "N,M": N nodes, M load balancers in one group (StressGroupOf).
func StressTopology(spec string) ([]Node, []LB, []Group, error) {
	n, m, ok := strings.Cut(spec, ",")
	nn, err1 := strconv.Atoi(n)
	mm, err2 := strconv.Atoi(m)
	if !ok || err1 != nil || err2 != nil || nn < 1 || mm < 1 || nn > 100000 || mm > 65000 {
		return nil, nil, nil, fmt.Errorf("stress topology %q: want N,M (e.g. 3,10): 1 to 100,000 nodes, 1 to 65,000 load balancers", spec)
	}
	nodes := make([]Node, nn)
	for i := range nodes {
		nodes[i] = StressNode(i)
	}
	lbs := make([]LB, mm)
	for j := range lbs {
		lbs[j] = StressLB(j)
	}
	return nodes, lbs, []Group{StressGroupOf(mm)}, nil
}

// ParseVIP reads ADDR, ADDR:PORT, [V6] or [V6]:PORT (port 0: every port).
func ParseVIP(s string) (netip.Addr, uint16, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr(), ap.Port(), nil
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("bad VIP %q: want ADDR[:PORT]", s)
	}
	return a, 0, nil
}
