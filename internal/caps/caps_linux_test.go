//go:build linux

package caps

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/weir-dev/weir/internal/source/afpacket"
	"github.com/weir-dev/weir/internal/source/conntrack"
)

// The tests run their checks in a child: this package's test binary built
// without cgo (AllThreadsSyscall needs that; 'go test -race' links cgo),
// started with WEIR_CAPS_CHILD naming the check. A child drops its
// capabilities for good, so the parent's stay.

var (
	childOnce sync.Once
	childBin  string
	childErr  error
)

// child runs check in a child process as root and returns its output; the
// test is skipped when not root, outside CI.
func child(t *testing.T, check string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "" {
			t.Skip("dropping capabilities needs root (runs in CI)")
		}
		t.Fatal("CI runs as root")
	}
	childOnce.Do(func() {
		dir, err := os.MkdirTemp("", "weir-caps-")
		if err != nil {
			childErr = err
			return
		}
		childBin = filepath.Join(dir, "caps.test")
		build := exec.Command("go", "test", "-c", "-o", childBin, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			childErr = fmt.Errorf("go test -c: %v\n%s", err, out)
		}
	})
	if childErr != nil {
		t.Fatal(childErr)
	}
	cmd := exec.Command(childBin, "-test.run=^TestChild$", "-test.v")
	cmd.Env = append(os.Environ(), "WEIR_CAPS_CHILD="+check)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child %s: %v\n%s", check, err, out)
	}
	return string(out)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if childBin != "" {
		os.RemoveAll(filepath.Dir(childBin))
	}
	os.Exit(code)
}

// TestChild is the child's side: it runs the check WEIR_CAPS_CHILD names
// and reports with t.Errorf; outside a child it does nothing.
func TestChild(t *testing.T) {
	check := os.Getenv("WEIR_CAPS_CHILD")
	if check == "" {
		return
	}
	switch check {
	case "threads":
		childThreads(t)
	case "afpacket":
		childAFPacket(t)
	case "conntrack":
		childConntrack(t)
	default:
		t.Fatalf("unknown check %q", check)
	}
	fmt.Println("CHILD-OK")
}

// childThreads: goroutines locked to eight threads exist before the drop;
// afterwards each thread (read on itself with capget, and in
// /proc/self/task) has only cap_net_raw, in every set, no ambient
// capabilities and no_new_privs.
func childThreads(t *testing.T) {
	before, err := Current()
	if err != nil || !before.Permitted.Has(SysAdmin) || !before.Bounding.Has(SysAdmin) {
		t.Fatalf("before: %+v, %v; want root's capabilities", before, err)
	}
	const n = 8
	ready, dropped, done, release := make(chan struct{}), make(chan struct{}), make(chan State, n), make(chan struct{})
	defer close(release)
	for range n {
		go func() {
			runtime.LockOSThread() // a thread of its own, parked while Drop runs
			ready <- struct{}{}
			<-dropped
			st, err := Current()
			if err != nil {
				t.Error(err)
			}
			done <- st
			<-release // keep the thread until /proc was read
		}()
	}
	for range n {
		<-ready
	}
	res, err := Drop(Of(NetRaw))
	close(dropped)
	if err != nil || res.Kept != Of(NetRaw) || !res.Dropped.Has(SysAdmin) || !res.Bounding {
		t.Fatalf("Drop: %+v, %v", res, err)
	}
	want := State{Effective: Of(NetRaw), Permitted: Of(NetRaw), Bounding: Of(NetRaw)}
	for range n {
		if st := <-done; st != want {
			t.Errorf("a locked thread has %+v, want %+v", st, want)
		}
	}
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	if len(tasks) < n+1 {
		t.Errorf("%d threads, want at least %d", len(tasks), n+1)
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		for _, field := range []string{"CapEff", "CapPrm", "CapBnd"} {
			if v := statusField(string(b), field); v != "0000000000002000" {
				t.Errorf("%s: %s %s, want only cap_net_raw", f, field, v)
			}
		}
		if statusField(string(b), "CapAmb") != "0000000000000000" || statusField(string(b), "CapInh") != "0000000000000000" || statusField(string(b), "NoNewPrivs") != "1" {
			t.Errorf("%s: ambient, inheritable or no_new_privs not as dropped:\n%s", f, b)
		}
	}
	// Nothing left to drop: a no-op; a capability not held stays unheld.
	if res, err := Drop(Of(NetRaw, SysAdmin)); err != nil || res.Kept != Of(NetRaw) || res.Dropped != 0 {
		t.Errorf("second Drop: %+v, %v", res, err)
	}
	if _, _, e := syscall.RawSyscall(unix.SYS_SETUID, 1, 0, 0); e == 0 {
		t.Error("setuid(1) worked after cap_setuid was dropped")
	}
}

