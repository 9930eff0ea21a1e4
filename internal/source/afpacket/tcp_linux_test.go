//go:build linux

package afpacket

import (
	"context"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/testhost"
)

// TestTCPAgainstDumpcap: 200 TCP connections of varied sizes (IPv4 and
// IPv6); weir's per-flow packets and bytes equal those of dumpcap's capture
// of the same interface over the same period, dissected by tshark, and
// every flow ends with reason end.
func TestTCPAgainstDumpcap(t *testing.T) {
	pr := testhost.NewPair(t)
	for _, v6 := range []bool{false, true} {
		name := map[bool]string{false: "ipv4", true: "ipv6"}[v6]
		t.Run(name, func(t *testing.T) {
			const conns, base = 200, 31000
			stopWitness := testhost.Dumpcap(t, pr.B)
			r := startCapture(t, testConfig(t, pr.B, pr.B.Iface), 1)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			ports := map[uint16]bool{}
			for i := range conns {
				total, write := 1+(i*7919)%200000, 1+(i*31)%16384
				if _, err := testhost.TCPTransfer(ctx, pr.A, pr.B, v6, base+i, total, write); err != nil {
					t.Fatalf("connection %d: %v", i, err)
				}
				ports[uint16(base+i)] = true
			}
			// Ended flows reach the sink while capture runs (within a tick
			// or two of their 1s end linger), not only at shutdown.
			waitFor(t, 5*time.Second, func() bool {
				r.out.mu.Lock()
				defer r.out.mu.Unlock()
				return len(testhost.ByDstPort(r.out.recs, flow.ProtoTCP, pr.A.Addr(v6), pr.B.Addr(v6))) == conns
			}, func() string { return "the ended connections' records did not reach the sink before shutdown" })
			file := stopWitness()
			recs := r.stop()
			for _, f := range r.c.Stats().Ifaces {
				if f.Kernel.Drops != 0 {
					t.Fatalf("the kernel dropped %d packets for weir's ring on %s: counts cannot match", f.Kernel.Drops, f.Name)
				}
			}
			want := testhost.TsharkTCP(t, file, ports)
			got := testhost.ByDstPort(recs, flow.ProtoTCP, pr.A.Addr(v6), pr.B.Addr(v6))
			if len(want) != conns || len(got) != conns {
				t.Logf("weir: %+v", r.c.Stats().Ifaces)
			}
			testhost.CheckTCP(t, want, got, conns)
		})
	}
}
