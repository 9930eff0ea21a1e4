//go:build linux

package testhost

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const (
	hostIndex = 10  // ifindex of a host's veth end (each host namespace is fresh)
	portIndex = 100 // ifindex of host i's hub-side end is portIndex+i
)

var netSeq atomic.Uint64 // Net address slot counter

// NewNet creates a hub namespace and hosts test hosts joined to it (kind
// Bridge or Router; 0 <= hosts <= MaxHosts), and returns when every link is
// up, every address usable and (Bridge) every bridge port forwarding, so
// the first packet of a test already gets through. See Net for what the
// hub sees and why the Net is otherwise silent, and testhost.go for the
// address plan.
//
// Like NewPair, NewNet skips or fails the test as Skip does when hosts
// cannot be built (a Bridge also needs iproute2's bridge command), fails it
// on a setup error, and registers the cleanup with t.Cleanup before creating
// anything, so every namespace and veth of the Net (hosts added later
// included) is removed after the test, also when setup stops half way or
// the test fails or panics. Leftovers of a killed test binary are swept by
// the next run, as for pairs.
func NewNet(t testing.TB, kind HubKind, hosts int) *Net {
	t.Helper()
	Skip(t)
	if kind == Bridge && bridgeBin == "" {
		skipOrFail(t, "the bridge command (iproute2) was not found")
	}
	n, err := newNet(kind, hosts)
	if err != nil {
		t.Fatalf("testhost: NewNet: %v", err)
	}
	t.Cleanup(func() {
		if err := n.destroy(); err != nil {
			t.Errorf("testhost: cleanup: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := n.build(ctx, hosts); err != nil {
		t.Fatalf("testhost: NewNet: %v", err)
	}
	return n
}

// AddHost joins one more host to n while the test runs, and returns it
// ready for traffic (as NewNet does). On a Bridge every other host gets a
// neighbour entry for it. ctx bounds the setup (at most 30 s either way).
// AddHost may be called from several goroutines; calls run one at a time.
// After a failure the half-made host is removed and the Net is as before
// (on a Bridge, other hosts may keep an unused neighbour entry for it); if
// even the removal fails, the cleanup at the end of the test retries it.
func (n *Net) AddHost(ctx context.Context) (*Host, error) {
	if n == nil || n.Hub == nil {
		return nil, errors.New("testhost: AddHost on a Net not made by NewNet")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, errors.New("testhost: AddHost after the Net was cleaned up")
	}
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	hs, err := n.addHosts(ctx, 1, nil)
	if err != nil {
		return nil, fmt.Errorf("testhost: AddHost: %w", err)
	}
	return hs[0], nil
}

// nsName returns the name of one of n's namespaces (parseName accepts it,
// so sweepStale finds leftovers).
func (n *Net) nsName(suffix string) string {
	return fmt.Sprintf("%s%d-%d-%d%s", Prefix, os.Getpid(), selfStart, n.id, suffix)
}

// createHub makes the hub namespace; a Bridge hub gets its bridge and has
// IPv6 off, a Router hub forwards IPv4 and IPv6. Sysctls are written from a
// thread inside the namespace: /proc/sys/net resolves against it.
func (n *Net) createHub(ctx context.Context) error {
	n.nsList = append(n.nsList, n.Hub.Name) // before creating: cleanup must see it
	if err := runIP(ctx, "netns", "add", n.Hub.Name); err != nil {
		return err
	}
	var sys []sysctl
	if n.Kind == Bridge {
		sys = []sysctl{ // set before any device exists: new devices copy "default"
			{"ipv6/conf/all/disable_ipv6", "1", false}, {"ipv6/conf/default/disable_ipv6", "1", false},
			// Bridged IPv4/IPv6 must not go through netfilter (which may
			// reassemble fragments); the files exist only with br_netfilter.
			{"bridge/bridge-nf-call-iptables", "0", true}, {"bridge/bridge-nf-call-ip6tables", "0", true},
			{"bridge/bridge-nf-call-arptables", "0", true},
		}
	} else {
		sys = append(hostSysctls(), []sysctl{
			{"ipv4/ip_forward", "1", false}, {"ipv6/conf/all/forwarding", "1", false},
			// IPv6 forwarding only needs "all"; devices copy "default", and
			// with forwarding on they would join ff02::2 at creation (before
			// multicast is turned off) and send MLD reports for it.
			{"ipv6/conf/default/forwarding", "0", false},
		}...)
	}
	if err := n.Hub.Do(func() error { return writeSysctls(sys) }); err != nil {
		return err
	}
	if n.Kind != Bridge {
		return nil
	}
	return runBatch(ctx, ipBin, n.Hub.Name, false, []string{
		fmt.Sprintf("link add %s address %s type bridge stp_state 0 mcast_snooping 0", BridgeName, net.HardwareAddr(bridgeMAC[:])),
		// Promiscuous: every forwarded frame is also passed up to (and seen on) the bridge device.
		"link set " + BridgeName + " promisc on up",
	})
}

// sysctl is one /proc/sys/net setting.
type sysctl struct {
	key, val string
	optional bool // a missing file is not an error
}

// hostSysctls are the IPv6 settings of hosts and router hubs, written
// before their veth ends exist: no duplicate address detection, no router
// solicitations.
func hostSysctls() []sysctl {
	return []sysctl{
		{"ipv6/conf/all/disable_ipv6", "0", false}, {"ipv6/conf/default/disable_ipv6", "0", false},
		{"ipv6/conf/all/accept_dad", "0", false}, {"ipv6/conf/default/accept_dad", "0", false},
		{"ipv6/conf/default/router_solicitations", "0", false},
	}
}

// writeSysctls writes settings; it must run inside the target namespace.
func writeSysctls(sys []sysctl) error {
	for _, s := range sys {
		err := os.WriteFile("/proc/sys/net/"+s.key, []byte(s.val), 0)
		if err != nil && !(s.optional && errors.Is(err, os.ErrNotExist)) {
			return err
		}
	}
	return nil
}

// addHosts creates count hosts and joins them to the hub; n.mu is held.
// With from set (count 1) the host is from's namespace, joined by a second
// interface. One ip process per step and per namespace (ip -batch) keeps
// setup fast.
func (n *Net) addHosts(ctx context.Context, count int, from *Host) ([]*Host, error) {
	if count == 0 {
		return nil, nil
	}
	if n.next+count > MaxHosts {
		return nil, fmt.Errorf("net already had %d hosts, %d more exceeds MaxHosts (%d)", n.next, count, MaxHosts)
	}
	pid := os.Getpid()
	hs := make([]*Host, count)
	for j := range hs {
		i := n.next + j
		h := &Host{
			Name:  n.nsName(fmt.Sprintf("h%d", i)),
			Iface: netIfName(pid, n.id, 'h', i),
			owner: n, index: i, hubIf: netIfName(pid, n.id, 'p', i),
		}
		h.path = netnsDir + "/" + h.Name
		if from != nil {
			h.Name, h.path, h.joined = from.Name, from.path, true
		}
		netHost(n.Kind, n.slot, i, h)
		hs[j] = h
	}
	n.next += count // slots of failed hosts are not reused
	if err := n.joinHosts(ctx, hs); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), setupTimeout) // ctx may be why it failed
		defer cancel()
		if rerr := n.remove(rctx, hs, false); rerr != nil {
			err = fmt.Errorf("%w (and removing the new hosts: %v)", err, rerr)
		}
		return nil, err
	}
	n.Hosts = append(n.Hosts, hs...)
	return hs, nil
}

