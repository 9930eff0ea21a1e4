//go:build linux

package ebpf

import (
	"context"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/netdev"
	"github.com/weir-dev/weir/internal/testhost"
)

type collect struct {
	mu   sync.Mutex
	recs []flow.Record
}

func (c *collect) Write(recs []flow.Record) error {
	c.mu.Lock()
	c.recs = append(c.recs, recs...)
	c.mu.Unlock()
	return nil
}

func (c *collect) Close() error { return nil }

// start runs a Source on h's interfaces matching specs; stop ends it and
// returns every record.
func start(t *testing.T, h *testhost.Host, cfg Config, specs ...string) (*Source, func() []flow.Record) {
	t.Helper()
	s, _, stop := startOut(t, h, cfg, specs...)
	return s, stop
}

// startOut is start that also returns the sink, which a test may read
// (under its lock) while the source runs.
func startOut(t *testing.T, h *testhost.Host, cfg Config, specs ...string) (*Source, *collect, func() []flow.Record) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("eBPF needs root (CAP_BPF, CAP_NET_ADMIN); CI runs this as root")
	}
	sel, err := netdev.ParseSelector(specs)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Select = sel
	if cfg.Netns == nil {
		cfg.Netns = []Netns{{Do: h.Do}}
	}
	if cfg.EvictInterval == 0 {
		cfg.EvictInterval = 200 * time.Millisecond
	}
	if cfg.Table.MaxFlows == 0 {
		cfg.Table = flow.Config{MaxFlows: 20000, IdleTimeout: time.Minute, EndLinger: time.Second}
	}
	out := &collect{}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, out) }()
	for end := time.Now().Add(10 * time.Second); s.Stats().Ifaces == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			cancel()
			t.Fatalf("not attached after 10s: %v", <-done)
		}
	}
	return s, out, func() []flow.Record {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		out.mu.Lock()
		defer out.mu.Unlock()
		return out.recs
	}
}

// TestUDPGroundTruth: the live-capture test's traffic and expectations
// (testhost.UDPFlows), counted in the kernel: 1,000 UDP flows over IPv4 and
// IPv6, exact packets and IP bytes per flow, with the map drained every
// 20 ms while the traffic runs (flows span drains: the table merges them).
func TestUDPGroundTruth(t *testing.T) {
	pr := testhost.NewPair(t)
	for _, tc := range []struct {
		name string
		v6   bool
	}{{"ipv4", false}, {"ipv6", true}} {
		t.Run(tc.name, func(t *testing.T) {
			s, stop := start(t, pr.B, Config{EvictInterval: 20 * time.Millisecond}, pr.B.Iface)
			if n := attached(t, pr.B, pr.B.Iface); n != 2 {
				t.Errorf("%d TCX programs on %s while running, want 2 (ingress, egress)", n, pr.B.Iface)
			}
			want := testhost.UDPFlows(t, pr.A, pr.B, tc.v6, 20000, 1000)
			recs := stop()
			testhost.CheckUDP(t, recs, pr.A, pr.B, tc.v6, want)
			st := s.Stats()
			if st.InsertE2BIG != 0 || st.Lost != 0 || st.Evictions[SourceHashmap][ReasonTimer]+st.Evictions[SourceHashmap][ReasonShutdown] < 3 || st.Ifaces != 1 {
				t.Errorf("stats %+v", st)
			}
			for _, r := range recs {
				if r.Iface != pr.B.Iface {
					t.Fatalf("record on %q, want %s: %+v", r.Iface, pr.B.Iface, r)
				}
			}
			if n := attached(t, pr.B, pr.B.Iface); n != 0 {
				t.Errorf("%d TCX programs left on %s after Run returned", n, pr.B.Iface)
			}
		})
	}
}

