//go:build linux

package afpacket

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/testhost"
)

// Load of BenchmarkLiveCapture: loadPackets UDP datagrams of loadPayload
// bytes from host A to host B at loadRate datagrams per second, spread over
// the benchmark's flows (source sockets × loadPorts destination ports),
// bounded by loadTime. WEIR_BENCH_PACKETS overrides loadPackets (a longer
// run for a CPU profile).
const (
	loadPackets = 1_000_000
	loadPayload = 64
	loadRate    = 150_000
	loadTime    = 120 * time.Second
	loadPort    = 45000
	loadPorts   = 256 // destination ports, each with a receiver bound in B
)

// BenchmarkLiveCapture runs the weir binary on a test host's interface
// under a fixed, paced UDP load, with nfpcapd and softflowd (Debian's
// peers) capturing the same interface at the same time, and reports each
// one's CPU time (user+system of all the process's threads, during the
// load) per packet sent, weir's kernel drops and packets missed, and the
// ratios. weir/nfpcapd is the goal metric (≤ 0.8).
//
//	go test -run '^$' -bench LiveCapture -benchtime 1x ./internal/source/afpacket
func BenchmarkLiveCapture(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "weir")
	if out, err := exec.Command("go", "build", "-o", bin, "../../../cmd/weir").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	packets := loadPackets
	if s := os.Getenv("WEIR_BENCH_PACKETS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("WEIR_BENCH_PACKETS=%q: want a positive count", s)
		}
		packets = n
	}
	pr := testhost.NewPair(b)
	for _, load := range []struct{ flows, workers int }{{256, 1}, {50_000, 1}, {256, 2}} {
		b.Run(fmt.Sprintf("flows=%d/workers=%d", load.flows, load.workers), func(b *testing.B) {
			var weirNs, drops, missed float64
			peerNs := map[string]float64{}
			for range b.N {
				r := liveLoadRun(b, pr, bin, load.workers, load.flows, packets)
				weirNs += ns(r.weirCPU, r.sent)
				drops += float64(r.drops)
				missed += float64(r.sent) - float64(r.seen)
				for name, cpu := range r.peerCPU {
					peerNs[name] += ns(cpu, r.sent)
				}
			}
			n := float64(b.N)
			b.ReportMetric(weirNs/n, "weir-cpu-ns/pkt")
			b.ReportMetric(drops/n, "weir-kernel-drops")
			b.ReportMetric(missed/n, "weir-missed")
			for name, v := range peerNs {
				b.ReportMetric(v/n, name+"-cpu-ns/pkt")
				b.ReportMetric(weirNs/v, "weir/"+name)
			}
		})
	}
}

func ns(cpu time.Duration, sent uint64) float64 { return float64(cpu.Nanoseconds()) / float64(sent) }

type loadResult struct {
	sent, seen, drops uint64
	weirCPU           time.Duration
	peerCPU           map[string]time.Duration
}

