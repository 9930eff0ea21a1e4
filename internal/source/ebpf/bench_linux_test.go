//go:build linux

package ebpf

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/netdev"
	"github.com/weir-dev/weir/internal/testhost"
)

// BenchmarkKernel measures what the programs cost per packet, in the
// kernel: ns/op is the program's run time over its run count as the
// kernel accounts them (BPF_ENABLE_STATS, kernel.bpf_stats_enabled), not
// the time of the Go loop, which only sends the packets. Ingress: packets
// from A arrive at B's interface; egress: B sends them. flows is the number
// of distinct flows cycled through (64: nearly every packet finds its
// entry; 16384: a new entry per packet until the map holds them all);
// noprealloc uses maps made with BPF_F_NO_PREALLOC.
func BenchmarkKernel(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("eBPF needs root")
	}
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Skipf("BPF_ENABLE_STATS: %v", err)
	}
	defer stats.Close()
	pr := testhost.NewPair(b)
	b.Run("noop", func(b *testing.B) { // the floor: an empty program, as the kernel accounts it
		prog := tcNoop(b)
		ingress(b, pr.B, prog)
		kernelCost(b, prog, rawSender(b, pr.A, pr.B), 1)
	})
	for _, prealloc := range []bool{true, false} {
		for _, dir := range []string{"ingress", "egress"} {
			for _, flows := range []int{64, 16384} {
				name := fmt.Sprintf("%s/flows=%d", dir, flows)
				if !prealloc {
					name += "/noprealloc"
				}
				b.Run(name, func(b *testing.B) {
					from, to := pr.A, pr.B
					if dir == "egress" {
						from, to = pr.B, pr.A
					}
					s := benchSource(b, pr.B, Config{noPrealloc: !prealloc, EvictInterval: time.Hour, Table: flow.Config{IdleTimeout: 2 * time.Hour}})
					if err := s.attach(); err != nil {
						b.Fatal(err)
					}
					kernelCost(b, s.coll.Programs["weir_flow_eth_"+dir], rawSender(b, from, to), flows)
				})
			}
		}
	}
}

// ingress attaches prog with TCX on h's interface, ingress, until b ends.
func ingress(b *testing.B, h *testhost.Host, prog *ebpf.Program) {
	err := h.Do(func() error {
		ifc, err := net.InterfaceByName(h.Iface)
		if err != nil {
			return err
		}
		l, err := link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: prog, Attach: ebpf.AttachTCXIngress})
		if err != nil {
			return err
		}
		b.Cleanup(func() { l.Close() })
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// kernelCost sends b.N packets over flows flows and reports the
// program's kernel run time per run as ns/op.
func kernelCost(b *testing.B, prog *ebpf.Program, send func(uint16), flows int) {
	before, err := prog.Stats()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		send(uint16(20000 + i%flows))
	}
	b.StopTimer()
	after, err := prog.Stats()
	if err != nil {
		b.Fatal(err)
	}
	runs := after.RunCount - before.RunCount
	if runs < uint64(b.N) {
		b.Fatalf("the program ran %d times for %d packets", runs, b.N)
	}
	b.ReportMetric(float64(after.Runtime-before.Runtime)/float64(runs), "ns/op")
	b.ReportMetric(float64(runs)/float64(b.N), "runs/pkt")
}

// benchSource makes a Source on h's interface without running it.
func benchSource(b testing.TB, h *testhost.Host, cfg Config) *Source {
	b.Helper()
	sel, err := netdev.ParseSelector([]string{h.Iface})
	if err != nil {
		b.Fatal(err)
	}
	cfg.Select, cfg.Netns = sel, []Netns{{Do: h.Do}}
	s, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	s.out = discard{} // drained without Run
	b.Cleanup(func() { s.Close() })
	return s
}

