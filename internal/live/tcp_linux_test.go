//go:build linux

package live

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/testbed"
)

// need returns the path of a Debian tool, skipping (or failing under CI,
// where scripts/deps.sh installed it) when it is missing.
func need(t *testing.T, tool, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not installed (Debian package %s; scripts/deps.sh installs it): CI must not skip the independent capture", tool, pkg)
		}
		t.Skipf("%s not installed (Debian package %s); run scripts/deps.sh", tool, pkg)
	}
	return p
}

// dumpcap captures h's interface into a pcap file with libpcap, as an
// independent witness; stop ends it and returns the file.
func dumpcap(t *testing.T, h *testbed.Host) (stop func() string) {
	t.Helper()
	bin := need(t, "dumpcap", "wireshark-common")
	file := filepath.Join(t.TempDir(), "witness.pcap")
	cmd := exec.Command("ip", "netns", "exec", h.Name, bin, "-q", "-i", h.Iface, "-B", "32", "-P", "-w", file, "-f", "tcp")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	// dumpcap says "Capturing on" once its socket is bound and filtered.
	waitFor(t, 10*time.Second, func() bool { return strings.Contains(stderr.String(), "Capturing on") },
		func() string { return "dumpcap did not start: " + stderr.String() })
	time.Sleep(300 * time.Millisecond) // margin: the message is written just before the capture loop
	return func() string {
		time.Sleep(300 * time.Millisecond) // let the last frames land
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("dumpcap: %v: %s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			t.Fatal("dumpcap did not stop")
		}
		return file
	}
}

// tsharkCounts reduces a pcap to packets and IP bytes per (destination
// port of the connection, direction), with tshark's own dissector.
func tsharkCounts(t *testing.T, file string, serverPorts map[uint16]bool) map[uint16]*testbed.DirCounts {
	t.Helper()
	bin := need(t, "tshark", "tshark")
	out, err := exec.Command(bin, "-n", "-r", file, "-T", "fields", "-E", "separator=,",
		"-e", "tcp.srcport", "-e", "tcp.dstport", "-e", "ip.len", "-e", "ipv6.plen").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	m := map[uint16]*testbed.DirCounts{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if len(f) != 4 {
			t.Fatalf("tshark line %q", sc.Text())
		}
		sp, _ := strconv.Atoi(f[0])
		dp, _ := strconv.Atoi(f[1])
		n := 0
		if f[2] != "" {
			n, _ = strconv.Atoi(f[2])
		} else {
			n, _ = strconv.Atoi(f[3])
			n += 40
		}
		port, fwd := uint16(dp), true
		if serverPorts[uint16(sp)] {
			port, fwd = uint16(sp), false
		}
		if !serverPorts[port] {
			continue
		}
		c := m[port]
		if c == nil {
			c = &testbed.DirCounts{}
			m[port] = c
		}
		if fwd {
			c.Pkts++
			c.Bytes += uint64(n)
		} else {
			c.RPkts++
			c.RBytes += uint64(n)
		}
	}
	return m
}

// TestTCPAgainstDumpcap: 200 TCP connections of varied sizes (IPv4 and
// IPv6); weir's per-flow packets and bytes equal those of dumpcap's capture
// of the same interface over the same period, dissected by tshark, and
// every flow ends with reason end.
func TestTCPAgainstDumpcap(t *testing.T) {
	pr := testbed.NewPair(t)
	for _, v6 := range []bool{false, true} {
		name := map[bool]string{false: "ipv4", true: "ipv6"}[v6]
		t.Run(name, func(t *testing.T) {
			const conns, base = 200, 31000
			stopWitness := dumpcap(t, pr.B)
			r := startCapture(t, testConfig(t, pr.B, pr.B.Iface), 1)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			ports := map[uint16]bool{}
			for i := range conns {
				total, write := 1+(i*7919)%200000, 1+(i*31)%16384
				if _, err := testbed.TCPTransfer(ctx, pr.A, pr.B, v6, base+i, total, write); err != nil {
					t.Fatalf("connection %d: %v", i, err)
				}
				ports[uint16(base+i)] = true
			}
			// Ended flows reach the sink while capture runs (within a tick
			// or two of their 1s end linger), not only at shutdown.
			waitFor(t, 5*time.Second, func() bool {
				r.out.mu.Lock()
				defer r.out.mu.Unlock()
				return len(testbed.ByDstPort(r.out.recs, flow.ProtoTCP, pr.A.Addr(v6), pr.B.Addr(v6))) == conns
			}, func() string { return "the ended connections' records did not reach the sink before shutdown" })
			file := stopWitness()
			recs := r.stop()
			for _, f := range r.c.Stats().Ifaces {
				if f.Kernel.Drops != 0 {
					t.Fatalf("the kernel dropped %d packets for weir's ring on %s: counts cannot match", f.Kernel.Drops, f.Name)
				}
			}
			want := tsharkCounts(t, file, ports)
			got := testbed.ByDstPort(recs, flow.ProtoTCP, pr.A.Addr(v6), pr.B.Addr(v6))
			if len(want) != conns || len(got) != conns {
				var missing []uint16
				for p := range ports {
					if want[p] == nil {
						missing = append(missing, p)
					}
				}
				slices.Sort(missing)
				t.Logf("weir: %+v", r.c.Stats().Ifaces)
				t.Fatalf("tshark saw %d connections, weir %d; want %d (tshark lacks %v)", len(want), len(got), conns, missing)
			}
			bad := 0
			for port, w := range want {
				g := got[port]
				if g.Pkts != w.Pkts || g.Bytes != w.Bytes || g.RPkts != w.RPkts || g.RBytes != w.RBytes ||
					g.Records != 1 || g.Reasons[flow.ReasonEnd] != 1 {
					if bad++; bad <= 5 {
						t.Errorf("port %d: weir %d/%d and %d/%d in %d records %v; tshark %d/%d and %d/%d",
							port, g.Pkts, g.Bytes, g.RPkts, g.RBytes, g.Records, g.Reasons, w.Pkts, w.Bytes, w.RPkts, w.RBytes)
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d connections differ", bad, conns)
			}
		})
	}
}