// joinHosts creates the namespaces and veth pairs of hs and configures
// both ends.
func (n *Net) joinHosts(ctx context.Context, hs []*Host) error {
	var cmds []string
	for _, h := range hs {
		if h.joined {
			continue // the namespace is another Net's
		}
		n.nsList = append(n.nsList, h.Name) // before creating: cleanup must see it
		cmds = append(cmds, "netns add "+h.Name)
	}
	if err := runBatch(ctx, ipBin, "", false, cmds); err != nil {
		return err
	}
	for _, h := range hs {
		if h.joined {
			continue
		}
		if err := h.Do(func() error { return writeSysctls(hostSysctls()) }); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
	}
	// Both ends are created inside the namespaces (the root namespace never
	// sees them). The two ends of each pair get different ifindexes: equal
	// ones would make linkwatch rate-limit their carrier changes (up to 1 s).
	cmds = cmds[:0]
	for _, h := range hs {
		n.ports = append(n.ports, h.hubIf)
		index := fmt.Sprintf(" index %d", hostIndex)
		if h.joined { // the namespace's first interface has hostIndex
			index = ""
		}
		cmds = append(cmds, fmt.Sprintf("link add %s%s address %s netns %s type veth peer name %s index %d address %s netns %s",
			h.Iface, index, net.HardwareAddr(h.mac[:]), h.Name, h.hubIf, portIndex+h.index, net.HardwareAddr(h.hubMAC[:]), n.Hub.Name))
	}
	if err := runBatch(ctx, ipBin, "", false, cmds); err != nil {
		return err
	}
	cmds = cmds[:0]
	var fdb []string
	for _, h := range hs {
		p := h.hubIf
		if n.Kind == Bridge {
			cmds = append(cmds, "link set "+p+" master "+BridgeName, "link set "+p+" up")
			fdb = append(fdb, fmt.Sprintf("fdb replace %s dev %s master static", net.HardwareAddr(h.mac[:]), p))
			continue
		}
		cmds = append(cmds, "link set "+p+" arp off multicast off",
			fmt.Sprintf("addr add %s/%d dev %s", h.hub4, h.bits4, p),
			fmt.Sprintf("addr add %s/%d dev %s nodad", h.hub6, h.bits6, p),
			neigh(h.Addr4.String(), h.mac, p), neigh(h.Addr6.String(), h.mac, p),
			"link set "+p+" up")
	}
	if err := runBatch(ctx, ipBin, n.Hub.Name, false, cmds); err != nil {
		return err
	}
	if len(fdb) > 0 { // static entries: the bridge never floods unicast to other ports
		if err := runBatch(ctx, bridgeBin, n.Hub.Name, false, fdb); err != nil {
			return err
		}
	}
	for _, h := range hs {
		cmds = append(cmds[:0], "link set lo up", "link set "+h.Iface+" arp off multicast off",
			fmt.Sprintf("addr add %s/%d dev %s", h.Addr4, h.bits4, h.Iface),
			fmt.Sprintf("addr add %s/%d dev %s nodad", h.Addr6, h.bits6, h.Iface))
		if n.Kind == Bridge {
			for _, o := range append(n.Hosts[:len(n.Hosts):len(n.Hosts)], hs...) {
				if o != h {
					cmds = append(cmds, neigh(o.Addr4.String(), o.mac, h.Iface), neigh(o.Addr6.String(), o.mac, h.Iface))
				}
			}
		} else {
			cmds = append(cmds, neigh(h.hub4.String(), h.hubMAC, h.Iface), neigh(h.hub6.String(), h.hubMAC, h.Iface))
		}
		cmds = append(cmds, "link set "+h.Iface+" up")
		if n.Kind == Router {
			cmds = append(cmds, fmt.Sprintf("route add default via %s dev %s", h.hub4, h.Iface),
				fmt.Sprintf("route add ::/0 via %s dev %s", h.hub6, h.Iface))
		}
		if err := runBatch(ctx, ipBin, h.Name, false, cmds); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
	}
	if n.Kind == Bridge {
		for _, o := range n.Hosts { // existing hosts learn the new ones
			cmds = cmds[:0]
			for _, h := range hs {
				cmds = append(cmds, neigh(h.Addr4.String(), h.mac, o.Iface), neigh(h.Addr6.String(), h.mac, o.Iface))
			}
			if err := runBatch(ctx, ipBin, o.Name, false, cmds); err != nil {
				return fmt.Errorf("%s: %w", o.Name, err)
			}
		}
	}
	return n.waitReady(ctx, hs)
}