// rawSender returns a function that sends one UDP packet of 64 payload
// bytes from `from` to `to`'s port 9 with the given source port, through
// a raw socket (so the source port is free to choose). A socket on `to`
// takes them (and drops what it cannot queue), so no ICMP comes back.
func rawSender(b *testing.B, from, to *testhost.Host) func(sport uint16) {
	b.Helper()
	var sfd, rfd int
	if err := to.Do(func() (err error) {
		if rfd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		return unix.Bind(rfd, &unix.SockaddrInet4{Port: 9, Addr: to.Addr4.As4()})
	}); err != nil {
		b.Fatal(err)
	}
	if err := from.Do(func() (err error) {
		sfd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(sfd); unix.Close(rfd) })
	pkt := make([]byte, 8+64)
	binary.BigEndian.PutUint16(pkt[2:], 9)
	binary.BigEndian.PutUint16(pkt[4:], uint16(len(pkt)))
	dst := &unix.SockaddrInet4{Addr: to.Addr4.As4()}
	return func(sport uint16) {
		binary.BigEndian.PutUint16(pkt[0:], sport) // checksum 0: none (IPv4)
		if err := unix.Sendto(sfd, pkt, 0, dst); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCPU measures what weir costs the host per million packets
// under a fixed, bounded load: b.N UDP packets from A to B (run it with
// -benchtime 1000000x) over 1,000 or 60,000 flows, sent once with no
// programs attached (base) and once with a running Source watching both veth ends
// (drained every second). The process's CPU time (user + system) is read
// around each: the programs run in the sending thread's system time, the
// drains in user time, so the difference is weir's whole cost
// (weir-cpu-ms/Mpkt). A third run with the kernel's BPF stats on (they
// cost ~45 ns a run themselves, so not during the second) gives the
// programs' share (kernel-ms/Mpkt). ns/op is the wall time per packet of
// the second run.
func BenchmarkCPU(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("eBPF needs root")
	}
	pr := testhost.NewPair(b)
	send := rawSender(b, pr.A, pr.B)
	for _, flows := range []int{1000, 60000} {
		b.Run(fmt.Sprintf("flows=%d", flows), func(b *testing.B) { cpuCost(b, pr, send, flows) })
	}
}

// cpuCost is one BenchmarkCPU run over flows flows.
func cpuCost(b *testing.B, pr *testhost.Pair, send func(uint16), flows int) {
	load := func() time.Duration {
		before := cpuTime(b)
		for i := range b.N {
			send(uint16(1024 + i%flows))
		}
		return cpuTime(b) - before
	}
	b.ReportAllocs()
	base := load()
	sel, err := netdev.ParseSelector([]string{pr.A.Iface, pr.B.Iface})
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(Config{Select: sel, EvictInterval: time.Second, Netns: []Netns{{"a", pr.A.Do}, {"b", pr.B.Do}}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, discard{}) }()
	for s.Stats().Ifaces == 0 {
		time.Sleep(time.Millisecond)
	}
	var progs []*ebpf.Program
	for name, p := range s.coll.Programs {
		if strings.HasPrefix(name, "weir_flow_eth_") {
			progs = append(progs, p)
		}
	}
	runtime := func() (d time.Duration) {
		for _, p := range progs {
			st, err := p.Stats()
			if err != nil {
				b.Fatal(err)
			}
			d += st.Runtime
		}
		return d
	}
	b.ResetTimer()
	with := load()
	b.StopTimer()
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatalf("BPF_ENABLE_STATS: %v", err)
	}
	k0 := runtime()
	load()
	kernel := runtime() - k0
	stats.Close()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	st := s.Stats()
	if st.Packets < 4*uint64(b.N) || st.Lost != 0 {
		b.Fatalf("the programs saw %d packets (lost %d) of %d sent twice, at two interfaces", st.Packets, st.Lost, b.N)
	}
	mpkt := float64(b.N) / 1e6
	b.ReportMetric(float64(with-base)/1e6/mpkt, "weir-cpu-ms/Mpkt")
	b.ReportMetric(float64(kernel)/1e6/mpkt, "kernel-ms/Mpkt")
	b.ReportMetric(float64(base)/1e6/mpkt, "base-cpu-ms/Mpkt")
}