func statusField(status, name string) string {
	for _, l := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// childAFPacket: the AF_PACKET source keeps cap_net_raw because opening a
// socket needs it (an interface that appears later gets one): without it
// socket(AF_PACKET) fails, with it alone a full ring with a kernel filter
// and a fanout group opens.
func childAFPacket(t *testing.T) {
	if _, err := Drop(Of(NetRaw, NetAdmin)); err != nil {
		t.Fatal(err)
	}
	cfg := afpacket.RingConfig{Iface: "lo", BlockSize: 1 << 16, NumBlocks: 4, Filter: []afpacket.Instruction{{Op: 0x6, K: 0xffff}},
		Fanout: &afpacket.Fanout{Mode: afpacket.FanoutHash | afpacket.FanoutFlagUniqueID}}
	s, err := afpacket.Open(cfg)
	if err != nil {
		t.Fatalf("with cap_net_raw and cap_net_admin: %v", err)
	}
	s.Close()
	if _, err := Drop(Of(NetRaw)); err != nil {
		t.Fatal(err)
	}
	s, err = afpacket.Open(cfg)
	if err != nil {
		t.Fatalf("with cap_net_raw alone: %v", err)
	}
	s.Close()
	if _, err := Drop(0); err != nil {
		t.Fatal(err)
	}
	if fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0); !errors.Is(err, unix.EPERM) {
		unix.Close(fd)
		t.Fatalf("socket(AF_PACKET) without cap_net_raw: %v, want EPERM", err)
	}
}

// childConntrack: the conntrack source keeps cap_net_admin because the
// kernel checks the sender of each dump request, not only the socket's
// opener: a dump on a socket opened before the drop fails without it.
func childConntrack(t *testing.T) {
	s, err := conntrack.Open(conntrack.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dump := func() error { return s.Dump(unix.AF_INET, func(*conntrack.Conn) error { return nil }) }
	if _, err := Drop(Of(NetAdmin)); err != nil {
		t.Fatal(err)
	}
	if err := dump(); err != nil {
		t.Fatalf("dump with cap_net_admin: %v", err)
	}
	if _, err := Drop(0); err != nil {
		t.Fatal(err)
	}
	if err := dump(); !errors.Is(err, unix.EPERM) {
		t.Fatalf("dump without cap_net_admin: %v, want EPERM", err)
	}
}

func TestDropEveryThread(t *testing.T)            { checkChild(t, "threads") }
func TestAFPacketNeedsNetRaw(t *testing.T)        { checkChild(t, "afpacket") }
func TestConntrackDumpNeedsNetAdmin(t *testing.T) { checkChild(t, "conntrack") }

func checkChild(t *testing.T, check string) {
	if out := child(t, check); !strings.Contains(out, "CHILD-OK") || strings.Contains(out, "--- FAIL") {
		t.Fatalf("child %s:\n%s", check, out)
	}
}

// TestCgoRefused: in a binary with cgo (this one, under -race) Drop
// changes nothing and says why; without cgo this test has nothing to check.
func TestCgoRefused(t *testing.T) {
	if os.Getenv("WEIR_CAPS_CHILD") != "" {
		return
	}
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_GET_NO_NEW_PRIVS, 0, 0); e != syscall.ENOTSUP {
		t.Skip("built without cgo: Drop would really drop (the child tests cover it)")
	}
	before, err := Current()
	if err != nil {
		t.Fatal(err)
	}
	if before.Permitted == 0 {
		t.Skip("no capabilities to keep")
	}
	if _, err := Drop(0); !errors.Is(err, ErrCgo) {
		t.Fatalf("Drop in a cgo binary: %v, want ErrCgo", err)
	}
	if after, _ := Current(); after != before {
		t.Fatalf("capabilities changed: %+v → %+v", before, after)
	}
}
