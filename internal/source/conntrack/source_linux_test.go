//go:build linux

package conntrack

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/sink"
	"github.com/weir-dev/weir/internal/testhost"
)

// runSource starts a Source in h and returns a stop function that ends
// Run and returns every record it emitted (copies).
func runSource(t *testing.T, h *testhost.Host, cfg SourceConfig) (*Source, func() []flow.Record) {
	t.Helper()
	var mu sync.Mutex
	var recs []flow.Record
	cfg.Netns = h.Do
	if cfg.Logf == nil {
		cfg.Logf = t.Logf
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	out := sink.Func(func(b []flow.Record) error {
		mu.Lock()
		recs = append(recs, b...)
		mu.Unlock()
		return nil
	})
	go func() { done <- s.Run(ctx, out) }()
	var once sync.Once
	stop := func() []flow.Record {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
			s.Close()
		})
		mu.Lock()
		defer mu.Unlock()
		return recs
	}
	t.Cleanup(func() { stop() })
	// The first poll runs at once; wait for it so traffic comes after.
	for deadline := time.Now().Add(5 * time.Second); s.Stats().Polls == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no poll within 5 s")
		}
	}
	return s, stop
}

// echoUDP answers each UDP datagram to port in h with its first half
// (halved, so the two directions differ) until the test ends.
func echoUDP(t *testing.T, h *testhost.Host, port int) {
	t.Helper()
	var c *net.UDPConn
	err := h.Do(func() (err error) {
		c, err = net.ListenUDP("udp", &net.UDPAddr{Port: port})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			c.WriteToUDPAddrPort(buf[:n/2], from)
		}
	}()
}