// cpuTime is the process's CPU time so far (user + system).
func cpuTime(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkEvict measures one drain of a kernel map holding entries
// flows: the swap (an RCU grace period), batch lookup-and-delete (or
// per-key iterate and delete: perkey) and adding every entry to the flow
// table, as a timer drain does. ns/op is one whole drain.
func BenchmarkEvict(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("eBPF needs root")
	}
	pr := testhost.NewPair(b)
	for _, n := range []int{10_000, 100_000} {
		for _, batch := range []bool{true, false} {
			name := fmt.Sprintf("entries=%dk", n/1000)
			if !batch {
				name += ",perkey" // not a sub-benchmark: entries=100k$ selects the batch drain alone
			}
			b.Run(name, func(b *testing.B) {
				s := benchSource(b, pr.B, Config{MaxFlows: n, Table: flow.Config{MaxFlows: 4 * n, IdleTimeout: time.Hour}})
				if batch && !s.batchOK {
					b.Skip("no batch lookup-and-delete on this kernel")
				}
				s.batchOK = batch
				keys, vals := fillKeys(n)
				var cpu time.Duration
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					cpu += fillAndDrain(b, s, keys, vals)
				}
				b.StopTimer()
				st := s.Stats()
				if st.Evicted[SourceHashmap][ReasonTimer] != uint64(n*b.N) {
					b.Fatalf("drained %d entries, want %d", st.Evicted[SourceHashmap][ReasonTimer], n*b.N)
				}
				b.ReportMetric(float64(st.SwapTime.Nanoseconds())/float64(b.N)/1e6, "swap-ms/op")
				b.ReportMetric(float64((st.EvictTime-st.SwapTime).Nanoseconds())/float64(b.N)/1e6, "drain-ms/op")
				b.ReportMetric(float64(st.BatchTime.Nanoseconds())/float64(b.N)/1e6, "batch-calls-ms/op") // the kernel's part of drain-ms
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/1e6, "cpu-ms/op")
				b.ReportMetric(float64(n), "entries")
			})
		}
	}
}

// fillAndDrain fills the active map (untimed) and drains it (timed). It
// returns the process's CPU time over the drain (every thread: the drain
// runs on two goroutines), which, unlike the wall time, the machine's
// other load does not inflate.
func fillAndDrain(b *testing.B, s *Source, keys []flowFlowKey, vals []flowFlowVal) time.Duration {
	b.StopTimer()
	if _, err := s.maps[s.cur].BatchUpdate(keys, vals, nil); err != nil {
		b.Fatal(err)
	}
	c0 := clockNow(unix.CLOCK_PROCESS_CPUTIME_ID)
	b.StartTimer()
	if err := s.evict(ReasonTimer); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	cpu := clockNow(unix.CLOCK_PROCESS_CPUTIME_ID) - c0
	b.StartTimer()
	return cpu
}

// fillKeys makes n distinct IPv4 UDP flow entries.
func fillKeys(n int) ([]flowFlowKey, []flowFlowVal) {
	keys, vals := make([]flowFlowKey, n), make([]flowFlowVal, n)
	now := uint64(time.Now().UnixNano()) // any time: the table only needs them in order
	for i := range keys {
		k := &keys[i]
		src := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).As16()
		k.Src, k.Dst = src, netip.AddrFrom4([4]byte{10, 255, 0, 1}).As16()
		k.Sport, k.Dport, k.Proto = uint16(1024+i%60000), 53, 17
		vals[i] = flowFlowVal{Pb: 3<<pbShift | 300, FirstNs: now, Ifindex: 1}
	}
	return keys, vals
}

// BenchmarkRSS reports how much a Source with 100,000-entry maps adds to
// its process's resident memory when full maps are drained into its table
// (growth-MB: VmRSS after the drains minus before; the test process's own
// idle RSS is in idle-rss-MB, and weir's idle RSS is measured by make
// bench on the binary). ns/op is one drain.
func BenchmarkRSS(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("eBPF needs root")
	}
	pr := testhost.NewPair(b)
	const n = DefaultMaxFlows
	s := benchSource(b, pr.B, Config{MaxFlows: n, Table: flow.Config{IdleTimeout: time.Hour}})
	keys, vals := fillKeys(n)
	idle := vmRSS(b)
	for b.Loop() {
		fillAndDrain(b, s, keys, vals)
	}
	b.ReportMetric(float64(idle)/(1<<20), "idle-rss-MB")
	b.ReportMetric(float64(vmRSS(b)-idle)/(1<<20), "growth-MB")
}

// vmRSS reads this process's resident set size.
func vmRSS(b *testing.B) uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// discard is a sink that drops every record.
type discard struct{}

func (discard) Write([]flow.Record) error { return nil }
func (discard) Close() error              { return nil }