// netIfName names host i's veth end on side 'h' (host) or 'p' (hub port):
// at most 15 bytes (IFNAMSIZ-1) = tb + ≤ 7 hex pid digits (pid_max ≤ 2^22)
// + "-" + 2 hex digits of the Net number + side + 2 hex digits of i.
func netIfName(pid int, id uint64, side byte, i int) string {
	return fmt.Sprintf("tb%x-%x%c%x", pid, id%0x100, side, i%MaxHosts)
}

// neigh is the ip batch command for a static neighbour entry.
func neigh(addr string, mac [6]byte, dev string) string {
	return fmt.Sprintf("neigh replace %s lladdr %s dev %s nud permanent", addr, net.HardwareAddr(mac[:]), dev)
}

// waitReady polls, without sending anything, until the veth ends of hs are
// running on both sides (so each peer is up too), their IPv6 addresses (and
// a Router hub's) are no longer tentative and, on a Bridge, their ports are
// forwarding. Bounded by readyTimeout.
func (n *Net) waitReady(ctx context.Context, hs []*Host) error {
	deadline := time.Now().Add(readyTimeout)
	for i := 0; ; i++ {
		why, err := n.notReady(ctx, hs)
		if err != nil || why == "" {
			return err
		}
		if time.Now().After(deadline) || i >= int(readyTimeout/readyPoll) {
			return fmt.Errorf("not ready after %v: %s", readyTimeout, why)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(readyPoll):
		}
	}
}

// notReady returns why hs are not ready yet, or "".
func (n *Net) notReady(ctx context.Context, hs []*Host) (string, error) {
	for _, h := range hs {
		var why string
		err := h.Do(func() (err error) {
			why, err = ifaceNotReady(h.Iface, h.Addr6.String())
			return err
		})
		if err != nil || why != "" {
			return h.Name + ": " + why, err
		}
	}
	var why string
	err := n.Hub.Do(func() error {
		for _, h := range hs {
			addr6 := ""
			if n.Kind == Router {
				addr6 = h.hub6.String()
			}
			w, err := ifaceNotReady(h.hubIf, addr6)
			if err != nil || w != "" {
				why = w
				return err
			}
		}
		return nil
	})
	if err != nil || why != "" {
		return n.Hub.Name + ": " + why, err
	}
	if n.Kind != Bridge {
		return "", nil
	}
	out, err := exec.CommandContext(ctx, bridgeBin, "-n", n.Hub.Name, "link", "show").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("bridge link show: %v: %s", err, out)
	}
	state := map[string]string{} // port name -> STP state
	for line := range strings.SplitSeq(string(out), "\n") {
		f := strings.Fields(line)
		for k := 2; k+1 < len(f); k++ {
			if f[k] == "state" {
				name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
				state[name] = f[k+1]
				break
			}
		}
	}
	for _, h := range hs {
		if s := state[h.hubIf]; s != "forwarding" {
			return fmt.Sprintf("bridge port %s in state %q", h.hubIf, s), nil
		}
	}
	return "", nil
}

