//go:build linux

package testhost

import (
	"bufio"
	"bytes"
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
)

// Need returns the path of a Debian tool, skipping the test when it is
// missing, or failing it under CI, where scripts/deps.sh installed it.
func Need(t testing.TB, tool, pkg string) string {
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

// Dumpcap captures the TCP packets on h's interface into a pcap file with
// libpcap, as an independent witness of what a weir source saw there;
// stop ends the capture and returns the file.
func Dumpcap(t testing.TB, h *Host) (stop func() string) {
	t.Helper()
	bin := Need(t, "dumpcap", "wireshark-common")
	file := filepath.Join(t.TempDir(), "witness.pcap")
	cmd := exec.Command("ip", "netns", "exec", h.Name, bin, "-q", "-i", h.Iface, "-B", "32", "-P", "-w", file, "-f", "tcp")
	stderr := &SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	// dumpcap says "Capturing on" once its socket is bound and filtered.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(stderr.String(), "Capturing on"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("dumpcap did not start: %s", stderr.String())
		}
	}
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

// TsharkTCP reduces a pcap to packets and IP bytes per TCP connection
// (named by its server port) and direction, with tshark's own dissector.
// Packets of other ports are left out.
func TsharkTCP(t testing.TB, file string, serverPorts map[uint16]bool) map[uint16]*DirCounts {
	t.Helper()
	bin := Need(t, "tshark", "tshark")
	out, err := exec.Command(bin, "-n", "-r", file, "-T", "fields", "-E", "separator=,",
		"-e", "tcp.srcport", "-e", "tcp.dstport", "-e", "ip.len", "-e", "ipv6.plen").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	m := map[uint16]*DirCounts{}
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
			c = &DirCounts{}
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

// CheckTCP compares a source's TCP connections (got, by server port) with
// the witness's (want, from TsharkTCP): the same conns connections, each
// with the same packets and bytes both ways, in one record that ended
// with reason end.
func CheckTCP(t testing.TB, want, got map[uint16]*DirCounts, conns int) {
	t.Helper()
	if len(want) != conns || len(got) != conns {
		var missing []uint16
		for p := range got {
			if want[p] == nil {
				missing = append(missing, p)
			}
		}
		slices.Sort(missing)
		t.Fatalf("tshark saw %d connections, weir %d; want %d (tshark lacks %v)", len(want), len(got), conns, missing)
	}
	bad := 0
	for port, w := range want {
		g := got[port]
		if g == nil || g.Pkts != w.Pkts || g.Bytes != w.Bytes || g.RPkts != w.RPkts || g.RBytes != w.RBytes ||
			g.Records != 1 || g.Reasons[flow.ReasonEnd] != 1 {
			if bad++; bad <= 5 {
				if g == nil {
					t.Errorf("port %d: weir has no record; tshark %d/%d and %d/%d", port, w.Pkts, w.Bytes, w.RPkts, w.RBytes)
					continue
				}
				t.Errorf("port %d: weir %d/%d and %d/%d in %d records %v; tshark %d/%d and %d/%d",
					port, g.Pkts, g.Bytes, g.RPkts, g.RBytes, g.Records, g.Reasons, w.Pkts, w.Bytes, w.RPkts, w.RBytes)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d connections differ", bad, conns)
	}
}
