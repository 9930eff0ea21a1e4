//go:build linux

package nflog

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/metrics"
	"github.com/weir-dev/weir/internal/sink"
	"github.com/weir-dev/weir/internal/testhost"
)

// TestSourceDeny runs a Source on two NFLOG groups of host B, whose rules
// drop UDP to two ports (IPv4 and IPv6) and log them with prefixes, and
// checks the records: one per dropped flow, verdict deny, the prefix
// without its trailing space as the rule, B's interface, exact packets
// and IP bytes, nothing counted the other way. A 100-byte prefix is cut
// to MaxPrefixLen, and the cuts show in the metrics and --stats.
func TestSourceDeny(t *testing.T) {
	testhost.Skip(t)
	nft := testhost.Need(t, "nft", "nftables")
	pr := testhost.NewPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	longPrefix := "deny-c-" + strings.Repeat("z", 93) // 100 bytes: more than MaxPrefixLen
	rules := `add table inet weirdeny
add chain inet weirdeny in { type filter hook input priority 0 ; }
add rule inet weirdeny in udp dport 7001 log prefix "deny-a " group 7 drop
add rule inet weirdeny in udp dport 7002 log prefix "deny-b" group 8 drop
add rule inet weirdeny in udp dport 7003 log prefix "` + longPrefix + `" group 8 drop`
	if out, err := pr.B.Exec(ctx, nft, rules); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
	var mu sync.Mutex
	var recs []flow.Record
	s, err := New(SourceConfig{Netns: pr.B.Do, Groups: []uint16{7, 8}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	out := sink.Func(func(b []flow.Record) error {
		mu.Lock()
		recs = append(recs, b...)
		mu.Unlock()
		return nil
	})
	go func() { done <- s.Run(runCtx, out) }()

	type want struct {
		dst      netip.Addr
		dport    uint16
		n, size  int
		rule     string
		sport    uint16
		ipHeader int
	}
	wants := []*want{
		{dst: pr.B.Addr4, dport: 7001, n: 9, size: 200, rule: "deny-a", ipHeader: 20},
		{dst: pr.B.Addr6, dport: 7001, n: 4, size: 1200, rule: "deny-a", ipHeader: 40},
		{dst: pr.B.Addr4, dport: 7002, n: 3, size: 10, rule: "deny-b", ipHeader: 20},
		{dst: pr.B.Addr4, dport: 7003, n: 5, size: 10, rule: longPrefix[:MaxPrefixLen], ipHeader: 20},
	}
	for _, w := range wants {
		w.sport = testhost.SendDatagrams(t, pr.A, netip.AddrPortFrom(w.dst, w.dport), w.n, w.size)
	}
	time.Sleep(300 * time.Millisecond) // the kernel flushes its batch every 100 ms
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(wants) {
		t.Fatalf("%d records, want %d: %+v", len(recs), len(wants), recs)
	}
	for _, w := range wants {
		found := false
		for _, r := range recs {
			if r.Key.Dst() != w.dst || r.Key.DstPort != w.dport || r.Key.SrcPort != w.sport {
				continue
			}
			found = true
			if r.Packets != uint64(w.n) || r.Bytes != uint64(w.n*(w.ipHeader+8+w.size)) || r.RevPackets != 0 ||
				r.Verdict != flow.VerdictDeny || r.Rule != w.rule || r.Iface != pr.B.Iface ||
				r.EndReason != flow.ReasonShutdown || r.Start == 0 || r.End < r.Start || r.Key.Src() != pr.A.Addr(w.ipHeader == 40) {
				t.Errorf("record %+v; want %d packets of %d bytes, rule %q, iface %s", r, w.n, w.ipHeader+8+w.size, w.rule, pr.B.Iface)
			}
		}
		if !found {
			t.Errorf("no record to %s:%d from port %d", w.dst, w.dport, w.sport)
		}
	}
	for _, g := range s.Stats() {
		if g.Socket.ENOBUFS != 0 || g.Aggregator.SeqGaps != 0 || g.Flows != 0 || g.Exported == 0 {
			t.Errorf("group stats %+v", g)
		}
	}
	reg := metrics.NewRegistry()
	if err := reg.Register(s.Collector()); err != nil {
		t.Fatal(err)
	}
	var m, st strings.Builder
	reg.WriteTo(&m)
	for _, l := range []string{`weir_nflog_prefix_cuts_total{group="7"} 0`, `weir_nflog_prefix_cuts_total{group="8"} 5`} {
		if !strings.Contains(m.String(), l+"\n") {
			t.Errorf("metrics lack %s:\n%s", l, m.String())
		}
	}
	s.WriteStats(&st)
	if want := "nflog       group 8: 8 packets in 2 deny-flow records, 0 rejected, 0 lost (gaps 0, overruns 0), 5 prefixes cut to 64 bytes\n"; !strings.Contains(st.String(), want) {
		t.Errorf("--stats:\n%s\nwant the line\n%s", st.String(), want)
	}
}