// peers returns the commands of the peer capturers installed, to run in
// test host h on its interface with scratch directory dir. Each exports
// or writes its flows where nothing leaves the test host. WEIR_BENCH_BASE
// names a weir binary to run as one more peer, "base".
func peers(b *testing.B, h *testhost.Host, dir string, maxFlows string) map[string]*exec.Cmd {
	cmds := map[string]*exec.Cmd{}
	if p, err := exec.LookPath("softflowd"); err == nil {
		// Exports to the discard port on the test host's own loopback.
		cmds["softflowd"] = exec.Command("ip", "netns", "exec", h.Name, p, "-i", h.Iface, "-d", "-n", "127.0.0.1:9",
			"-v", "10", "-b", "-6", "-m", "65536", "-p", filepath.Join(dir, "pid"), "-c", filepath.Join(dir, "ctl"), "udp")
	}
	if p, err := exec.LookPath("nfpcapd"); err == nil {
		// Writes nfcapd files into its own scratch directory.
		out := filepath.Join(dir, "nfpcapd")
		if err := os.Mkdir(out, 0o700); err != nil {
			b.Fatal(err)
		}
		cmds["nfpcapd"] = exec.Command("ip", "netns", "exec", h.Name, p, "-i", h.Iface, "-w", out, "udp")
	}
	if base := os.Getenv("WEIR_BENCH_BASE"); base != "" {
		// Another weir binary (say, main's) beside this one: a before/after
		// comparison on the same packets at the same time.
		cmds["base"] = exec.Command("ip", "netns", "exec", h.Name, base, "capture", "-i", h.Iface,
			"-o", "none", "--metrics-addr", "off", "--filter", "udp", "--max-flows", maxFlows, "--data-dir", "off")
		if dir := os.Getenv("WEIR_BENCH_PROFILE"); dir != "" { // its profile beside weir's, for pprof -diff_base
			cmds["base"].Args = append(cmds["base"].Args, "--cpuprofile", filepath.Join(dir, fmt.Sprintf("base-%s-%d.pprof", maxFlows, time.Now().UnixNano())))
		}
	}
	if os.Getenv("CI") != "" && len(cmds) < 2 {
		b.Fatal("softflowd or nfpcapd not installed (scripts/deps.sh bench installs them)")
	}
	return cmds
}

