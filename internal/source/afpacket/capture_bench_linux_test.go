//go:build linux

package afpacket

import (
	"bufio"
	"bytes"
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
// bytes over loadFlows flows from host A to host B, as fast as one sender
// goroutine can, bounded by loadTime.
const (
	loadPackets = 1_000_000
	loadPayload = 64
	loadFlows   = 256
	loadTime    = 60 * time.Second
	loadPort    = 45000
)

// BenchmarkLiveCapture runs the weir binary on a test host's interface
// under a fixed UDP load, with softflowd (Debian's peer) capturing the same
// interface at the same time, and reports each one's CPU time (user+sys of
// the process, during the load) per packet sent, weir's kernel drops, and
// the ratio.
//
//	go test -run '^$' -bench LiveCapture -benchtime 1x ./internal/source/afpacket
func BenchmarkLiveCapture(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "weir")
	if out, err := exec.Command("go", "build", "-o", bin, "../../../cmd/weir").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	pr := testhost.NewPair(b)
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			var weirNs, peerNs, drops, seen float64
			for range b.N {
				r := liveLoadRun(b, pr, bin, workers)
				weirNs += r.weirCPU.Seconds() * 1e9 / float64(r.sent)
				drops += float64(r.drops)
				seen += float64(r.seen) / float64(r.sent)
				if r.peerCPU > 0 {
					peerNs += r.peerCPU.Seconds() * 1e9 / float64(r.sent)
				}
			}
			n := float64(b.N)
			b.ReportMetric(weirNs/n, "weir-cpu-ns/pkt")
			b.ReportMetric(drops/n, "weir-kernel-drops")
			b.ReportMetric(seen/n, "weir-seen/sent")
			if peerNs > 0 {
				b.ReportMetric(peerNs/n, "softflowd-cpu-ns/pkt")
				b.ReportMetric(peerNs/weirNs, "softflowd/weir")
			}
		})
	}
}

type loadResult struct {
	sent, seen, drops uint64
	weirCPU, peerCPU  time.Duration
}

// liveLoadRun starts weir (and softflowd if installed) inside B on B's
// interface, sends the load from A, stops both with SIGTERM and collects
// their CPU times.
func liveLoadRun(b *testing.B, pr *testhost.Pair, bin string, workers int) loadResult {
	b.Helper()
	weir := exec.Command("ip", "netns", "exec", pr.B.Name, bin, "capture", "-i", pr.B.Iface,
		"--workers", strconv.Itoa(workers), "-o", "none", "--stats", "--metrics-addr", "off",
		"--filter", "udp", "--max-flows", "65536", "--data-dir", "off") // the packet path only, as softflowd
	if dir := os.Getenv("WEIR_BENCH_PROFILE"); dir != "" { // a CPU profile per run, for go tool pprof
		weir.Args = append(weir.Args, "--cpuprofile", filepath.Join(dir, fmt.Sprintf("weir-w%d-%d.pprof", workers, time.Now().UnixNano())))
	}
	werr := &testhost.SyncBuffer{}
	weir.Stderr = werr
	if err := weir.Start(); err != nil {
		b.Fatal(err)
	}
	defer weir.Process.Kill()
	var peer *exec.Cmd
	if p, err := exec.LookPath("softflowd"); err == nil {
		dir := b.TempDir()
		// Exports to the discard port on the test host's own loopback.
		peer = exec.Command("ip", "netns", "exec", pr.B.Name, p, "-i", pr.B.Iface, "-d", "-n", "127.0.0.1:9",
			"-v", "10", "-b", "-6", "-m", "65536", "-p", filepath.Join(dir, "pid"), "-c", filepath.Join(dir, "ctl"), "udp")
		if err := peer.Start(); err != nil {
			b.Fatal(err)
		}
		defer peer.Process.Kill()
	} else if os.Getenv("CI") != "" {
		b.Fatal("softflowd not installed (scripts/deps.sh bench installs it)")
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(werr.String(), "listening on") {
		if time.Now().After(deadline) {
			b.Fatalf("weir did not start: %s", werr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Second) // softflowd has no readiness signal: give libpcap time to open

	// CPU is read from /proc around the load only: start-up (ring and
	// table allocation) and shutdown are fixed costs, not per packet.
	w0, p0 := procCPU(b, weir.Process.Pid), time.Duration(0)
	if peer != nil {
		p0 = procCPU(b, peer.Process.Pid)
	}
	b.ResetTimer()
	sent := blast(b, pr)
	time.Sleep(500 * time.Millisecond) // let the rings drain
	b.StopTimer()
	r := loadResult{sent: sent, weirCPU: procCPU(b, weir.Process.Pid) - w0}
	if peer != nil {
		r.peerCPU = procCPU(b, peer.Process.Pid) - p0
	}

	_ = weir.Process.Signal(syscall.SIGTERM)
	if err := weir.Wait(); err != nil {
		b.Fatalf("weir: %v\n%s", err, werr.String())
	}
	r.seen, r.drops = parseIfaceStats(b, werr.String(), pr.B.Iface)
	if peer != nil {
		_ = peer.Process.Signal(syscall.SIGTERM)
		_ = peer.Wait()
	}
	return r
}

// blast sends the load from A to B; receivers bound in B keep B from
// answering with ICMP port unreachable (their buffers overflow silently).
func blast(b *testing.B, pr *testhost.Pair) uint64 {
	b.Helper()
	var sinks []*net.UDPConn
	defer func() {
		for _, s := range sinks {
			s.Close()
		}
	}()
	err := pr.B.Do(func() error {
		for i := range loadFlows {
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
		conns := make([]syscallConn, 0, loadFlows)
		defer func() {
			for _, c := range conns {
				syscall.Close(c.fd)
			}
		}()
		for i := range loadFlows {
			fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			conns = append(conns, syscallConn{fd})
			sa := &syscall.SockaddrInet4{Port: loadPort + i, Addr: pr.B.Addr4.As4()}
			if err := syscall.Connect(fd, sa); err != nil {
				return err
			}
		}
		payload := make([]byte, loadPayload)
		stop := time.Now().Add(loadTime)
		for i := 0; i < loadPackets; i++ {
			if i%4096 == 0 && time.Now().After(stop) {
				break
			}
			if _, err := syscall.Write(conns[i%loadFlows].fd, payload); err != nil {
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

type syscallConn struct{ fd int }

// procCPU returns the user+system CPU time of process pid, all its threads,
// from /proc/pid/stat (clock ticks of 10 ms).
func procCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name (which may contain spaces): state is
	// field 3, utime 14 and stime 15.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", pid, data)
	}
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ is 100 on Linux
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
