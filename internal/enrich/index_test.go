package enrich

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/enrich/services"
	"github.com/weir-dev/weir/internal/flow"
)

func pfx(s string) netip.Prefix {
	if !strings.Contains(s, "/") {
		a := netip.MustParseAddr(s)
		return netip.PrefixFrom(a, a.BitLen())
	}
	return netip.MustParsePrefix(s)
}

func ap(s string) netip.AddrPort {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a, 0)
	}
	return netip.MustParseAddrPort(s)
}

func wl(name, ns, node string, addrs ...string) Workload {
	w := Workload{Name: name, Namespace: ns, Node: node}
	for _, a := range addrs {
		w.Addrs = append(w.Addrs, pfx(a))
	}
	return w
}

func lb(name string, proto services.Protocol, vips map[string][]string) services.LB {
	l := services.LB{Name: name, Protocol: proto}
	for fe, bs := range vips {
		v := services.VIP{Frontend: ap(fe)}
		for _, b := range bs {
			v.Backends = append(v.Backends, ap(b))
		}
		l.VIPs = append(l.VIPs, v)
	}
	return l
}

// rec builds a record proto src:sport -> dst:dport.
func rec(proto uint8, src string, sport uint16, dst string, dport uint16) flow.Record {
	var r flow.Record
	r.Key.SetSrc(netip.MustParseAddr(src))
	r.Key.SetDst(netip.MustParseAddr(dst))
	r.Key.SrcPort, r.Key.DstPort, r.Key.Proto = sport, dport, proto
	return r
}

// natted marks r as translated by conntrack to backend.
func natted(r flow.Record, backend string) flow.Record {
	b := netip.MustParseAddrPort(backend)
	r.PostNAT = r.Key
	r.PostNAT.SetDst(b.Addr())
	r.PostNAT.DstPort = b.Port()
	return r
}

func testInventory() *Inventory {
	return &Inventory{
		Workloads: []Workload{
			wl("client", "shop", "node-1", "10.244.1.10", "fd00:244:1::10"),
			wl("web-0", "shop", "node-1", "10.244.1.5", "fd00:244:1::5"),
			wl("web-1", "shop", "node-2", "10.244.2.7"),
			wl("db-0", "data", "node-2", "10.244.2.9"),
			wl("node-2-pods", "", "node-2", "10.244.2.0/24"),
			wl("vms", "", "", "192.168.0.0/16", "2001:db8::/32"),
			wl("vm-big", "", "hv-1", "192.168.4.0/22"),
		},
		LBs: []services.LB{
			lb("shop/web", services.ProtoTCP, map[string][]string{
				"10.96.0.80:80":    {"10.244.1.5:8080", "10.244.2.7:8080"},
				"[fd00:96::80]:80": {"[fd00:244:1::5]:8080"},
			}),
			lb("shop/web-alt", services.ProtoTCP, map[string][]string{"10.96.0.81:8080": {"10.244.1.5:8080"}}),
			lb("data/db", services.ProtoTCP, map[string][]string{"10.96.0.90:5432": {"10.244.2.9:5432"}}),
			lb("kube-system/dns", services.ProtoUDP, map[string][]string{"10.96.0.10:53": {"10.244.2.9:53"}}),
			lb("any-port", services.ProtoTCP, map[string][]string{"10.96.1.1": {"10.244.2.7"}}),
		},
		Groups: []services.Group{
			{Name: "cluster", LBs: []string{"shop/web", "data/db", "kube-system/dns", "shop/web-alt"}},
			{Name: "edge", LBs: []string{"shop/web"}},
		},
		Nodes: []services.Node{{Name: "node-1", Groups: []string{"cluster"}}, {Name: "node-2", Groups: []string{"cluster", "edge"}}},
	}
}

func wname(w *flow.Workload) string {
	if w == nil {
		return "-"
	}
	return w.Namespace + "/" + w.Name + "@" + w.Node
}

