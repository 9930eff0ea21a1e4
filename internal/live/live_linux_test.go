//go:build linux

package live

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/netdev"
	"github.com/weir-dev/weir/internal/sink"
	"github.com/weir-dev/weir/internal/source/afpacket"
	"github.com/weir-dev/weir/internal/testbed"
)

// collect is a sink keeping every record (behind a Queue: one writer).
type collect struct {
	mu   sync.Mutex
	recs []flow.Record
}

func (c *collect) Write(recs []flow.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = append(c.recs, recs...)
	return nil
}

func (c *collect) Close() error { return nil }

// running is a capture started by startCapture.
type running struct {
	c    *Capture
	q    *sink.Queue
	out  *collect
	stop func() []flow.Record // cancels, waits for Run, returns every record
}

// testConfig captures the interfaces matching specs with short timeouts.
func testConfig(t *testing.T, h *testbed.Host, specs ...string) Config {
	t.Helper()
	sel, err := netdev.ParseSelector(specs)
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		Select: sel,
		Ring:   ringCfg,
		// A second of linger (default 2s): on a starved CI machine the
		// final ACK of a TCP close can trail the last FIN by over 100ms.
		Table: flow.Config{MaxFlows: 20000, IdleTimeout: time.Minute, EndLinger: time.Second},
		Tick:  100 * time.Millisecond,
		Netns: h.Do,
	}
}

// startCapture runs a capture and waits until it has opened opened interfaces.
func startCapture(t *testing.T, cfg Config, opened int) *running {
	t.Helper()
	out := &collect{}
	q := sink.NewQueue("test", out, 4096, 1024)
	c, err := New(cfg, q)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	r := &running{c: c, q: q, out: out}
	var once sync.Once
	r.stop = func() []flow.Record {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("Run did not return 15s after cancel")
			}
			if err := q.Close(); err != nil {
				t.Errorf("queue: %v", err)
			}
		})
		return out.recs
	}
	t.Cleanup(func() { r.stop() })
	waitFor(t, 5*time.Second, func() bool { return c.Stats().Opened >= uint64(opened) },
		func() string { return fmt.Sprintf("%d interfaces opened, want %d", c.Stats().Opened, opened) })
	return r
}

// waitFor polls cond every 20ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dirCounts are one flow's totals over all its records, in the
// orientation of the test's traffic (initiator first).
type dirCounts struct {
	pkts, bytes, rpkts, rbytes uint64
	records                    int
	reasons                    map[flow.EndReason]int
	ifaces                     map[string]bool
}

// byDstPort sums the records between src and dst (either orientation) per
// destination port of the src → dst direction.
func byDstPort(recs []flow.Record, proto uint8, src, dst netip.Addr) map[uint16]*dirCounts {
	m := map[uint16]*dirCounts{}
	for _, r := range recs {
		k := r.Key
		if k.Proto != proto {
			continue
		}
		fwd := k.Src() == src && k.Dst() == dst
		if !fwd && !(k.Src() == dst && k.Dst() == src) {
			continue
		}
		port := k.DstPort
		p, b, rp, rb := r.Packets, r.Bytes, r.RevPackets, r.RevBytes
		if !fwd {
			port, p, b, rp, rb = k.SrcPort, rp, rb, p, b
		}
		c := m[port]
		if c == nil {
			c = &dirCounts{reasons: map[flow.EndReason]int{}, ifaces: map[string]bool{}}
			m[port] = c
		}
		c.pkts += p
		c.bytes += b
		c.rpkts += rp
		c.rbytes += rb
		c.records++
		c.reasons[r.EndReason]++
		c.ifaces[r.Iface] = true
	}
	return m
}

// ringCfg is the default ring (64 × 256 KiB per socket): TCP over veth
// moves 64 KiB GSO frames, and a loaded CI machine can leave a worker
// unscheduled for a while; a smaller ring dropped packets there.
var ringCfg = afpacket.Config{BlockSize: 256 << 10, NumBlocks: 64}

