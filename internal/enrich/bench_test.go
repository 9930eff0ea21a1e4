package enrich

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"

	"github.com/weir-dev/weir/internal/enrich/services"
	"github.com/weir-dev/weir/internal/flow"
)

// benchInventory builds nLB load balancers (one TCP VIP, two backends
// each) and nW workloads: 45% IPv4 /32, 45% IPv6 /128, 5% IPv4 /24 and 5%
// IPv6 /64 ranges. Backends are workload addresses.
func benchInventory(nLB, nW int) *Inventory {
	inv := &Inventory{Workloads: make([]Workload, 0, nW), LBs: make([]services.LB, 0, nLB)}
	var hosts4 []netip.Addr
	for i := range nW {
		w := Workload{Name: fmt.Sprintf("pod-%d", i), Namespace: fmt.Sprintf("ns-%d", i%50), Node: fmt.Sprintf("node-%d", i%120)}
		var p netip.Prefix
		switch m := i % 20; {
		case m < 9:
			a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
			hosts4 = append(hosts4, a)
			p = netip.PrefixFrom(a, 32)
		case m < 18:
			a := netip.AddrFrom16([16]byte{0: 0xfd, 8: byte(i >> 24), 13: byte(i >> 16), 14: byte(i >> 8), 15: byte(i)})
			p = netip.PrefixFrom(a, 128)
		case m == 18:
			p = netip.PrefixFrom(netip.AddrFrom4([4]byte{172, byte(16 + i>>16&15), byte(i >> 8), 0}), 24)
		default:
			p = netip.PrefixFrom(netip.AddrFrom16([16]byte{0: 0x20, 1: 0x01, 2: 0x0d, 3: 0xb8, 4: byte(i >> 16), 5: byte(i >> 8), 6: byte(i)}), 64)
		}
		w.Addrs = []netip.Prefix{p}
		inv.Workloads = append(inv.Workloads, w)
	}
	for i := range nLB {
		fe := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 96 + byte(i>>16), byte(i >> 8), byte(i)}), uint16(80+i%3))
		b1 := netip.AddrPortFrom(hosts4[(2*i)%len(hosts4)], 8080)
		b2 := netip.AddrPortFrom(hosts4[(2*i+1)%len(hosts4)], 8080)
		inv.LBs = append(inv.LBs, services.LB{Name: fmt.Sprintf("ns-%d/svc-%d", i%50, i), Protocol: services.ProtoTCP,
			VIPs: []services.VIP{{Frontend: fe, Backends: []netip.AddrPort{b1, b2}}}})
	}
	g := services.Group{Name: "cluster"}
	for i := 0; i < nLB; i += 2 {
		g.LBs = append(g.LBs, inv.LBs[i].Name)
	}
	inv.Groups = []services.Group{g}
	return inv
}

// benchRecords returns n records: a quarter to VIPs (NATed half of the
// time), a quarter to backends, a quarter between ranges, a quarter to
// unknown addresses.
func benchRecords(inv *Inventory, n int) []flow.Record {
	rng := rand.New(rand.NewPCG(7, 7))
	recs := make([]flow.Record, n)
	some := func() netip.Addr {
		return inv.Workloads[rng.IntN(len(inv.Workloads))].Addrs[0].Addr()
	}
	for i := range recs {
		r := &recs[i]
		lb := &inv.LBs[rng.IntN(len(inv.LBs))]
		switch i % 4 {
		case 0:
			v := lb.VIPs[0]
			r.Key.SetSrc(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}))
			r.Key.SetDst(v.Frontend.Addr())
			r.Key.DstPort = v.Frontend.Port()
			if i%8 == 0 {
				r.PostNAT = r.Key
				r.PostNAT.SetDst(v.Backends[0].Addr())
				r.PostNAT.DstPort = v.Backends[0].Port()
			}
		case 1:
			b := lb.VIPs[0].Backends[1]
			r.Key.SetSrc(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}))
			r.Key.SetDst(b.Addr())
			r.Key.DstPort = b.Port()
		case 2:
			a := some()
			for a.Is4() {
				a = some()
			}
			r.Key.SetSrc(a)
			r.Key.SetDst(some().Next())
			if r.Key.Src().Is4() != a.Is4() {
				r.Key.SetDst(a.Next())
			}
		default:
			r.Key.SetSrc(netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)}))
			r.Key.SetDst(netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}))
			r.Key.DstPort = 443
		}
		r.Key.Proto = flow.ProtoTCP
		r.Key.SrcPort = uint16(30000 + i)
	}
	return recs
}

// BenchmarkEnrich: 10k services (two backends each), 100k workloads;
// ns/record and allocations per record (0).
func BenchmarkEnrich(b *testing.B) {
	inv := benchInventory(10_000, 100_000)
	e := NewEnricher()
	if err := e.Load(*inv); err != nil {
		b.Fatal(err)
	}
	recs := benchRecords(inv, 4096)
	const batch = 256
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for i := 0; b.Loop(); i++ {
		off := (i * batch) % len(recs)
		e.Enrich(recs[off : off+batch])
		n += batch
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/record")
	st := e.Stats()
	if st.SrcHits == 0 || st.ServiceHits[flow.ServiceMatchVIP] == 0 || st.ServiceHits[flow.ServiceMatchNAT] == 0 || st.ServiceHits[flow.ServiceMatchBackend] == 0 {
		b.Fatalf("the benchmark records miss the index: %+v", st)
	}
}

// BenchmarkIndexBuild: building the index of 10k services and 100k
// workloads; heap-bytes is what the built index keeps.
func BenchmarkIndexBuild(b *testing.B) {
	inv := benchInventory(10_000, 100_000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	keep, err := NewIndex(inv)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := NewIndex(inv); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc), "heap-bytes")
}
