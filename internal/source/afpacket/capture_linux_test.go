//go:build linux

package afpacket

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/netdev"
	"github.com/weir-dev/weir/internal/sink"
	"github.com/weir-dev/weir/internal/testhost"
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
func testConfig(t *testing.T, h *testhost.Host, specs ...string) Config {
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
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, q) }()
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

// ringCfg is the default ring (64 × 256 KiB per socket): TCP over veth
// moves 64 KiB GSO frames, and a loaded CI machine can leave a worker
// unscheduled for a while; a smaller ring dropped packets there.
var ringCfg = RingConfig{BlockSize: 256 << 10, NumBlocks: 64}

// TestUDPGroundTruth: 1,000 UDP flows of known datagram counts and sizes,
// over IPv4 and IPv6, with one worker and with two (fanout): weir reports
// exactly those packets and IP bytes per flow.
func TestUDPGroundTruth(t *testing.T) {
	pr := testhost.NewPair(t)
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
			want := testhost.UDPFlows(t, pr.A, pr.B, tc.v6, 20000, tc.flows)
			recs := r.stop()
			testhost.CheckUDP(t, recs, pr.A, pr.B, tc.v6, want)
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
	pr := testhost.NewPair(t)
	c, err := New(testConfig(t, pr.B, "nosuchif0"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(context.Background(), &collect{}); !errors.Is(err, ErrNoInterface) {
		t.Fatalf("Run: %v, want ErrNoInterface", err)
	}
}

// TestTwoCapturesOneInterface: two captures with two workers each on the
// same interface (as two weir processes would be) each see every flow:
// their fanout groups are distinct (the kernel picks the ids), so they do
// not split the traffic between them.
func TestTwoCapturesOneInterface(t *testing.T) {
	pr := testhost.NewPair(t)
	var rs []*running
	for range 2 {
		cfg := testConfig(t, pr.B, pr.B.Iface)
		cfg.Workers = 2
		rs = append(rs, startCapture(t, cfg, 1))
	}
	want := testhost.UDPFlows(t, pr.A, pr.B, false, 27000, 200)
	for i, r := range rs {
		recs := r.stop()
		t.Run(fmt.Sprint("capture", i), func(t *testing.T) { testhost.CheckUDP(t, recs, pr.A, pr.B, false, want) })
	}
}
