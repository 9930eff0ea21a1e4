//go:build linux

package afpacket

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/testhost"
)

// TestDedupAny: captured on every interface of a hub, each packet between
// two hosts passes three interfaces of a bridge hub (ingress port, the
// bridge, egress port) or two of a router hub (in, out). weir counts each
// exactly once, and counts the other copies as duplicates, with one worker
// and with two (the fanout hash sends every copy to the same worker).
func TestDedupAny(t *testing.T) {
	for _, tc := range []struct {
		kind    testhost.HubKind
		copies  int
		workers int
	}{{testhost.Bridge, 3, 1}, {testhost.Bridge, 3, 2}, {testhost.Router, 2, 1}, {testhost.Router, 2, 2}} {
		t.Run(fmt.Sprintf("%v-workers%d", tc.kind, tc.workers), func(t *testing.T) {
			n := testhost.NewNet(t, tc.kind, 3)
			ifaces := 3 // one hub port per host
			if tc.kind == testhost.Bridge {
				ifaces++ // and the bridge
			}
			cfg := testConfig(t, n.Hub, "any")
			cfg.Workers = tc.workers
			r := startCapture(t, cfg, ifaces)
			a, c := n.Hosts[0], n.Hosts[2]
			want4 := testhost.UDPFlows(t, a, c, false, 22000, 100)
			want6 := testhost.UDPFlows(t, a, c, true, 23000, 100)
			recs := r.stop()
			testhost.CheckUDP(t, recs, a, c, false, want4)
			testhost.CheckUDP(t, recs, a, c, true, want6)
			var pkts uint64
			for _, w := range want4 {
				pkts += w[0]
			}
			for _, w := range want6 {
				pkts += w[0]
			}
			st := r.c.Stats()
			if want := pkts * uint64(tc.copies-1); st.Table.Duplicates != want {
				t.Errorf("duplicates %d, want %d (%d packets seen %d times each)", st.Table.Duplicates, want, pkts, tc.copies)
			}
			if st.Table.Packets != pkts*uint64(tc.copies) {
				t.Errorf("packets given to the tables %d, want %d", st.Table.Packets, pkts*uint64(tc.copies))
			}
		})
	}
}

// TestInterfacesComeAndGo: a host joined to the hub while weir captures on
// any brings a new hub port; weir opens it without a restart and counts the
// new host's traffic exactly. When that port is deleted, weir releases it
// and goes on capturing the others.
func TestInterfacesComeAndGo(t *testing.T) {
	n := testhost.NewNet(t, testhost.Router, 2)
	r := startCapture(t, testConfig(t, n.Hub, "any"), 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := n.AddHost(ctx)
	if err != nil {
		t.Fatal(err)
	}
	port := n.HubIface(h)
	waitFor(t, 5*time.Second, func() bool {
		for _, f := range r.c.Stats().Ifaces {
			if f.Name == port && f.Open {
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprintf("new hub port %s not opened: %+v", port, r.c.Stats().Ifaces) })
	want := testhost.UDPFlows(t, h, n.Hosts[0], false, 24000, 50)

	if out, err := n.Hub.Exec(ctx, "ip", "link", "del", port); err != nil {
		t.Fatalf("ip link del %s: %v: %s", port, err, out)
	}
	waitFor(t, 5*time.Second, func() bool {
		for _, f := range r.c.Stats().Ifaces {
			if f.Name == port {
				return !f.Open
			}
		}
		return false
	}, func() string { return fmt.Sprintf("deleted port %s still open: %+v", port, r.c.Stats().Ifaces) })
	want2 := testhost.UDPFlows(t, n.Hosts[1], n.Hosts[0], false, 25000, 50)
	recs := r.stop()
	testhost.CheckUDP(t, recs, h, n.Hosts[0], false, want)
	testhost.CheckUDP(t, recs, n.Hosts[1], n.Hosts[0], false, want2)
	st := r.c.Stats()
	if st.Opened != 3 || st.Released < 1 {
		t.Errorf("opened %d released %d, want 3 opened and the deleted port released", st.Opened, st.Released)
	}
	// Released sockets keep their final kernel counters: for every
	// interface, deleted or not, the kernel passed exactly what was read.
	for _, f := range st.Ifaces {
		if f.Kernel.Packets != f.Packets || f.Kernel.Drops != 0 || f.Packets == 0 {
			t.Errorf("%s: read %d frames, kernel says %d passed and %d dropped (all: %+v)", f.Name, f.Packets, f.Kernel.Packets, f.Kernel.Drops, st.Ifaces)
		}
	}
	// Rings are read a block at a time, so which copy the table sees
	// first (in from the new host, or out to the old one) is not fixed.
	for _, rec := range recs {
		if rec.Key.Src() == h.Addr4 && rec.Iface != port && rec.Iface != n.HubIface(n.Hosts[0]) {
			t.Errorf("flow %v on %q, want %s or %s", rec.Key, rec.Iface, port, n.HubIface(n.Hosts[0]))
			break
		}
	}
}
