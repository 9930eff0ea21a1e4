//go:build linux

package ebpf

import (
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/craft"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/testhost"
)

// TestJiffyClock: a flow's last time, stamped in jiffies by the program,
// comes back as the CLOCK_MONOTONIC time of its packet within a tick,
// read 100 ms later; the first time is exact.
func TestJiffyClock(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("eBPF needs root (CAP_BPF); CI runs this as root")
	}
	pr := testhost.NewPair(t)
	s := benchSource(t, pr.B, Config{EvictInterval: time.Hour, Table: flow.Config{IdleTimeout: 2 * time.Hour}})
	prog := s.coll.Programs["weir_flow_eth_ingress"]
	p := craft.Packet{Link: packet.LinkEthernet, Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: flow.ProtoUDP, SrcPort: 1, DstPort: 2}
	frame := p.Append(nil)
	mono := func() int64 {
		var ts unix.Timespec
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
		return ts.Nano()
	}
	before := mono()
	for range 3 { // the last packet stamps last_j
		if _, err := prog.Run(&ebpf.RunOptions{Data: frame}); err != nil {
			t.Fatal(err)
		}
	}
	after := mono()
	time.Sleep(100 * time.Millisecond)
	if err := s.clock.read(); err != nil {
		t.Fatal(err)
	}
	var k flowFlowKey
	var v flowFlowVal
	if it := s.maps[s.cur].Iterate(); !it.Next(&k, &v) {
		t.Fatalf("no entry: %v", it.Err())
	}
	tick := s.clock.tick
	if tick <= 0 || tick > int64(10*time.Millisecond) {
		t.Fatalf("tick %d ns: not a kernel's (HZ 100 to 1000)", tick)
	}
	if first := int64(v.FirstNs); first < before || first > after {
		t.Errorf("first %d outside the run's %d..%d", first, before, after)
	}
	if last := s.clock.mono(v.LastJ); last < before-tick || last > after+tick {
		t.Errorf("last %d (jiffy %d) outside the run's %d..%d, give or take a tick (%d ns)", last, v.LastJ, before, after, tick)
	}
}
