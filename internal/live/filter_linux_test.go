//go:build linux

package live

import (
	"testing"

	"github.com/weir-dev/weir/internal/bpf"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/netdev"
	"github.com/weir-dev/weir/internal/source/afpacket"
	"github.com/weir-dev/weir/internal/testbed"
)

// compileFilter compiles a tcpdump expression for Ethernet links.
func compileFilter(t *testing.T, expr string) func(netdev.Link) ([]afpacket.Instruction, error) {
	t.Helper()
	insns, err := bpf.Compile(expr, bpf.LinkEthernet, 0)
	if err != nil {
		t.Fatalf("compile %q: %v", expr, err)
	}
	prog := make([]afpacket.Instruction, len(insns))
	for i, in := range insns {
		prog[i] = afpacket.Instruction{Op: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	return func(netdev.Link) ([]afpacket.Instruction, error) { return prog, nil }
}

// TestFilter: a filter compiled to classic BPF excludes exactly the flows
// it names, in the kernel (the excluded datagrams never reach a ring).
func TestFilter(t *testing.T) {
	pr := testbed.NewPair(t)
	cfg := testConfig(t, pr.B, pr.B.Iface)
	cfg.Filter = compileFilter(t, "udp and not dst portrange 21050-21099")
	r := startCapture(t, cfg, 1)
	want := testbed.UDPFlows(t, pr.A, pr.B, false, 21000, 200)
	recs := r.stop()
	for p := 21050; p < 21100; p++ {
		delete(want, uint16(p))
	}
	testbed.CheckUDP(t, recs, pr.A, pr.B, false, want)
	for _, rec := range recs {
		if rec.Key.Proto != flow.ProtoUDP {
			t.Fatalf("the filter let through %v", rec.Key)
		}
	}
}
