package testhost

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// Ground truth shared by the sources' tests (live capture, eBPF): the
// same traffic and the same expectations, so the sources agree with each
// other too.

// DirCounts are one flow's totals over all its records, in the
// orientation of the test's traffic (initiator first).
type DirCounts struct {
	Pkts, Bytes, RPkts, RBytes uint64
	Records                    int
	Reasons                    map[flow.EndReason]int
	Ifaces                     map[string]bool
}

// ByDstPort sums the records between src and dst (either orientation) per
// destination port of the src → dst direction.
func ByDstPort(recs []flow.Record, proto uint8, src, dst netip.Addr) map[uint16]*DirCounts {
	m := map[uint16]*DirCounts{}
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
			c = &DirCounts{Reasons: map[flow.EndReason]int{}, Ifaces: map[string]bool{}}
			m[port] = c
		}
		c.Pkts += p
		c.Bytes += b
		c.RPkts += rp
		c.RBytes += rb
		c.Records++
		c.Reasons[r.EndReason]++
		c.Ifaces[r.Iface] = true
	}
	return m
}

// UDPFlows sends n flows from a to b (flow i: port base+i, i%5+1
// datagrams of 20+i%300 bytes) and returns the expected packets and IP
// bytes per destination port.
func UDPFlows(t testing.TB, a, b *Host, v6 bool, base, n int) map[uint16][2]uint64 {
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
		sent, recv, err := SendUDP(ctx, a, b, v6, base+i, count, size)
		if err != nil || sent != count || recv != count {
			t.Fatalf("SendUDP flow %d: sent %d received %d of %d: %v", i, sent, recv, count, err)
		}
		want[uint16(base+i)] = [2]uint64{uint64(count), uint64(count * (ipHdr + 8 + size))}
	}
	return want
}

// CheckUDP compares the records with the expected per-flow counts.
func CheckUDP(t testing.TB, recs []flow.Record, a, b *Host, v6 bool, want map[uint16][2]uint64) {
	t.Helper()
	got := ByDstPort(recs, flow.ProtoUDP, a.Addr(v6), b.Addr(v6))
	bad := 0
	for port, w := range want {
		g := got[port]
		if g == nil || g.Pkts != w[0] || g.Bytes != w[1] || g.RPkts != 0 {
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
