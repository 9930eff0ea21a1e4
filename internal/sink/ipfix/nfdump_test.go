package ipfix

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// freeUDPPort returns a UDP port on 127.0.0.1 that was free a moment ago.
func freeUDPPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// udpBound reports whether a UDP socket is bound to 127.0.0.1:port.
func udpBound(port int) bool {
	b, err := os.ReadFile("/proc/net/udp")
	return err == nil && bytes.Contains(b, []byte(fmt.Sprintf(" 0100007F:%04X ", port)))
}

// syncBuffer is a bytes.Buffer a child process's output goroutine and the
// test can use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// records makes n records: IPv4 and IPv6, TCP, UDP and ICMP, both
// directions counted, millisecond times.
func records(n int) []flow.Record {
	out := make([]flow.Record, n)
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).UnixNano()
	for i := range out {
		r := &out[i]
		if i%4 == 3 {
			r.Key.IPVersion = 6
			r.Key.SrcAddr = netip.AddrFrom16([16]byte{0x20, 1, 0xd, 0xb8, 14: byte(i >> 8), 15: byte(i)}).As16()
			r.Key.DstAddr = netip.MustParseAddr("2001:db8::53").As16()
		} else {
			r.Key.IPVersion = 4
			r.Key.SrcAddr = netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}).As16()
			r.Key.DstAddr = netip.AddrFrom4([4]byte{192, 0, 2, byte(1 + i%9)}).As16()
		}
		r.Key.Proto, r.Key.SrcPort, r.Key.DstPort = []uint8{6, 17}[i%2], uint16(30000+i), []uint16{443, 53}[i%2]
		r.Packets, r.Bytes = uint64(1+i%97), uint64(60*(1+i%97)+i)
		r.RevPackets, r.RevBytes = uint64(i%13), uint64(1000*(i%13))
		r.Start = t0 + int64(i)*int64(time.Millisecond)
		r.End = r.Start + int64(1+i%5000)*int64(time.Millisecond)
		r.EndReason, r.Iface = flow.ReasonIdle, "eth0"
	}
	return out
}

// TestNfdump: a burst of 20,000 records exported over UDP to nfcapd (the
// nfdump collector, Debian) with its default socket buffer arrives whole:
// nfdump prints every flow with weir's addresses, ports, protocol, packets
// and bytes both ways (RFC 5103 reverse elements) and first/last times,
// and nfcapd counts no sequence errors.
func TestNfdump(t *testing.T) {
	nfcapd, err1 := exec.LookPath("nfcapd")
	nfdump, err2 := exec.LookPath("nfdump")
	if err1 != nil || err2 != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("nfdump not installed; run scripts/deps.sh: CI must not skip the interop check")
		}
		t.Skip("nfdump not installed; run scripts/deps.sh")
	}
	dir := t.TempDir()
	port := freeUDPPort(t)
	var logs syncBuffer
	cap := exec.Command(nfcapd, "-b", "127.0.0.1", "-p", strconv.Itoa(port), "-w", dir, "-t", "3600")
	cap.Stdout, cap.Stderr = &logs, &logs
	if err := cap.Start(); err != nil {
		t.Fatal(err)
	}
	defer cap.Process.Kill()
	// nfcapd binds shortly after starting: wait until the kernel lists the
	// socket. (Probing by binding the port ourselves could take it from
	// under nfcapd, which then exits.)
	for deadline := time.Now().Add(20 * time.Second); !udpBound(port); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("nfcapd did not bind 127.0.0.1:%d: %s", port, logs.String())
		}
	}
	x, err := New(Config{URL: fmt.Sprintf("ipfix+udp://127.0.0.1:%d", port), Domain: 3})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000
	recs := records(n)
	if err := x.Write(recs); err != nil { // one burst
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	st := x.Stats()
	if st.Records != n || st.SendErrors != 0 {
		t.Fatalf("exporter stats %+v", st)
	}
	time.Sleep(500 * time.Millisecond) // let nfcapd drain its socket
	_ = cap.Process.Signal(syscall.SIGTERM)
	if err := cap.Wait(); err != nil {
		t.Fatalf("nfcapd: %v\n%s", err, logs.String())
	}
	dump := exec.Command(nfdump, "-R", dir, "-q", "-N", "-o", "fmt:%ts|%te|%sa|%da|%sp|%dp|%pr|%ipkt|%ibyt|%opkt|%obyt", "-6")
	dump.Env = append(os.Environ(), "TZ=UTC") // nfdump prints local time
	out, err := dump.Output()
	if err != nil {
		t.Fatalf("nfdump: %v", err)
	}
	// nfcapd checked the IPFIX sequence numbers of every message.
	info, err := exec.Command(nfdump, "-R", dir, "-I").CombinedOutput()
	if err != nil || !bytes.Contains(info, []byte("\nSequence failures: 0\n")) || !strings.Contains(logs.String(), "Sequence Errors: 0,") {
		t.Errorf("nfcapd saw sequence errors (or could not say): %v\n%s\n%s", err, info, logs.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != n {
		t.Fatalf("nfdump printed %d flows, weir exported %d\n%s", len(lines), n, logs.String())
	}
	want := map[string]bool{}
	for i := range recs {
		r := &recs[i]
		src, dst := netip.AddrFrom16(r.Key.SrcAddr), netip.AddrFrom16(r.Key.DstAddr)
		if r.Key.IPVersion == 4 {
			src, dst = src.Unmap(), dst.Unmap()
		}
		ts := func(ns int64) string { return time.Unix(0, ns).UTC().Format("2006-01-02 15:04:05.000") }
		want[fmt.Sprintf("%s|%s|%s|%s|%d|%d|%s|%d|%d|%d|%d", ts(r.Start), ts(r.End), src, dst, r.Key.SrcPort, r.Key.DstPort,
			strconv.Itoa(int(r.Key.Proto)), r.Packets, r.Bytes, r.RevPackets, r.RevBytes)] = true
	}
	bad := 0
	for _, l := range lines {
		f := strings.Split(l, "|")
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		if k := strings.Join(f, "|"); !want[k] {
			if bad++; bad <= 3 {
				t.Errorf("nfdump flow %q is not one weir exported", k)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d flows differ", bad, n)
	}
}
