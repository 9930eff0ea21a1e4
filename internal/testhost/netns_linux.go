//go:build linux

package testhost

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const (
	netnsDir     = "/run/netns"     // where "ip netns add" bind-mounts namespaces (/var/run is a symlink to /run)
	ipTimeout    = 10 * time.Second // one ip command
	setupTimeout = 30 * time.Second // whole NewPair/NewNet setup, one AddHost, and whole cleanup
	readyTimeout = 5 * time.Second  // links up and addresses usable
	readyPoll    = 5 * time.Millisecond
	execTimeout  = 30 * time.Second // Host.Exec when ctx has no deadline
)

var (
	seq       atomic.Uint64 // pair counter, names and addresses
	availOnce sync.Once
	availOK   bool
	availWhy  string
	ipBin     string // path of the ip command, set by Available
	bridgeBin string // path of iproute2's bridge command, set by Available if found
	selfStart uint64 // this process's start time, clock ticks since boot
)

// Available reports whether test hosts can be built here: the process has
// CAP_SYS_ADMIN and CAP_NET_ADMIN, the ip command exists, IPv6 is enabled and
// a network namespace can actually be created and deleted. If not, why says
// what is missing. The answer is computed once per process; the first call
// also removes namespaces left behind by test processes that no longer exist.
func Available() (ok bool, why string) {
	availOnce.Do(func() { availOK, availWhy = probe() })
	return availOK, availWhy
}

func probe() (bool, string) {
	var err error
	if ipBin, err = findTool("ip"); err != nil {
		return false, err.Error()
	}
	bridgeBin, _ = findTool("bridge") // only Bridge Nets need it; NewNet says so
	if err := checkCaps(); err != nil {
		return false, err.Error()
	}
	if _, err := os.Stat("/proc/sys/net/ipv6"); err != nil {
		return false, "IPv6 is not enabled in this kernel (/proc/sys/net/ipv6 missing)"
	}
	if selfStart, err = procStart(os.Getpid()); err != nil {
		return false, err.Error()
	}
	sweepStale()
	name := fmt.Sprintf("%s%d-%d-probe", Prefix, os.Getpid(), selfStart)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := runIP(ctx, "netns", "add", name); err != nil {
		return false, "cannot create a network namespace: " + err.Error()
	}
	if err := runIP(ctx, "netns", "del", name); err != nil {
		return false, "cannot delete a network namespace: " + err.Error()
	}
	return true, ""
}

// findTool locates an iproute2 command (ip, bridge), also in the sbin
// directories that a non-login PATH may lack.
func findTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"} {
		if fi, err := os.Stat(d + name); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return d + name, nil
		}
	}
	return "", fmt.Errorf("the %s command (iproute2) was not found", name)
}

// checkCaps reads the effective capability set from /proc/self/status.
func checkCaps() error {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Errorf("reading capabilities: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		hex, ok := strings.CutPrefix(line, "CapEff:")
		if !ok {
			continue
		}
		caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil {
			return fmt.Errorf("parsing CapEff %q: %v", hex, err)
		}
		const capNetAdmin, capSysAdmin = 12, 21
		var missing []string
		if caps&(1<<capNetAdmin) == 0 {
			missing = append(missing, "CAP_NET_ADMIN")
		}
		if caps&(1<<capSysAdmin) == 0 {
			missing = append(missing, "CAP_SYS_ADMIN")
		}
		if len(missing) > 0 {
			return fmt.Errorf("missing %s (run as root)", strings.Join(missing, " and "))
		}
		return nil
	}
	return errors.New("no CapEff line in /proc/self/status")
}

// procStart returns the start time of process pid (field 22 of
// /proc/PID/stat, clock ticks since boot).
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may contain spaces and parentheses
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 20 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// parseName splits a namespace name made by this package into the pid and
// start time of its creator.
func parseName(name string) (pid int, start uint64, ok bool) {
	rest, ok := strings.CutPrefix(name, Prefix)
	if !ok {
		return 0, 0, false
	}
	f := strings.SplitN(rest, "-", 3)
	if len(f) != 3 {
		return 0, 0, false
	}
	p, err1 := strconv.Atoi(f[0])
	s, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || p <= 0 {
		return 0, 0, false
	}
	return p, s, true
}

// sweepStale deletes namespaces of this package whose creating process is
// gone (no such pid, or the pid now belongs to a process started at another
// time). Best effort: another process may be sweeping at the same time.
// It returns the names it deleted.
func sweepStale() []string {
	ents, err := os.ReadDir(netnsDir)
	if err != nil {
		return nil
	}
	var gone []string
	for i, e := range ents {
		if i >= 10000 { // bound the work whatever the directory holds
			break
		}
		pid, start, ok := parseName(e.Name())
		if !ok {
			continue
		}
		if st, err := procStart(pid); err == nil && st == start {
			continue // creator still running
		}
		ctx, cancel := context.WithTimeout(context.Background(), ipTimeout)
		if runIP(ctx, "netns", "del", e.Name()) == nil {
			gone = append(gone, e.Name())
		}
		cancel()
	}
	return gone
}

