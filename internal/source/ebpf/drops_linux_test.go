//go:build linux

package ebpf

import (
	"context"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/testhost"
)

// TestDrops: with Drops on, packets the kernel drops are put on their
// flows with the reason, exactly:
//   - UDP to a port nobody listens on: B's kernel drops each datagram
//     (NO_SOCKET) after both veth ends counted it, so the record has the
//     packets and as many drops;
//   - UDP that an nftables output rule in A drops (NETFILTER_DROP) never
//     reaches an interface: its record has no packets, only drops.
//
// IPv4 and IPv6 alike; the drops show in the per-reason counters too.
func TestDrops(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft is missing (scripts/deps.sh test installs nftables)")
	}
	pr := testhost.NewPair(t)
	const closedPort, deniedPort, n, size = 7001, 7002, 40, 100
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rules := "add table inet weirtest; add chain inet weirtest out { type filter hook output priority 0 ; } ; add rule inet weirtest out udp dport 7002 drop"
	if out, err := pr.A.Exec(ctx, "nft", rules); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
	cfg := Config{Drops: true, Netns: []Netns{{"a", pr.A.Do}, {"b", pr.B.Do}}}
	s, stop := start(t, pr.B, cfg, pr.A.Iface, pr.B.Iface)
	type sent struct {
		v6         bool
		port       uint16 // A's source port
		dport      uint16
		wantPkts   uint64
		wantReason string
	}
	var flows []sent
	for _, v6 := range []bool{false, true} {
		for _, dport := range []uint16{closedPort, deniedPort} {
			port := testhost.SendDatagrams(t, pr.A, netip.AddrPortFrom(pr.B.Addr(v6), dport), n, size)
			f := sent{v6: v6, port: port, dport: dport, wantPkts: n, wantReason: "NO_SOCKET"}
			if dport == deniedPort {
				f.wantPkts, f.wantReason = 0, "NETFILTER_DROP"
			}
			flows = append(flows, f)
		}
	}
	recs := stop()
	for _, f := range flows {
		ip := uint64(20 + 8 + size)
		if f.v6 {
			ip = 40 + 8 + size
		}
		var pkts, bytes, drops, dropBytes uint64
		var reasons []string
		together := false // drops on a record that has packets
		for _, r := range recs {
			k := r.Key
			fwd := k.Src() == pr.A.Addr(f.v6) && k.Dst() == pr.B.Addr(f.v6) && k.SrcPort == f.port && k.DstPort == f.dport
			rev := k.Dst() == pr.A.Addr(f.v6) && k.Src() == pr.B.Addr(f.v6) && k.DstPort == f.port && k.SrcPort == f.dport
			if k.Proto != flow.ProtoUDP || !fwd && !rev {
				continue
			}
			if fwd {
				pkts, bytes = pkts+r.Packets, bytes+r.Bytes
			} else {
				pkts, bytes = pkts+r.RevPackets, bytes+r.RevBytes
			}
			drops, dropBytes = drops+r.DropPackets, dropBytes+r.DropBytes
			if r.DropPackets > 0 {
				reasons = append(reasons, r.DropReason)
				together = together || r.Packets+r.RevPackets > 0
			}
		}
		if pkts != f.wantPkts || bytes != f.wantPkts*ip || drops != n || dropBytes != n*ip {
			t.Errorf("v6 %v to port %d: %d packets %d bytes, %d drops of %d bytes; want %d packets, %d drops of %d bytes each",
				f.v6, f.dport, pkts, bytes, drops, dropBytes, f.wantPkts, n, ip)
		}
		if together != (f.wantPkts > 0) {
			t.Errorf("v6 %v to port %d: drops on the flow's packet record: %v, want %v", f.v6, f.dport, together, f.wantPkts > 0)
		}
		for _, r := range reasons {
			if r != f.wantReason {
				t.Errorf("v6 %v to port %d: drop reason %q, want %s", f.v6, f.dport, r, f.wantReason)
			}
		}
	}
	st := s.Stats()
	if st.DropReasons["NO_SOCKET"] < 2*n || st.DropReasons["NETFILTER_DROP"] < 2*n || st.Drops < 4*n || st.DropsLost != 0 {
		t.Errorf("drop counters: attributed %d, map full %d, unkeyed %d, by reason %v", st.Drops, st.DropsLost, st.DropsUnkeyed, st.DropReasons)
	}
}
