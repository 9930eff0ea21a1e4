//go:build linux

package kflow

import (
	"context"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/testbed"
)

// TestTCPGroundTruth is the live-capture source's TCP test with the same
// expectations: 200 TCP connections of varied sizes (IPv4 and IPv6),
// counted in the kernel while the map is drained every 20 ms; each
// connection's packets and IP bytes both ways equal those of dumpcap's
// capture of the same interface over the same period, dissected by
// tshark, in one record that ends with reason end.
func TestTCPGroundTruth(t *testing.T) {
	pr := testbed.NewPair(t)
	for _, v6 := range []bool{false, true} {
		name := map[bool]string{false: "ipv4", true: "ipv6"}[v6]
		t.Run(name, func(t *testing.T) {
			const conns, base = 200, 32000
			stopWitness := testbed.Dumpcap(t, pr.B)
			s, out, stop := startOut(t, pr.B, Config{EvictInterval: 20 * time.Millisecond}, pr.B.Iface)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			ports := map[uint16]bool{}
			began := time.Now().UnixNano()
			for i := range conns {
				total, write := 1+(i*7919)%200000, 1+(i*31)%16384
				if _, err := testbed.TCPTransfer(ctx, pr.A, pr.B, v6, base+i, total, write); err != nil {
					t.Fatalf("connection %d: %v", i, err)
				}
				ports[uint16(base+i)] = true
			}
			ended := time.Now().UnixNano()
			// Ended connections reach the sink while the source runs (a
			// tick or two after their 1 s end linger), not at shutdown.
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				out.mu.Lock()
				n := len(testbed.ByDstPort(out.recs, flow.ProtoTCP, pr.A.Addr(v6), pr.B.Addr(v6)))
				out.mu.Unlock()
				if n == conns {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d ended connections reached the sink before shutdown", n, conns)
				}
			}
			file := stopWitness()
			recs := stop()
			// Times: the first packet's is exact, the last's within a tick
			// (jiffies); both inside the traffic's span, give or take a tick.
			const tick = int64(10 * time.Millisecond) // HZ=100, the coarsest
			for _, r := range recs {
				if r.Key.Proto == flow.ProtoTCP && (r.Start > r.End || r.Start < began-tick || r.End > ended+tick) {
					t.Errorf("record %v: start %d, end %d outside the traffic's %d..%d", r.Key, r.Start, r.End, began, ended)
				}
			}
			if st := s.Stats(); st.Lost != 0 || st.Ring != 0 || st.InsertE2BIG != 0 {
				t.Errorf("stats %+v: no packet should have left the map", st)
			}
			want := testbed.TsharkTCP(t, file, ports)
			got := testbed.ByDstPort(recs, flow.ProtoTCP, pr.A.Addr(v6), pr.B.Addr(v6))
			testbed.CheckTCP(t, want, got, conns)
		})
	}
}