// runIP runs the ip command with a per-command timeout.
func runIP(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, ipTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, ipBin, args...)
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// pairState records what NewPair has created so far, for cleanup.
type pairState struct {
	nsA, nsB, ifA string
	haveA, haveB  bool
	haveLink      bool
}

// NewPair creates two network namespaces joined by one veth pair, with an
// IPv4 /30 and an IPv6 /64 (no duplicate address detection, so usable at
// once), loopback and veth up, router solicitations off. It registers the
// cleanup with t.Cleanup before creating anything, so namespaces and veth
// are removed even if the setup, the test, or a panic stops it half way.
// Names are unique per process and call, so parallel tests do not collide.
// NewPair skips or fails the test as Skip does when hosts are unavailable.
//
// The hosts still emit some IPv6 control traffic of their own (neighbour
// discovery, MLD reports): captures should filter by address and port.
func NewPair(t testing.TB) *Pair {
	t.Helper()
	Skip(t)
	n := seq.Add(1) - 1
	pid := os.Getpid()
	nsName := func(side byte) string { return fmt.Sprintf("%s%d-%d-%d%c", Prefix, pid, selfStart, n, side) }
	ifName := func(side byte) string { return fmt.Sprintf("tb%x-%x%c", pid, n%0x10000, side) } // ≤ 15 bytes (IFNAMSIZ-1)
	a4, b4, a6, b6 := pairAddrs(n)
	p := &Pair{
		A: &Host{Name: nsName('a'), Iface: ifName('a'), Addr4: a4, Addr6: a6},
		B: &Host{Name: nsName('b'), Iface: ifName('b'), Addr4: b4, Addr6: b6},
	}
	p.A.path = netnsDir + "/" + p.A.Name
	p.B.path = netnsDir + "/" + p.B.Name
	st := &pairState{nsA: p.A.Name, nsB: p.B.Name, ifA: p.A.Iface}
	t.Cleanup(func() {
		if err := st.destroy(); err != nil {
			t.Errorf("testhost: cleanup: %v", err)
		}
	})
	if err := st.create(p); err != nil {
		t.Fatalf("testhost: NewPair: %v", err)
	}
	return p
}

func (st *pairState) create(p *Pair) error {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := runIP(ctx, "netns", "add", st.nsA); err != nil {
		return err
	}
	st.haveA = true
	if err := runIP(ctx, "netns", "add", st.nsB); err != nil {
		return err
	}
	st.haveB = true
	// Both ends are created inside the namespaces: the host namespace never
	// sees them. Distinct ifindexes (10, 11; each namespace is fresh) make the
	// kernel treat their carrier changes as urgent: with equal ifindexes (both
	// would be 2) linkwatch rate-limits them and a link takes up to 1 s to run.
	if err := runIP(ctx, "link", "add", p.A.Iface, "index", "10", "netns", p.A.Name, "type", "veth",
		"peer", "name", p.B.Iface, "index", "11", "netns", p.B.Name); err != nil {
		return err
	}
	st.haveLink = true
	for _, h := range []*Host{p.A, p.B} {
		if err := h.configure(ctx); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
	}
	for _, h := range []*Host{p.A, p.B} {
		if err := h.waitReady(ctx); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
	}
	return nil
}

