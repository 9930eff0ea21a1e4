//go:build linux

package afpacket

import (
	"testing"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/netdev"
	"github.com/weir-dev/weir/internal/pcapfilter"
	"github.com/weir-dev/weir/internal/testhost"
)

// compileFilter compiles a tcpdump expression for Ethernet links.
func compileFilter(t *testing.T, expr string) func(netdev.Link) ([]Instruction, error) {
	t.Helper()
	insns, err := pcapfilter.Compile(expr, pcapfilter.LinkEthernet, 0)
	if err != nil {
		t.Fatalf("compile %q: %v", expr, err)
	}
	prog := make([]Instruction, len(insns))
	for i, in := range insns {
		prog[i] = Instruction{Op: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	return func(netdev.Link) ([]Instruction, error) { return prog, nil }
}

// TestFilter: a filter compiled to classic BPF excludes exactly the flows
// it names, in the kernel (the excluded datagrams never reach a ring).
func TestFilter(t *testing.T) {
	pr := testhost.NewPair(t)
	cfg := testConfig(t, pr.B, pr.B.Iface)
	cfg.Filter = compileFilter(t, "udp and not dst portrange 21050-21099")
	r := startCapture(t, cfg, 1)
	want := testhost.UDPFlows(t, pr.A, pr.B, false, 21000, 200)
	recs := r.stop()
	for p := 21050; p < 21100; p++ {
		delete(want, uint16(p))
	}
	testhost.CheckUDP(t, recs, pr.A, pr.B, false, want)
	for _, rec := range recs {
		if rec.Key.Proto != flow.ProtoUDP {
			t.Fatalf("the filter let through %v", rec.Key)
		}
	}
}