// exchange sends k datagrams of size bytes from h to dst, one at a time,
// each answered (size/2 bytes, echoUDP) before the next; it returns the
// client's port.
func exchange(t *testing.T, h *testhost.Host, dst netip.AddrPort, k, size int) uint16 {
	t.Helper()
	var port uint16
	err := h.Do(func() error {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		defer c.Close()
		port = uint16(c.LocalAddr().(*net.UDPAddr).Port)
		buf, got := make([]byte, size), make([]byte, size+1)
		for i := range k {
			if _, err := c.Write(buf); err != nil {
				return err
			}
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			if n, err := c.Read(got); err != nil || n != size/2 {
				return fmt.Errorf("echo %d of %d: %d bytes, %v", i+1, k, n, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// ipUDP is the IP length of a UDP datagram of size payload bytes.
func ipUDP(v6 bool, size int) uint64 {
	if v6 {
		return uint64(40 + 8 + size)
	}
	return uint64(20 + 8 + size)
}

// sum adds up the records of one connection (its deltas) and returns the
// totals, the end reason of the last record and how many there were.
func sum(recs []flow.Record, match func(*flow.Record) bool) (tot flow.Record, n int) {
	for i := range recs {
		r := &recs[i]
		if !match(r) {
			continue
		}
		if n == 0 {
			tot = *r
		} else {
			tot.Packets += r.Packets
			tot.Bytes += r.Bytes
			tot.RevPackets += r.RevPackets
			tot.RevBytes += r.RevBytes
			tot.Start, tot.End = min(tot.Start, r.Start), max(tot.End, r.End)
			tot.EndReason = r.EndReason
		}
		n++
	}
	return tot, n
}

// TestSourceNAT: a router hub translates a service address to a backend
// host (DNAT) and masquerades towards it (SNAT). A client's UDP echoes to
// the service, IPv4 and IPv6, must come out of the hub's conntrack table
// as records keyed by client → service, with the post-NAT key hub →
// backend:8080, and packets and IP bytes exact both ways; the start time
// (the kernel's timestamp) inside the traffic's span.
func TestSourceNAT(t *testing.T) {
	testhost.Skip(t)
	nft := testhost.Need(t, "nft", "nftables")
	n := testhost.NewNet(t, testhost.Router, 2)
	cli, be := n.Hosts[0], n.Hosts[1]
	// The service address is the hub's own address facing the backend:
	// an address of this test's namespaces, which nothing else answers on
	// port 80.
	vip4, vip6 := n.HubAddr(be, false), n.HubAddr(be, true)
	rules := fmt.Sprintf(`add table inet weirnat
add chain inet weirnat pre { type nat hook prerouting priority -100 ; }
add chain inet weirnat post { type nat hook postrouting priority 100 ; }
add rule inet weirnat pre ip daddr %s udp dport 80 dnat ip to %s:8080
add rule inet weirnat pre ip6 daddr %s udp dport 80 dnat ip6 to [%s]:8080
add rule inet weirnat post oifname %s masquerade`, vip4, be.Addr4, vip6, be.Addr6, n.HubIface(be))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, line := range splitLines(rules) {
		if out, err := n.Hub.Exec(ctx, nft, line); err != nil {
			t.Fatalf("nft %s: %v: %s", line, err, out)
		}
	}
	echoUDP(t, be, 8080)
	_, stop := runSource(t, n.Hub, SourceConfig{PollInterval: 200 * time.Millisecond,
		Store: StoreConfig{ActiveTimeout: time.Hour, IdleTimeout: time.Hour}})
	before := time.Now().UnixNano()
	type tc struct {
		v6         bool
		k, size    int
		port       uint16
		vip, cliIP netip.Addr
		beIP, hub  netip.Addr
	}
	cases := []*tc{{v6: false, k: 7, size: 300}, {v6: true, k: 5, size: 1000}}
	for _, c := range cases {
		c.vip, c.cliIP, c.beIP, c.hub = n.HubAddr(be, c.v6), cli.Addr(c.v6), be.Addr(c.v6), n.HubAddr(be, c.v6)
		c.port = exchange(t, cli, netip.AddrPortFrom(c.vip, 80), c.k, c.size)
	}
	after := time.Now().UnixNano()
	time.Sleep(400 * time.Millisecond) // two polls
	recs := stop()
	for _, c := range cases {
		tot, cnt := sum(recs, func(r *flow.Record) bool {
			return r.Key.Proto == flow.ProtoUDP && r.Key.Src() == c.cliIP && r.Key.SrcPort == c.port
		})
		if cnt == 0 {
			t.Errorf("v6=%v: no record of %s:%d → %s:80 in %d records", c.v6, c.cliIP, c.port, c.vip, len(recs))
			continue
		}
		wantB, wantR := uint64(c.k)*ipUDP(c.v6, c.size), uint64(c.k)*ipUDP(c.v6, c.size/2)
		if tot.Key.Dst() != c.vip || tot.Key.DstPort != 80 || tot.Packets != uint64(c.k) || tot.Bytes != wantB ||
			tot.RevPackets != uint64(c.k) || tot.RevBytes != wantR {
			t.Errorf("v6=%v: totals %d/%d pkts %d/%d bytes to %s:%d, want %d/%d and %d/%d to %s:80",
				c.v6, tot.Packets, tot.RevPackets, tot.Bytes, tot.RevBytes, tot.Key.Dst(), tot.Key.DstPort, c.k, c.k, wantB, wantR, c.vip)
		}
		p := tot.PostNAT
		if !tot.NATed() || p.Src() != c.hub || p.Dst() != c.beIP || p.DstPort != 8080 || p.SrcPort == 0 || p.Proto != flow.ProtoUDP {
			t.Errorf("v6=%v: post-NAT %s:%d → %s:%d (nated %v), want %s:* → %s:8080", c.v6, p.Src(), p.SrcPort, p.Dst(), p.DstPort, tot.NATed(), c.hub, c.beIP)
		}
		if tot.Start < before-int64(time.Second) || tot.Start > after {
			t.Errorf("v6=%v: start %d outside the traffic span [%d, %d]", c.v6, tot.Start, before, after)
		}
		if tot.End < tot.Start || tot.End > time.Now().UnixNano() {
			t.Errorf("v6=%v: end %d before start %d or in the future", c.v6, tot.End, tot.Start)
		}
	}
}

// splitLines splits s at newlines, dropping empty lines.
func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '\n' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// TestSourceEvents: a UDP exchange whose conntrack entry is destroyed
// (conntrack -D) between two polls is still reported, with exact
// counts and reason end, because the destroy event carries its final
// counters; without events the same exchange is missed, which shows the
// test depends on them.
func TestSourceEvents(t *testing.T) {
	pr := trackedPair(t)
	ct := testhost.Need(t, "conntrack", "conntrack")
	echoUDP(t, pr.B, 7000)
	for _, noEvents := range []bool{false, true} {
		t.Run(fmt.Sprintf("events=%v", !noEvents), func(t *testing.T) {
			_, stop := runSource(t, pr.B, SourceConfig{PollInterval: time.Hour, NoEvents: noEvents,
				Store: StoreConfig{ActiveTimeout: time.Hour, IdleTimeout: time.Hour}})
			port := exchange(t, pr.A, netip.AddrPortFrom(pr.B.Addr4, 7000), 4, 64)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if out, err := pr.B.Exec(ctx, ct, "-D", "-p", "udp", "--orig-port-src", fmt.Sprint(port)); err != nil {
				t.Fatalf("conntrack -D: %v: %s", err, out)
			}
			time.Sleep(200 * time.Millisecond) // the event is read
			recs := stop()
			tot, cnt := sum(recs, func(r *flow.Record) bool { return r.Key.Proto == flow.ProtoUDP && r.Key.SrcPort == port })
			if noEvents {
				if cnt != 0 {
					t.Errorf("without events a connection destroyed between polls was reported: %+v", tot)
				}
				return
			}
			want, wantR := 4*ipUDP(false, 64), 4*ipUDP(false, 32)
			if cnt != 1 || tot.Packets != 4 || tot.RevPackets != 4 || tot.Bytes != want || tot.RevBytes != wantR || tot.EndReason != flow.ReasonEnd {
				t.Errorf("%d records, totals %d/%d pkts %d/%d bytes reason %s; want 1 record, 4/4, %d/%d, end",
					cnt, tot.Packets, tot.RevPackets, tot.Bytes, tot.RevBytes, tot.EndReason, want, wantR)
			}
			if tot.NATed() {
				t.Errorf("no NAT here, yet post-NAT %+v", tot.PostNAT)
			}
		})
	}
}

// TestSourceEventOverrun: with an event buffer of a few kilobytes, 3,000
// new UDP flows overrun it; each overrun makes the source dump the table
// at once, and at the end every flow's packets and IP bytes are exact all
// the same.
func TestSourceEventOverrun(t *testing.T) {
	pr := trackedPair(t)
	s, stop := runSource(t, pr.B, SourceConfig{PollInterval: time.Hour, EventBuf: 4096,
		Store: StoreConfig{ActiveTimeout: time.Hour, IdleTimeout: time.Hour}})
	want := testhost.ManyUDP(t, pr.A, pr.B, false, 7100, 20000, 3000)
	time.Sleep(200 * time.Millisecond)
	recs := stop()
	got := map[uint16][2]uint64{}
	for _, r := range recs {
		if r.Key.Proto == flow.ProtoUDP && r.Key.DstPort == 7100 {
			g := got[r.Key.SrcPort]
			got[r.Key.SrcPort] = [2]uint64{g[0] + r.Packets, g[1] + r.Bytes}
		}
	}
	bad := 0
	for port, w := range want {
		if got[port] != w {
			if bad++; bad <= 5 {
				t.Errorf("flow from port %d: %v, want %v", port, got[port], w)
			}
		}
	}
	st := s.Stats()
	if bad > 0 || len(got) != len(want) {
		t.Errorf("%d of %d flows wrong, %d reported; stats %+v", bad, len(want), len(got), st)
	}
	if st.Events.ENOBUFS == 0 || st.Resyncs == 0 {
		t.Errorf("no overrun: stats %+v (the test needs the event buffer to overflow)", st)
	}
}