// configure sets sysctls, addresses and link state of one host.
func (h *Host) configure(ctx context.Context) error {
	err := h.Do(func() error {
		// /proc/sys/net resolves against the opening thread's namespace.
		for _, s := range []struct{ key, val string }{
			{"all/accept_dad", "0"}, {"default/accept_dad", "0"}, {h.Iface + "/accept_dad", "0"},
			{h.Iface + "/router_solicitations", "0"}, {h.Iface + "/disable_ipv6", "0"},
		} {
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+s.key, []byte(s.val), 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", fmt.Sprintf("%s/%d", h.Addr4, Bits4), "dev", h.Iface},
		{"-6", "addr", "add", fmt.Sprintf("%s/%d", h.Addr6, Bits6), "dev", h.Iface, "nodad"},
		{"link", "set", h.Iface, "up"},
	} {
		if err := runIP(ctx, append([]string{"-n", h.Name}, args...)...); err != nil {
			return err
		}
	}
	return nil
}

// waitReady polls until h's veth is running (its peer is up too) and no
// address on it is tentative, bounded by readyTimeout.
func (h *Host) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(readyTimeout)
	for i := 0; ; i++ {
		var why string
		err := h.Do(func() error {
			ifi, err := net.InterfaceByName(h.Iface)
			if err != nil {
				return err
			}
			if ifi.Flags&net.FlagRunning == 0 {
				why = "link not running"
			}
			return nil
		})
		if err != nil {
			return err
		}
		if why == "" {
			out, err := exec.CommandContext(ctx, ipBin, "-n", h.Name, "-6", "addr", "show", "dev", h.Iface, "tentative").CombinedOutput()
			if err != nil {
				return fmt.Errorf("ip addr show: %v: %s", err, out)
			}
			if len(strings.TrimSpace(string(out))) > 0 {
				why = "IPv6 address tentative"
			}
		}
		if why == "" {
			return nil
		}
		if time.Now().After(deadline) || i >= int(readyTimeout/readyPoll) {
			return fmt.Errorf("%s not ready after %v: %s", h.Iface, readyTimeout, why)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(readyPoll):
		}
	}
}

// destroy deletes the veth explicitly (synchronous; deleting a namespace
// frees its devices only when the last socket in it is closed) and then the
// namespaces. Missing pieces are not errors.
func (st *pairState) destroy() error {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	var errs []error
	if st.haveLink {
		if err := runIP(ctx, "-n", st.nsA, "link", "del", st.ifA); err != nil {
			errs = append(errs, err)
		}
		st.haveLink = false
	}
	if st.haveB {
		if err := runIP(ctx, "netns", "del", st.nsB); err != nil {
			errs = append(errs, err)
		}
		st.haveB = false
	}
	if st.haveA {
		if err := runIP(ctx, "netns", "del", st.nsA); err != nil {
			errs = append(errs, err)
		}
		st.haveA = false
	}
	return errors.Join(errs...)
}

// Do runs fn on an OS thread that is inside h's network namespace, and
// waits for it. Sockets that fn creates belong to h's namespace for their
// whole life and may then be used from any goroutine.
//
// fn runs on a separate goroutine locked to its thread (runtime.LockOSThread),
// so the caller's thread never changes namespace. Goroutines that fn starts
// run on other threads, in the original namespace. fn must report failure by
// returning an error: t.Fatal/t.FailNow inside fn is detected and returned as
// an error. A panic in fn is re-raised in the caller. After fn, the thread is
// switched back to the original namespace (kept open as a file descriptor);
// if that fails the thread is never unlocked, so Go destroys it on exit
// instead of reusing it.
func (h *Host) Do(fn func() error) error {
	if h == nil || h.path == "" {
		return errors.New("testhost: Do on a host not made by NewPair or NewNet")
	}
	type result struct {
		err      error
		panicked bool
		pv       any
		stack    []byte
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		r := result{err: errors.New("testhost: fn called runtime.Goexit (t.FailNow inside Do?)")}
		defer func() { done <- r }()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", syscall.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			r.err = fmt.Errorf("testhost: opening current netns: %w", err)
			return
		}
		defer orig.Close()
		target, err := os.Open(h.path)
		if err != nil {
			runtime.UnlockOSThread()
			r.err = fmt.Errorf("testhost: opening netns %s: %w", h.Name, err)
			return
		}
		err = setns(target)
		target.Close()
		if err != nil {
			runtime.UnlockOSThread()
			r.err = fmt.Errorf("testhost: setns %s: %w", h.Name, err)
			return
		}
		defer func() {
			if setns(orig) == nil {
				runtime.UnlockOSThread()
			} // else: stay locked, the thread dies with this goroutine
		}()
		defer func() {
			if v := recover(); v != nil {
				r = result{panicked: true, pv: v, stack: debug.Stack()}
			}
		}()
		r = result{err: fn()}
	}()
	r := <-done
	if r.panicked {
		panic(fmt.Sprintf("testhost: panic in Do(%s): %v\n%s", h.Name, r.pv, r.stack))
	}
	return r.err
}

// setns moves the calling thread into the network namespace open as f.
func setns(f *os.File) error {
	_, _, e := syscall.RawSyscall(sysSetns, f.Fd(), syscall.CLONE_NEWNET, 0)
	if e != 0 {
		return e
	}
	return nil
}

// Exec runs a command inside h's namespace (ip netns exec) and returns its
// combined output. If ctx has no deadline, a 30 s timeout applies.
func (h *Host) Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	if ipBin == "" {
		return nil, errors.New("testhost: Exec before Available/NewPair/NewNet")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, execTimeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, ipBin, append([]string{"netns", "exec", h.Name, name}, args...)...)
	cmd.WaitDelay = 2 * time.Second // do not hang on pipes held by orphaned children
	return cmd.CombinedOutput()
}