// udpFlows sends n flows from a to b (flow i: port base+i, i%5+1
// datagrams of 20+i%300 bytes) and returns the expected packets and IP
// bytes per destination port.
func udpFlows(t *testing.T, a, b *testbed.Host, v6 bool, base, n int) map[uint16][2]uint64 {
	t.Helper()
	ipHdr := 20
	if v6 {
		ipHdr = 40
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	want := map[uint16][2]uint64{}
	for i := range n {
		count, size := i%5+1, 20+i%300
		sent, recv, err := testbed.SendUDP(ctx, a, b, v6, base+i, count, size)
		if err != nil || sent != count || recv != count {
			t.Fatalf("SendUDP flow %d: sent %d received %d of %d: %v", i, sent, recv, count, err)
		}
		want[uint16(base+i)] = [2]uint64{uint64(count), uint64(count * (ipHdr + 8 + size))}
	}
	return want
}

// checkUDP compares the records with the expected per-flow counts.
func checkUDP(t *testing.T, recs []flow.Record, a, b *testbed.Host, v6 bool, want map[uint16][2]uint64) {
	t.Helper()
	got := byDstPort(recs, flow.ProtoUDP, a.Addr(v6), b.Addr(v6))
	bad := 0
	for port, w := range want {
		g := got[port]
		if g == nil || g.pkts != w[0] || g.bytes != w[1] || g.rpkts != 0 {
			if bad++; bad <= 5 {
				t.Errorf("flow to port %d: got %+v, want %d packets %d bytes one way", port, g, w[0], w[1])
			}
		}
	}
	for port := range got {
		if _, ok := want[port]; !ok {
			t.Errorf("unexpected flow to port %d: %+v", port, got[port])
		}
	}
	if bad > 5 {
		t.Errorf("%d of %d flows wrong", bad, len(want))
	}
}

// TestUDPGroundTruth: 1,000 UDP flows of known datagram counts and sizes,
// over IPv4 and IPv6, with one worker and with two (fanout): weir reports
// exactly those packets and IP bytes per flow.
func TestUDPGroundTruth(t *testing.T) {
	pr := testbed.NewPair(t)
	for _, tc := range []struct {
		name    string
		v6      bool
		workers int
		flows   int
	}{{"ipv4", false, 1, 1000}, {"ipv6", true, 1, 1000}, {"ipv4-workers2", false, 2, 1000}, {"ipv6-workers2", true, 2, 300}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, pr.B, pr.B.Iface)
			cfg.Workers = tc.workers
			r := startCapture(t, cfg, 1)
			want := udpFlows(t, pr.A, pr.B, tc.v6, 20000, tc.flows)
			recs := r.stop()
			checkUDP(t, recs, pr.A, pr.B, tc.v6, want)
			st := r.c.Stats()
			if len(st.Ifaces) != 1 || st.Ifaces[0].Kernel.Drops != 0 || st.Ifaces[0].Name != pr.B.Iface {
				t.Errorf("interface stats %+v: want one interface %s, no drops", st.Ifaces, pr.B.Iface)
			}
			if tc.workers > 1 {
				per := map[int]int{}
				for i, w := range r.c.workers {
					w.mu.Lock()
					per[i] = int(w.snap.table.FlowsCreated)
					w.mu.Unlock()
				}
				if per[0] == 0 || per[1] == 0 {
					t.Errorf("flows per worker %v: fanout should spread %d flows over both", per, tc.flows)
				}
			}
		})
	}
}

// TestNamedInterfaceMissing: an interface named explicitly must exist.
func TestNamedInterfaceMissing(t *testing.T) {
	pr := testbed.NewPair(t)
	c, err := New(testConfig(t, pr.B, "nosuchif0"), &collect{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(context.Background()); !errors.Is(err, ErrNoInterface) {
		t.Fatalf("Run: %v, want ErrNoInterface", err)
	}
}

// TestTwoCapturesOneInterface: two captures with two workers each on the
// same interface (as two weir processes would be) each see every flow:
// their fanout groups are distinct (the kernel picks the ids), so they do
// not split the traffic between them.
func TestTwoCapturesOneInterface(t *testing.T) {
	pr := testbed.NewPair(t)
	var rs []*running
	for range 2 {
		cfg := testConfig(t, pr.B, pr.B.Iface)
		cfg.Workers = 2
		rs = append(rs, startCapture(t, cfg, 1))
	}
	want := udpFlows(t, pr.A, pr.B, false, 27000, 200)
	for i, r := range rs {
		recs := r.stop()
		t.Run(fmt.Sprint("capture", i), func(t *testing.T) { checkUDP(t, recs, pr.A, pr.B, false, want) })
	}
}