// attached counts the TCX programs on iface (ingress and egress) in h.
func attached(t *testing.T, h *testhost.Host, iface string) int {
	t.Helper()
	n := 0
	err := h.Do(func() error {
		ifc, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		for _, a := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
			r, err := link.QueryPrograms(link.QueryOptions{Target: ifc.Index, Attach: a})
			if err != nil {
				return err
			}
			n += len(r.Programs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDedupRouter: every packet between two hosts passes two interfaces
// of a router hub (in at one host's port, out at the other's); the kernel
// counts it once, at the first, and the second is a duplicate.
func TestDedupRouter(t *testing.T) {
	n := testhost.NewNet(t, testhost.Router, 3)
	s, stop := start(t, n.Hub, Config{}, "any")
	a, c := n.Hosts[0], n.Hosts[2]
	want4 := testhost.UDPFlows(t, a, c, false, 22000, 100)
	want6 := testhost.UDPFlows(t, a, c, true, 23000, 100)
	recs := stop()
	testhost.CheckUDP(t, recs, a, c, false, want4)
	testhost.CheckUDP(t, recs, a, c, true, want6)
	var pkts uint64
	for _, w := range want4 {
		pkts += w[0]
	}
	for _, w := range want6 {
		pkts += w[0]
	}
	st := s.Stats()
	if st.Duplicates != pkts || st.Ifaces != 3 {
		t.Errorf("duplicates %d, want %d (each UDP packet seen twice); stats %+v", st.Duplicates, pkts, st)
	}
	for _, r := range recs {
		if r.Key.Proto == flow.ProtoUDP && r.Iface != n.HubIface(a) {
			t.Fatalf("record counted at %q, want %s (the first interface): %+v", r.Iface, n.HubIface(a), r)
		}
	}
}

// TestOverflow: 20,000 concurrent UDP flows through a kernel map of 1,000
// entries, with both ends of the veth watched (one in each namespace):
// the map fills, the rest goes through the overflow ring, and every
// flow's packets and bytes are still exact, each counted once, at the
// sender's end. The metrics show the overflow.
func TestOverflow(t *testing.T) {
	pr := testhost.NewPair(t)
	for _, tc := range []struct {
		name string
		v6   bool
	}{{"ipv4", false}, {"ipv6", true}} {
		t.Run(tc.name, func(t *testing.T) {
			// The ring holds 100,000 records: the sender outruns a reader slowed
			// ~10× by the race detector (without it, the default 1 MiB loses none).
			cfg := Config{MaxFlows: 1000, EvictInterval: 2 * time.Second, RingSize: 8 << 20, Netns: []Netns{{"a", pr.A.Do}, {"b", pr.B.Do}}}
			s, stop := start(t, pr.B, cfg, pr.A.Iface, pr.B.Iface)
			want := testhost.ManyUDP(t, pr.A, pr.B, tc.v6, 9000, 30000, 20000)
			recs := stop()
			src, dst := pr.A.Addr4, pr.B.Addr4
			if tc.v6 {
				src, dst = pr.A.Addr6, pr.B.Addr6
			}
			got := testhost.ByDstPort(recs, flow.ProtoUDP, dst, src) // keyed by A's source port; A → B is "reverse"
			bad := 0
			for port, w := range want {
				g := got[port]
				if g == nil || g.RPkts != w[0] || g.RBytes != w[1] || g.Pkts != 0 || len(g.Ifaces) != 1 || !g.Ifaces["a/"+pr.A.Iface] {
					if bad++; bad <= 5 {
						t.Errorf("flow from port %d: got %+v, want %d packets %d bytes at a/%s", port, g, w[0], w[1], pr.A.Iface)
					}
				}
			}
			if bad > 0 || len(got) != len(want) {
				t.Errorf("%d of %d flows wrong; %d flows recorded", bad, len(want), len(got))
			}
			st := s.Stats()
			t.Logf("stats %+v", st)
			if st.Lost != 0 || st.InsertE2BIG == 0 || st.Ring != st.InsertE2BIG || st.RingRead != st.Ring ||
				st.Evictions[SourceRingbuf][ReasonFull] == 0 || st.Evictions[SourceHashmap][ReasonFull] == 0 || st.Ifaces != 2 {
				t.Errorf("the overflow does not show as it should")
			}
			for _, h := range []*testhost.Host{pr.A, pr.B} {
				if n := attached(t, h, h.Iface); n != 0 {
					t.Errorf("%d TCX programs left on %s after Run returned", n, h.Iface)
				}
			}
		})
	}
}

// TestSampling: 1 in 4 by flow hash keeps whole flows, exact, and about a
// quarter of them; 1 in 4 by packet keeps about a quarter of the packets,
// and with both veth ends watched a packet is chosen at both or neither,
// so no flow gets more than was sent.
func TestSampling(t *testing.T) {
	pr := testhost.NewPair(t)
	ns := []Netns{{"a", pr.A.Do}, {"b", pr.B.Do}}
	t.Run("flows", func(t *testing.T) {
		s, stop := start(t, pr.B, Config{Sampling: 4, SampleFlows: true, Netns: ns}, pr.A.Iface, pr.B.Iface)
		want := testhost.ManyUDP(t, pr.A, pr.B, false, 9000, 30000, 2000)
		recs := stop()
		for _, r := range recs {
			if r.Sampling != 4 {
				t.Fatalf("record without its sampling rate (%d, want 4): %+v", r.Sampling, r)
			}
		}
		got := testhost.ByDstPort(recs, flow.ProtoUDP, pr.B.Addr4, pr.A.Addr4)
		for port, g := range got {
			if w, ok := want[port]; !ok || g.RPkts != w[0] || g.RBytes != w[1] {
				t.Errorf("sampled flow from port %d: %+v, want all of %v", port, g, w)
			}
		}
		if n := len(got); n < 400 || n > 600 {
			t.Errorf("%d of 2000 flows sampled, want about 500", n)
		}
		if st := s.Stats(); st.SampledOut == 0 {
			t.Errorf("stats %+v", st)
		}
	})
	t.Run("packets", func(t *testing.T) {
		s, stop := start(t, pr.B, Config{Sampling: 4, Netns: ns}, pr.A.Iface, pr.B.Iface)
		want := testhost.ManyUDP(t, pr.A, pr.B, false, 9000, 30000, 4000)
		got := testhost.ByDstPort(stop(), flow.ProtoUDP, pr.B.Addr4, pr.A.Addr4)
		var sent, kept uint64
		for port, w := range want {
			sent += w[0]
			if g := got[port]; g != nil {
				kept += g.RPkts
				if g.RPkts > w[0] {
					t.Errorf("flow from port %d: %d packets counted, %d sent", port, g.RPkts, w[0])
				}
			}
		}
		if kept*4 < sent*8/10 || kept*4 > sent*12/10 {
			t.Errorf("%d of %d packets kept, want about a quarter", kept, sent)
		}
		if st := s.Stats(); st.Duplicates < kept { // each kept packet was chosen at B's end too
			t.Errorf("%d packets kept but only %d chosen again at the second interface: %+v", kept, st.Duplicates, st)
		}
	})
}

// TestNewInterface: an interface that appears while the source runs (a
// host joins the router hub) is attached at once and its flows counted
// exactly, at it; when it is deleted the source lets it go.
func TestNewInterface(t *testing.T) {
	n := testhost.NewNet(t, testhost.Router, 2)
	s, stop := start(t, n.Hub, Config{}, "any")
	before := s.Stats().Ifaces
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := n.AddHost(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitIfaces(t, s, before+1)
	want := testhost.UDPFlows(t, h, n.Hosts[0], false, 25000, 50)
	if out, err := n.Hub.Exec(ctx, "ip", "link", "del", n.HubIface(h)); err != nil {
		t.Fatalf("ip link del: %v: %s", err, out)
	}
	waitIfaces(t, s, before)
	recs := stop()
	testhost.CheckUDP(t, recs, h, n.Hosts[0], false, want)
	for _, r := range recs {
		if r.Key.Proto == flow.ProtoUDP && r.Iface != n.HubIface(h) {
			t.Fatalf("record counted at %q, want the new interface %s: %+v", r.Iface, n.HubIface(h), r)
		}
	}
}

// waitIfaces waits up to 10 s for the source to have n interfaces attached.
func waitIfaces(t *testing.T, s *Source, n int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); s.Stats().Ifaces != n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d interfaces attached, want %d", s.Stats().Ifaces, n)
		}
	}
}
