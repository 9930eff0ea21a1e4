//go:build linux

package testhost

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// nsInode returns the inode of a namespace file (two paths name the same
// namespace exactly when their inodes match).
func nsInode(t testing.TB, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func threadNS() string { return fmt.Sprintf("/proc/self/task/%d/ns/net", syscall.Gettid()) }

// ipOut runs ip in the root namespace (read-only queries only).
func ipOut(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(ipBin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
	return string(out)
}

func listed(t testing.TB, name string) bool {
	for _, f := range strings.Fields(ipOut(t, "netns", "list")) {
		if f == name {
			return true
		}
	}
	return false
}

func TestNewPairTraffic(t *testing.T) {
	Skip(t)
	p := NewPair(t)
	for _, h := range []*Host{p.A, p.B} {
		if !listed(t, h.Name) {
			t.Fatalf("namespace %s not in ip netns list", h.Name)
		}
		// The veth exists in the host's namespace and not in the root one.
		if err := h.Do(func() error { _, err := net.InterfaceByName(h.Iface); return err }); err != nil {
			t.Errorf("%s: %s missing inside the namespace: %v", h.Name, h.Iface, err)
		}
		if _, err := net.InterfaceByName(h.Iface); err == nil {
			t.Errorf("%s visible in the root namespace", h.Iface)
		}
		out, err := h.Exec(context.Background(), "ip", "-o", "addr", "show", "dev", h.Iface)
		if err != nil {
			t.Fatalf("Exec: %v: %s", err, out)
		}
		for _, a := range []string{fmt.Sprintf("inet %s/%d ", h.Addr4, Bits4), fmt.Sprintf("inet6 %s/%d ", h.Addr6, Bits6)} {
			if !strings.Contains(string(out), a) {
				t.Errorf("%s: %q not in\n%s", h.Name, a, out)
			}
		}
		if strings.Contains(string(out), "tentative") {
			t.Errorf("%s: tentative address after NewPair:\n%s", h.Name, out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, v6 := range []bool{false, true} {
		for _, c := range []struct {
			name        string
			src, dst    *Host
			count, size int
		}{
			{"a-to-b", p.A, p.B, 1000, 100},
			{"b-to-a", p.B, p.A, 1000, 0},      // empty datagrams count too
			{"fragmented", p.A, p.B, 50, 9000}, // bigger than the 1500 MTU: IP fragments
		} {
			sent, rcvd, err := SendUDP(ctx, c.src, c.dst, v6, 4000, c.count, c.size)
			if err != nil || sent != c.count || rcvd != c.count {
				t.Errorf("v6=%v %s: SendUDP sent=%d received=%d err=%v, want %d, %d, nil",
					v6, c.name, sent, rcvd, err, c.count, c.count)
			}
		}
		total := 3<<20 + 7 // not a multiple of the write size: the last write is short
		n, err := TCPTransfer(ctx, p.A, p.B, v6, 5000, total, 16000)
		if err != nil || n != total {
			t.Errorf("v6=%v: TCPTransfer received=%d err=%v, want %d", v6, n, err, total)
		}
		n, err = TCPTransfer(ctx, p.B, p.A, v6, 0, 0, 1) // empty connection, free port
		if err != nil || n != 0 {
			t.Errorf("v6=%v: empty TCPTransfer received=%d err=%v", v6, n, err)
		}
	}
}

// Sockets made by SendUDP's receiver live in dst's namespace: nothing is
// listening on dst's address from the root namespace, where it does not exist.
func TestAddressesOnlyInNamespaces(t *testing.T) {
	Skip(t)
	p := NewPair(t)
	for _, a := range []string{p.A.Addr4.String(), "[" + p.B.Addr6.String() + "]"} {
		c, err := net.ListenPacket("udp", a+":0")
		if err == nil {
			c.Close()
			t.Errorf("%s is bindable in the root namespace", a)
		}
	}
}

func TestDo(t *testing.T) {
	Skip(t)
	p := NewPair(t)
	runtime.LockOSThread() // so that threadNS below names this goroutine's thread
	defer runtime.UnlockOSThread()
	root := nsInode(t, threadNS())
	want := nsInode(t, netnsDir+"/"+p.A.Name)
	if root == want {
		t.Fatal("root and test namespace have the same inode")
	}
	for i := range 3 { // the thread is restored and reusable
		var in uint64
		if err := p.A.Do(func() error { in = nsInode(t, threadNS()); return nil }); err != nil {
			t.Fatal(err)
		}
		if in != want {
			t.Errorf("round %d: Do ran in namespace inode %d, want %d", i, in, want)
		}
	}
	if got := nsInode(t, threadNS()); got != root {
		t.Errorf("caller's thread moved to namespace inode %d, want %d", got, root)
	}
	sentinel := errors.New("sentinel")
	if err := p.B.Do(func() error { return sentinel }); err != sentinel {
		t.Errorf("Do returned %v, want fn's error", err)
	}
	if err := p.B.Do(func() error { runtime.Goexit(); return nil }); err == nil {
		t.Error("Do after runtime.Goexit in fn returned nil")
	}
	func() {
		defer func() {
			if v := recover(); v == nil || !strings.Contains(fmt.Sprint(v), "boom") {
				t.Errorf("recovered %v, want the panic from fn", v)
			}
		}()
		_ = p.B.Do(func() error { panic("boom") })
		t.Error("Do did not re-raise fn's panic")
	}()
}

// After a subtest's cleanup the namespaces and veth ends are gone,
// including when the subtest failed half way through setup.
func TestCleanup(t *testing.T) {
	Skip(t)
	var p *Pair
	t.Run("pair", func(t *testing.T) {
		p = NewPair(t)
		if !listed(t, p.A.Name) || !listed(t, p.B.Name) {
			t.Fatal("namespaces not listed while the test runs")
		}
		if !strings.Contains(ipOut(t, "-n", p.A.Name, "-o", "link"), p.A.Iface+"@") {
			t.Fatalf("%s not in %s", p.A.Iface, p.A.Name)
		}
	})
	if p == nil {
		t.Fatal("subtest did not create a pair")
	}
	links := ipOut(t, "-o", "link")
	for _, h := range []*Host{p.A, p.B} {
		if listed(t, h.Name) {
			t.Errorf("%s still listed after cleanup", h.Name)
		}
		if _, err := os.Stat(netnsDir + "/" + h.Name); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s/%s: %v, want not exist", netnsDir, h.Name, err)
		}
		if strings.Contains(links, h.Iface) {
			t.Errorf("%s in the root namespace after cleanup", h.Iface)
		}
	}

	// Partial setup: only the first namespace exists.
	st := &pairState{nsA: fmt.Sprintf("%s%d-%d-partial", Prefix, os.Getpid(), selfStart), haveA: true}
	ctx := context.Background()
	if err := runIP(ctx, "netns", "add", st.nsA); err != nil {
		t.Fatal(err)
	}
	if err := st.destroy(); err != nil {
		t.Errorf("destroy of a partial pair: %v", err)
	}
	if listed(t, st.nsA) {
		t.Errorf("%s still listed", st.nsA)
		_ = runIP(ctx, "netns", "del", st.nsA)
	}
	if err := st.destroy(); err != nil { // a second destroy is a no-op
		t.Errorf("second destroy: %v", err)
	}
}

// Namespaces whose creator is gone are swept; live ones are kept.
func TestSweepStale(t *testing.T) {
	Skip(t)
	p := NewPair(t) // ours: must survive
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stale := []string{
		fmt.Sprintf("%s%d-%d-0a", Prefix, dead.Process.Pid, selfStart),  // creator exited
		fmt.Sprintf("%s%d-%d-0a", Prefix, os.Getpid(), selfStart+12345), // our pid, reused
	}
	for _, n := range stale {
		if err := runIP(ctx, "netns", "add", n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if listed(t, n) {
				_ = runIP(ctx, "netns", "del", n)
			}
		})
	}
	gone := sweepStale()
	for _, n := range stale {
		if listed(t, n) {
			t.Errorf("stale %s not swept (swept %v)", n, gone)
		}
	}
	for _, n := range []string{p.A.Name, p.B.Name} {
		if !listed(t, n) {
			t.Errorf("live %s swept", n)
		}
	}
}

func TestParseName(t *testing.T) {
	for _, c := range []struct {
		in    string
		pid   int
		start uint64
		ok    bool
	}{
		{"weirtb-123-456-7a", 123, 456, true},
		{"weirtb-123-456-probe", 123, 456, true},
		{"weirtb-123-456-8hub", 123, 456, true}, // Net hub
		{"weirtb-123-456-8h63", 123, 456, true}, // Net host
		{"weirtb-123-456", 0, 0, false},
		{"weirtb-x-456-1a", 0, 0, false},
		{"weirtb-0-456-1a", 0, 0, false},
		{"other-123-456-7a", 0, 0, false},
	} {
		pid, start, ok := parseName(c.in)
		if pid != c.pid || start != c.start || ok != c.ok {
			t.Errorf("parseName(%q) = %d, %d, %v; want %d, %d, %v", c.in, pid, start, ok, c.pid, c.start, c.ok)
		}
	}
}

// Parallel pairs get distinct names and subnets, and traffic stays inside each.
func TestParallelPairs(t *testing.T) {
	Skip(t)
	var mu sync.Mutex
	seen := map[string]bool{}
	for i := range 3 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			p := NewPair(t)
			mu.Lock()
			for _, k := range []string{p.A.Name, p.B.Name, p.A.Iface, p.B.Iface, p.A.Addr4.String(), p.A.Addr6.String()} {
				if seen[k] {
					t.Errorf("%s used by two pairs", k)
				}
				seen[k] = true
			}
			mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			sent, rcvd, err := SendUDP(ctx, p.A, p.B, i%2 == 1, 7000, 300, 200)
			if err != nil || sent != 300 || rcvd != 300 {
				t.Errorf("SendUDP sent=%d received=%d err=%v, want 300, 300", sent, rcvd, err)
			}
		})
	}
}