// ifaceNotReady runs inside a namespace: it says why interface name is not
// running or, if addr6 is set, why that IPv6 address is not usable yet.
func ifaceNotReady(name, addr6 string) (string, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return "", err
	}
	if ifi.Flags&net.FlagRunning == 0 {
		return name + " not running", nil
	}
	if addr6 == "" {
		return "", nil
	}
	// /proc/thread-self/net is this thread's namespace (/proc/self/net would
	// be the main thread's). Line: address ifindex prefixlen scope flags name.
	b, err := os.ReadFile("/proc/thread-self/net/if_inet6")
	if err != nil {
		return "", err
	}
	want := strings.ReplaceAll(expand6(addr6), ":", "")
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 6 || f[0] != want || f[5] != name {
			continue
		}
		const tentative, dadFailed = 0x40, 0x08 // IFA_F_TENTATIVE, IFA_F_DADFAILED
		var flags uint32
		if _, err := fmt.Sscanf(f[4], "%x", &flags); err != nil {
			return "", fmt.Errorf("if_inet6 flags %q: %v", f[4], err)
		}
		if flags&(tentative|dadFailed) != 0 {
			return fmt.Sprintf("%s on %s tentative (flags %#x)", addr6, name, flags), nil
		}
		return "", nil
	}
	return fmt.Sprintf("%s not on %s yet", addr6, name), nil
}

// expand6 writes an IPv6 address with all 32 hex digits, as if_inet6 does.
func expand6(s string) string {
	ip := net.ParseIP(s).To16()
	if ip == nil {
		return s
	}
	return fmt.Sprintf("%x", []byte(ip))
}

// destroy removes everything n created; it runs once, from t.Cleanup.
func (n *Net) destroy() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	return n.remove(ctx, nil, true)
}

// remove deletes hosts hs, or with all set every host and the hub: first
// the hub-side veth ends (which takes the whole veth pairs with them, at
// once: deleting a namespace frees its devices only when the last socket in
// it is closed), then the namespaces. Only what exists is deleted, so
// remove may run after a setup that stopped half way, and twice.
func (n *Net) remove(ctx context.Context, hs []*Host, all bool) error {
	ports, nss := map[string]bool{}, map[string]bool{}
	if all {
		for _, p := range n.ports {
			ports[p] = true
		}
		for _, s := range n.nsList {
			nss[s] = true
		}
		ports[BridgeName] = true
	}
	for _, h := range hs {
		ports[h.hubIf] = true
		if !h.joined {
			nss[h.Name] = true
		}
	}
	var errs []error
	if _, err := os.Stat(n.Hub.path); err == nil {
		var cmds []string
		err := n.Hub.Do(func() error {
			ifs, err := net.Interfaces()
			for _, ifi := range ifs {
				if ports[ifi.Name] {
					cmds = append(cmds, "link del "+ifi.Name)
				}
			}
			return err
		})
		if err != nil {
			errs = append(errs, err)
		}
		if err := runBatch(ctx, ipBin, n.Hub.Name, true, cmds); err != nil {
			errs = append(errs, err)
		}
	}
	var cmds []string
	for _, s := range n.nsList { // in creation order, hub first
		if _, err := os.Stat(netnsDir + "/" + s); err == nil && nss[s] {
			cmds = append(cmds, "netns del "+s)
		}
	}
	if err := runBatch(ctx, ipBin, "", true, cmds); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// runBatch runs the commands in one process of bin (ip or bridge) reading
// them from stdin ("-batch -"), inside namespace ns unless ns is "". With
// force every command is tried even after one fails.
func runBatch(ctx context.Context, bin, ns string, force bool, cmds []string) error {
	if len(cmds) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, ipTimeout)
	defer cancel()
	var args []string
	if ns != "" {
		args = append(args, "-n", ns)
	}
	if force {
		args = append(args, "-force")
	}
	cmd := exec.CommandContext(ctx, bin, append(args, "-batch", "-")...)
	cmd.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s (commands: %s)", bin, strings.Join(args, " "), err,
			strings.TrimSpace(string(out)), strings.Join(cmds, "; "))
	}
	return nil
}