// liveLoadRun starts weir and the peers inside B on B's interface, sends
// the load from A, stops them with SIGTERM and collects their CPU times.
func liveLoadRun(b *testing.B, pr *testhost.Pair, bin string, workers, flows, packets int) loadResult {
	b.Helper()
	maxFlows := strconv.Itoa(max(65536, 2*flows))
	weir := exec.Command("ip", "netns", "exec", pr.B.Name, bin, "capture", "-i", pr.B.Iface,
		"--workers", strconv.Itoa(workers), "-o", "none", "--stats", "--metrics-addr", "off",
		"--filter", "udp", "--max-flows", maxFlows, "--data-dir", "off") // the packet path only, as the peers
	if dir := os.Getenv("WEIR_BENCH_PROFILE"); dir != "" { // a CPU profile per run, for go tool pprof
		weir.Args = append(weir.Args, "--cpuprofile", filepath.Join(dir, fmt.Sprintf("weir-f%d-w%d-%d.pprof", flows, workers, time.Now().UnixNano())))
	}
	werr := &testhost.SyncBuffer{}
	weir.Stderr = werr
	if err := weir.Start(); err != nil {
		b.Fatal(err)
	}
	defer weir.Process.Kill()
	others := peers(b, pr.B, b.TempDir(), maxFlows)
	for name, c := range others {
		if err := c.Start(); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		defer c.Process.Kill()
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(werr.String(), "listening on") {
		if time.Now().After(deadline) {
			b.Fatalf("weir did not start: %s", werr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Second) // the peers have no readiness signal: give libpcap time to open

	// CPU is read from /proc around the load only: start-up (ring and
	// table allocation) and shutdown are fixed costs, not per packet.
	w0 := procCPU(b, weir.Process.Pid)
	p0 := map[string]time.Duration{}
	for name, c := range others {
		p0[name] = procCPU(b, c.Process.Pid)
	}
	b.ResetTimer()
	sent := blast(b, pr, flows, packets)
	time.Sleep(500 * time.Millisecond) // let the rings drain
	b.StopTimer()
	r := loadResult{sent: sent, weirCPU: procCPU(b, weir.Process.Pid) - w0, peerCPU: map[string]time.Duration{}}
	for name, c := range others {
		r.peerCPU[name] = procCPU(b, c.Process.Pid) - p0[name]
	}

	_ = weir.Process.Signal(syscall.SIGTERM)
	if err := weir.Wait(); err != nil {
		b.Fatalf("weir: %v\n%s", err, werr.String())
	}
	r.seen, r.drops = parseIfaceStats(b, werr.String(), pr.B.Iface)
	for _, c := range others {
		_ = c.Process.Signal(syscall.SIGTERM)
		_ = c.Wait()
	}
	return r
}

// blast sends packets datagrams from A to B at loadRate, flow i%flows from
// source socket (i%flows)/loadPorts to port loadPort+(i%flows)%loadPorts;
// receivers bound in B keep B from answering with ICMP port unreachable
// (their buffers overflow silently).
func blast(b *testing.B, pr *testhost.Pair, flows, packets int) uint64 {
	b.Helper()
	var sinks []*net.UDPConn
	defer func() {
		for _, s := range sinks {
			s.Close()
		}
	}()
	err := pr.B.Do(func() error {
		for i := range loadPorts {
			c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: pr.B.Addr4.AsSlice(), Port: loadPort + i})
			if err != nil {
				return err
			}
			sinks = append(sinks, c)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	var sent uint64
	err = pr.A.Do(func() error {
		nsock := (flows + loadPorts - 1) / loadPorts
		fds := make([]int, 0, nsock)
		defer func() {
			for _, fd := range fds {
				syscall.Close(fd)
			}
		}()
		for range nsock {
			fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			fds = append(fds, fd)
			if err := syscall.Bind(fd, &syscall.SockaddrInet4{}); err != nil { // an ephemeral source port per socket
				return err
			}
		}
		dsts := make([]syscall.SockaddrInet4, loadPorts)
		for i := range dsts {
			dsts[i] = syscall.SockaddrInet4{Port: loadPort + i, Addr: pr.B.Addr4.As4()}
		}
		payload := make([]byte, loadPayload)
		start := time.Now()
		stop := start.Add(loadTime)
		for i := 0; i < packets; i++ {
			if i%32 == 0 { // pace: packet i is due at start + i/loadRate
				now := time.Now()
				if now.After(stop) {
					break
				}
				if due := start.Add(time.Duration(int64(i) * int64(time.Second) / loadRate)); due.After(now) {
					time.Sleep(due.Sub(now))
				}
			}
			fl := i % flows
			if err := syscall.Sendto(fds[fl/loadPorts], payload, 0, &dsts[fl%loadPorts]); err != nil {
				if err == syscall.ENOBUFS || err == syscall.EAGAIN || err == syscall.ECONNREFUSED {
					continue // not sent: not counted
				}
				return err
			}
			sent++
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return sent
}

// procCPU returns the CPU time of process pid, all its threads: the sum of
// their on-CPU nanoseconds from /proc/pid/task/*/schedstat (user and
// system, nanosecond resolution, where /proc/pid/stat counts 10 ms ticks).
func procCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		b.Fatalf("/proc/%d/task: %v (%d threads)", pid, err, len(tasks))
	}
	var sum time.Duration
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that exited: its time is gone from both readings' sums
		}
		f := strings.Fields(string(data))
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			b.Fatalf("%s: %q", t, data)
		}
		sum += time.Duration(v)
	}
	return sum
}

var ifaceLine = regexp.MustCompile(`^\s+(\S+)\s+([\d,]+) packets, .*kernel: ([\d,]+) received, ([\d,]+) dropped`)

// parseIfaceStats reads the frames weir read and the kernel's drops for
// iface from weir's --stats report.
func parseIfaceStats(b *testing.B, stats, iface string) (seen, drops uint64) {
	sc := bufio.NewScanner(strings.NewReader(stats))
	for sc.Scan() {
		m := ifaceLine.FindStringSubmatch(sc.Text())
		if m == nil || m[1] != iface {
			continue
		}
		num := func(s string) uint64 { n, _ := strconv.ParseUint(strings.ReplaceAll(s, ",", ""), 10, 64); return n }
		return num(m[2]), num(m[4])
	}
	b.Fatalf("no stats line for %s in:\n%s", iface, stats)
	return 0, 0
}