// A cancelled or expiring context stops the driver promptly.
func TestDriverContext(t *testing.T) {
	Skip(t)
	p := NewPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if _, _, err := SendUDP(ctx, p.A, p.B, false, 4000, 10, 10); !errors.Is(err, context.Canceled) {
		t.Errorf("SendUDP with cancelled ctx: %v, want context.Canceled", err)
	}
	if _, err := TCPTransfer(ctx, p.A, p.B, true, 4000, 10, 10); err == nil {
		t.Error("TCPTransfer with cancelled ctx succeeded")
	}
	// The largest transfer (16 GiB on 64-bit) takes many seconds: the deadline cuts it.
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	total := int(min(MaxTCPBytes, math.MaxInt))
	n, err := TCPTransfer(ctx, p.A, p.B, false, 4001, total, MaxWriteSize)
	if err == nil || n >= total {
		t.Errorf("TCPTransfer past its deadline: n=%d err=%v", n, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("driver took %v to honour its context", d)
	}
	// The hosts still work afterwards (the sockets above were all closed).
	if sent, rcvd, err := SendUDP(context.Background(), p.A, p.B, false, 4000, 10, 10); err != nil || sent != 10 || rcvd != 10 {
		t.Errorf("SendUDP after cancellations: %d, %d, %v", sent, rcvd, err)
	}
}