func TestEnrich(t *testing.T) {
	x, err := NewIndex(testInventory())
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		src, dst             string
		svc, backends, group string
		match                flow.ServiceMatch
	}
	for _, c := range []struct {
		name string
		r    flow.Record
		want want
	}{
		{"vip", rec(6, "10.244.1.10", 40000, "10.96.0.80", 80),
			want{"shop/client@node-1", "-", "shop/web", "10.244.1.5:8080,10.244.2.7:8080", "cluster,edge", flow.ServiceMatchVIP}},
		{"vip6", rec(6, "fd00:244:1::10", 40000, "fd00:96::80", 80),
			want{"shop/client@node-1", "-", "shop/web", "[fd00:244:1::5]:8080", "cluster,edge", flow.ServiceMatchVIP}},
		{"vip wrong port", rec(6, "10.244.1.10", 40000, "10.96.0.80", 81),
			want{"shop/client@node-1", "-", "", "", "", flow.ServiceMatchNone}},
		{"vip wrong protocol", rec(17, "10.244.1.10", 40000, "10.96.0.80", 80),
			want{"shop/client@node-1", "-", "", "", "", flow.ServiceMatchNone}},
		{"udp vip", rec(17, "10.244.1.10", 40000, "10.96.0.10", 53),
			want{"shop/client@node-1", "-", "kube-system/dns", "10.244.2.9:53", "cluster", flow.ServiceMatchVIP}},
		{"nat", natted(rec(6, "10.244.1.10", 40000, "10.96.0.80", 80), "10.244.2.7:8080"),
			want{"shop/client@node-1", "shop/web-1@node-2", "shop/web", "10.244.1.5:8080,10.244.2.7:8080", "cluster,edge", flow.ServiceMatchNAT}},
		{"nat to an unknown backend", natted(rec(6, "10.244.1.10", 40000, "10.96.0.90", 5432), "10.9.9.9:5432"),
			want{"shop/client@node-1", "-", "data/db", "10.244.2.9:5432", "cluster", flow.ServiceMatchNAT}},
		{"nat, not to a vip", natted(rec(6, "10.244.1.10", 40000, "10.244.2.9", 5432), "10.244.1.5:5432"),
			want{"shop/client@node-1", "data/db-0@node-2", "data/db", "10.244.2.9:5432", "cluster", flow.ServiceMatchBackend}},
		{"backend", rec(6, "10.244.1.10", 40000, "10.244.2.9", 5432),
			want{"shop/client@node-1", "data/db-0@node-2", "data/db", "10.244.2.9:5432", "cluster", flow.ServiceMatchBackend}},
		{"backend other port", rec(6, "10.244.1.10", 40000, "10.244.2.9", 5433),
			want{"shop/client@node-1", "data/db-0@node-2", "", "", "", flow.ServiceMatchNone}},
		{"ambiguous", rec(6, "10.244.1.10", 40000, "10.244.1.5", 8080),
			want{"shop/client@node-1", "shop/web-0@node-1", "shop/web,shop/web-alt", "10.244.1.5:8080", "cluster,edge", flow.ServiceMatchAmbiguous}},
		{"port-0 vip", rec(6, "10.244.1.10", 40000, "10.96.1.1", 4242),
			want{"shop/client@node-1", "-", "any-port", "10.244.2.7", "", flow.ServiceMatchVIP}},
		{"port-0 backend", rec(6, "10.244.1.10", 40000, "10.244.2.7", 4242),
			want{"shop/client@node-1", "shop/web-1@node-2", "any-port", "10.244.2.7", "", flow.ServiceMatchBackend}},
		{"range", rec(6, "10.244.2.200", 1, "192.168.1.1", 22),
			want{"/node-2-pods@node-2", "/vms@", "", "", "", flow.ServiceMatchNone}},
		{"nested range", rec(6, "192.168.5.1", 1, "192.168.8.0", 22),
			want{"/vm-big@hv-1", "/vms@", "", "", "", flow.ServiceMatchNone}},
		{"v6 range", rec(6, "2001:db8:ffff::1", 1, "2001:db9::1", 22),
			want{"/vms@", "-", "", "", "", flow.ServiceMatchNone}},
		{"v4 range does not hold v4-mapped v6", rec(6, "::ffff:192.168.0.1", 1, "::1", 1),
			want{"-", "-", "", "", "", flow.ServiceMatchNone}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.r
			r.SrcWorkload, r.Service, r.ServiceMatch = &flow.Workload{Name: "stale"}, &flow.Service{Name: "stale"}, flow.ServiceMatchVIP
			x.Enrich(&r)
			var got want
			got.src, got.dst, got.match = wname(r.SrcWorkload), wname(r.DstWorkload), r.ServiceMatch
			if r.Service != nil {
				got.svc, got.backends, got.group = r.Service.Name, r.Service.Backends, r.Service.Group
			}
			if got != c.want {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// TestSharedEntries: a workload's addresses share one entry, and records
// point into the index rather than into copies.
func TestSharedEntries(t *testing.T) {
	x, err := NewIndex(testInventory())
	if err != nil {
		t.Fatal(err)
	}
	a := rec(6, "10.244.1.10", 1, "10.0.0.1", 2)
	b := rec(6, "fd00:244:1::10", 1, "fd00:96::80", 80)
	c := rec(6, "10.244.1.10", 1, "10.96.0.80", 80)
	x.Enrich(&a)
	x.Enrich(&b)
	x.Enrich(&c)
	if a.SrcWorkload == nil || a.SrcWorkload != b.SrcWorkload {
		t.Errorf("client's two addresses: %p and %p, want one entry", a.SrcWorkload, b.SrcWorkload)
	}
	if b.Service == nil || b.Service == c.Service {
		t.Errorf("the IPv4 and IPv6 VIPs share a Service (%p): their backends differ", b.Service)
	}
	c2 := c
	x.Enrich(&c2)
	if c2.Service != c.Service {
		t.Error("the same VIP gave two Service pointers")
	}
}

func TestEnrichAllocs(t *testing.T) {
	recs := []flow.Record{
		rec(6, "10.244.1.10", 40000, "10.96.0.80", 80),
		natted(rec(6, "10.244.1.10", 40000, "10.96.0.80", 80), "10.244.2.7:8080"),
		rec(6, "10.244.1.10", 40000, "10.244.1.5", 8080),
		rec(6, "192.168.5.1", 1, "2001:db8::1", 22),
		rec(17, "8.8.8.8", 1, "9.9.9.9", 53),
	}
	e := NewEnricher()
	if err := e.Load(*testInventory()); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { e.Enrich(recs) }); n != 0 {
		t.Errorf("Enrich: %v allocations per batch, want 0", n)
	}
}

// TestLPMRandom checks the longest-prefix match against a linear scan
// over random nested prefixes of both families.
func TestLPMRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		var inv Inventory
		seen := map[netip.Prefix]bool{}
		base4 := netip.MustParseAddr("10.0.0.0").As4()
		base6 := netip.MustParseAddr("2001:db8::").As16()
		for i := range 200 {
			var p netip.Prefix
			if rng.IntN(2) == 0 {
				b := base4
				b[2], b[3] = byte(rng.IntN(4)), byte(rng.IntN(256))
				p = netip.PrefixFrom(netip.AddrFrom4(b), 16+rng.IntN(17)).Masked()
			} else {
				b := base6
				b[14], b[15] = byte(rng.IntN(4)), byte(rng.IntN(256))
				if rng.IntN(8) == 0 {
					b[15] = 255 // prefixes ending at the top of a range
				}
				p = netip.PrefixFrom(netip.AddrFrom16(b), 112+rng.IntN(17)).Masked()
			}
			if seen[p] {
				continue
			}
			seen[p] = true
			inv.Workloads = append(inv.Workloads, Workload{Name: fmt.Sprint("w", i), Addrs: []netip.Prefix{p}})
		}
		if round == 0 {
			inv.Workloads = append(inv.Workloads, Workload{Name: "all6", Addrs: []netip.Prefix{pfx("::/0")}},
				Workload{Name: "top", Addrs: []netip.Prefix{pfx("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fff0/124")}})
		}
		x, err := NewIndex(&inv)
		if err != nil {
			t.Fatal(err)
		}
		for range 3000 {
			var a netip.Addr
			if rng.IntN(2) == 0 {
				b := base4
				b[1], b[2], b[3] = byte(rng.IntN(2)), byte(rng.IntN(5)), byte(rng.IntN(256))
				a = netip.AddrFrom4(b)
			} else {
				b := base6
				if rng.IntN(50) == 0 {
					b = [16]byte{0: 0xff, 1: 0xff, 2: 0xff, 3: 0xff, 4: 0xff, 5: 0xff, 6: 0xff, 7: 0xff, 8: 0xff, 9: 0xff, 10: 0xff, 11: 0xff, 12: 0xff, 13: 0xff, 14: 0xff}
				}
				b[14], b[15] = byte(rng.IntN(5)), byte(rng.IntN(256))
				a = netip.AddrFrom16(b)
			}
			want, bits := "", -1
			for _, w := range inv.Workloads {
				if p := w.Addrs[0]; p.Contains(a) && p.Bits() > bits {
					want, bits = w.Name, p.Bits()
				}
			}
			var k flow.Key
			k.SetSrc(a)
			got := ""
			if w := x.Workload(&k.SrcAddr, k.IPVersion); w != nil {
				got = w.Name
			}
			if got != want {
				t.Fatalf("round %d: %s: got %q, want %q", round, a, got, want)
			}
		}
	}
}

func TestConflicts(t *testing.T) {
	inv := &Inventory{Workloads: []Workload{
		wl("a", "", "", "10.0.0.1", "10.1.0.0/16"),
		wl("b", "", "", "10.0.0.1", "10.1.0.0/16", "10.2.0.0/16"),
	}}
	x, err := NewIndex(inv)
	if err != nil {
		t.Fatal(err)
	}
	if x.Conflicts() != 2 {
		t.Errorf("conflicts %d, want 2", x.Conflicts())
	}
	for addr, want := range map[string]string{"10.0.0.1": "a", "10.1.2.3": "a", "10.2.0.1": "b"} {
		r := rec(6, addr, 1, "1.1.1.1", 1)
		x.Enrich(&r)
		if r.SrcWorkload == nil || r.SrcWorkload.Name != want {
			t.Errorf("%s: %s, want %s (the first listed)", addr, wname(r.SrcWorkload), want)
		}
	}
}
