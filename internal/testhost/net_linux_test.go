//go:build linux

package testhost

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// seen is one kind of frame a tap counts: a UDP datagram to port, with
// IPv4 TTL or IPv6 hop limit hop, on interface ifindex.
type seen struct{ ifindex, port, hop int }

// tap counts the frames a packet socket sees on every interface of one
// namespace — what a capture in the hub sees. It is independent of the
// package under test: it only uses the kernel's AF_PACKET socket.
type tap struct {
	fd    int
	ports map[int]bool
	mu    sync.Mutex
	udp   map[seen]int
	other []string // frames that are not test datagrams
	total int
	stop  chan struct{}
	done  chan struct{}
	start time.Time
}

func startTap(t *testing.T, h *Host, ports ...int) *tap {
	t.Helper()
	tp := &tap{ports: map[int]bool{}, udp: map[seen]int{}, stop: make(chan struct{}), done: make(chan struct{}), start: time.Now()}
	for _, p := range ports {
		tp.ports[p] = true
	}
	const ethPAll = 0x0300 // htons(ETH_P_ALL)
	err := h.Do(func() (err error) {
		tp.fd, err = syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, ethPAll)
		return err
	})
	if err != nil {
		t.Fatalf("packet socket: %v", err)
	}
	_ = syscall.SetsockoptInt(tp.fd, syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, 8<<20) // hold every frame of a test
	tv := syscall.NsecToTimeval(int64(20 * time.Millisecond))
	if err := syscall.SetsockoptTimeval(tp.fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	go tp.loop()
	t.Cleanup(func() { tp.close() })
	return tp
}

func (tp *tap) loop() {
	defer close(tp.done)
	buf := make([]byte, 65536)
	for {
		select {
		case <-tp.stop:
			return
		default:
		}
		n, from, err := syscall.Recvfrom(tp.fd, buf, 0)
		if err != nil {
			if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
				continue
			}
			return
		}
		sll, _ := from.(*syscall.SockaddrLinklayer)
		if sll == nil {
			continue
		}
		port, hop, ok := udpDst(buf[:n])
		tp.mu.Lock()
		tp.total++
		if ok && tp.ports[port] {
			tp.udp[seen{sll.Ifindex, port, hop}]++
		} else {
			tp.other = append(tp.other, fmt.Sprintf("if %d: %x", sll.Ifindex, buf[:min(n, 64)]))
		}
		tp.mu.Unlock()
	}
}

// udpDst parses an Ethernet frame holding an unfragmented UDP datagram.
func udpDst(b []byte) (port, hop int, ok bool) {
	if len(b) < 14 {
		return 0, 0, false
	}
	ip := b[14:]
	switch binary.BigEndian.Uint16(b[12:14]) {
	case 0x0800:
		if len(ip) < 20 || ip[9] != 17 {
			return 0, 0, false
		}
		ihl := int(ip[0]&15) * 4
		if len(ip) < ihl+4 {
			return 0, 0, false
		}
		return int(binary.BigEndian.Uint16(ip[ihl+2:])), int(ip[8]), true
	case 0x86dd:
		if len(ip) < 44 || ip[6] != 17 {
			return 0, 0, false
		}
		return int(binary.BigEndian.Uint16(ip[42:])), int(ip[7]), true
	}
	return 0, 0, false
}

// result waits until want frames arrived (at most 3 s) and at least 1.2 s
// passed since the tap started (MLD reports repeat within 1 s, so noise
// would show), then stops the tap and returns what it saw.
func (tp *tap) result(want int) (map[seen]int, []string) {
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		tp.mu.Lock()
		n := tp.total
		tp.mu.Unlock()
		if n >= want && time.Since(tp.start) > 1200*time.Millisecond {
			break
		}
	}
	time.Sleep(50 * time.Millisecond) // late extras would show
	tp.close()
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.udp, tp.other
}

func (tp *tap) close() {
	select {
	case <-tp.stop:
	default:
		close(tp.stop)
		<-tp.done
		syscall.Close(tp.fd)
	}
}

// ifindex returns the index of interface name inside h's namespace.
func ifindex(t *testing.T, h *Host, name string) int {
	t.Helper()
	var idx int
	if err := h.Do(func() error {
		ifi, err := net.InterfaceByName(name)
		if err == nil {
			idx = ifi.Index
		}
		return err
	}); err != nil {
		t.Fatalf("%s in %s: %v", name, h.Name, err)
	}
	return idx
}

func checkSeen(t *testing.T, got, want map[seen]int, other []string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%+v: seen %d times, want %d", k, got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%+v: seen %d times, want 0", k, v)
		}
	}
	if len(other) > 0 {
		t.Errorf("%d frames besides the test datagrams, first: %s", len(other), other[0])
	}
}

func udpOK(t *testing.T, ctx context.Context, a, b *Host, v6 bool, port, count, size int) {
	t.Helper()
	if sent, rcvd, err := SendUDP(ctx, a, b, v6, port, count, size); err != nil || sent != count || rcvd != count {
		t.Errorf("SendUDP %s -> %s v6=%v: sent=%d received=%d err=%v, want %d, %d", a.Iface, b.Iface, v6, sent, rcvd, err, count, count)
	}
}

func tcpOK(t *testing.T, ctx context.Context, a, b *Host, v6 bool, total int) {
	t.Helper()
	if n, err := TCPTransfer(ctx, a, b, v6, 0, total, 10000); err != nil || n != total {
		t.Errorf("TCPTransfer %s -> %s v6=%v: received=%d err=%v, want %d", a.Iface, b.Iface, v6, n, err, total)
	}
}

// A bridge hub forwards between any two hosts, hosts added later included,
// and its capture sees each frame exactly three times: ingress port, br0,
// egress port. Nothing else crosses the hub: no ARP, ND, MLD or flooding.
func TestBridgeNet(t *testing.T) {
	Skip(t)
	t.Parallel()
	start := time.Now()
	n := NewNet(t, Bridge, 3)
	t.Logf("NewNet(Bridge, 3) took %v", time.Since(start))
	if len(n.Hosts) != 3 || n.Hub.Iface != BridgeName || n.Kind != Bridge {
		t.Fatalf("NewNet: %d hosts, hub iface %q, kind %v", len(n.Hosts), n.Hub.Iface, n.Kind)
	}
	a, b, c := n.Hosts[0], n.Hosts[1], n.Hosts[2]
	subnet := a.Prefix(false).Masked()
	for i, h := range n.Hosts {
		if h.Prefix(false).Bits() != 24 || h.Prefix(true).Bits() != 64 ||
			h.Prefix(false).Masked() != subnet || h.Prefix(true).Masked() != a.Prefix(true).Masked() {
			t.Errorf("host %d: %v %v, want one /24 and one /64 for all hosts", i, h.Prefix(false), h.Prefix(true))
		}
		if n.HubAddr(h, false).IsValid() || n.HubAddr(h, true).IsValid() {
			t.Errorf("host %d: bridge hub has an address", i)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tp := startTap(t, n.Hub, 4100, 4101, 4102)
	udpOK(t, ctx, a, c, false, 4100, 200, 100)
	udpOK(t, ctx, a, c, true, 4101, 200, 100)
	start = time.Now()
	d, err := n.AddHost(ctx)
	if err != nil {
		t.Fatalf("AddHost: %v", err)
	}
	t.Logf("AddHost took %v", time.Since(start))
	if len(n.Hosts) != 4 || n.Hosts[3] != d || d.Prefix(false).Masked() != subnet {
		t.Fatalf("after AddHost: %d hosts, new one %v", len(n.Hosts), d.Prefix(false))
	}
	udpOK(t, ctx, d, b, false, 4102, 50, 10) // the new host reaches an old one and back
	udpOK(t, ctx, b, d, true, 4102, 30, 10)

	br := ifindex(t, n.Hub, BridgeName)
	port := func(h *Host) int { return ifindex(t, n.Hub, n.HubIface(h)) }
	want := map[seen]int{}
	for _, f := range []struct {
		src, dst         *Host
		port, hop, count int
	}{{a, c, 4100, 64, 200}, {a, c, 4101, 64, 200}, {d, b, 4102, 64, 50}, {b, d, 4102, 64, 30}} {
		for _, idx := range []int{port(f.src), br, port(f.dst)} {
			want[seen{idx, f.port, f.hop}] += f.count
		}
	}
	got, other := tp.result(3 * (200 + 200 + 50 + 30))
	checkSeen(t, got, want, other)

	tcpOK(t, ctx, a, b, false, 1<<20+3)
	tcpOK(t, ctx, a, b, true, 1<<20+3)
	tcpOK(t, ctx, d, c, true, 100000)
}

// A router hub forwards between the hosts' subnets, hosts added later (also
// two at once) included; its capture sees each packet on the way in (hop
// limit 64) and on the way out (63), and nothing else.
func TestRouterNet(t *testing.T) {
	Skip(t)
	t.Parallel()
	start := time.Now()
	n := NewNet(t, Router, 2)
	t.Logf("NewNet(Router, 2) took %v", time.Since(start))
	a, b := n.Hosts[0], n.Hosts[1]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, h := range n.Hosts {
		for _, v6 := range []bool{false, true} {
			gw := n.HubAddr(h, v6)
			if !h.Prefix(v6).Masked().Contains(gw) || gw == h.Addr(v6) {
				t.Errorf("host %d: gateway %v not another address of %v", i, gw, h.Prefix(v6))
			}
			out, err := h.Exec(ctx, ipBin, "-o", map[bool]string{false: "-4", true: "-6"}[v6], "route", "show", "default")
			if err != nil || !strings.Contains(string(out), "default via "+gw.String()+" dev "+h.Iface) {
				t.Errorf("host %d: default route %q (%v), want via %v", i, out, err, gw)
			}
		}
	}
	if a.Prefix(false).Masked() == b.Prefix(false).Masked() || a.Prefix(true).Masked() == b.Prefix(true).Masked() {
		t.Errorf("router hosts share a subnet: %v %v", a.Prefix(false), b.Prefix(false))
	}
	tp := startTap(t, n.Hub, 4200, 4201, 4202, 4203)
	udpOK(t, ctx, a, b, false, 4200, 100, 100)
	udpOK(t, ctx, b, a, true, 4201, 100, 100)

	var wg sync.WaitGroup
	added := make([]*Host, 2)
	errs := make([]error, 2)
	start = time.Now()
	for i := range added {
		wg.Go(func() { added[i], errs[i] = n.AddHost(ctx) })
	}
	wg.Wait()
	t.Logf("two concurrent AddHost took %v", time.Since(start))
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("AddHost: %v, %v", errs[0], errs[1])
	}
	c, d := added[0], added[1]
	if len(n.Hosts) != 4 || c.Name == d.Name || c.Addr4 == d.Addr4 || n.HubIface(c) == n.HubIface(d) {
		t.Fatalf("after two AddHost: %d hosts, %s/%v and %s/%v", len(n.Hosts), c.Name, c.Addr4, d.Name, d.Addr4)
	}
	udpOK(t, ctx, c, a, false, 4202, 50, 20)
	udpOK(t, ctx, d, c, true, 4203, 40, 20)

	port := func(h *Host) int { return ifindex(t, n.Hub, n.HubIface(h)) }
	want := map[seen]int{}
	for _, f := range []struct {
		src, dst    *Host
		port, count int
	}{{a, b, 4200, 100}, {b, a, 4201, 100}, {c, a, 4202, 50}, {d, c, 4203, 40}} {
		want[seen{port(f.src), f.port, 64}] += f.count
		want[seen{port(f.dst), f.port, 63}] += f.count
	}
	got, other := tp.result(2 * (100 + 100 + 50 + 40))
	checkSeen(t, got, want, other)

	tcpOK(t, ctx, a, b, false, 1<<20+3)
	tcpOK(t, ctx, a, b, true, 1<<20+3)
	tcpOK(t, ctx, d, a, false, 100000)
}

// netGone reports what of n's namespaces and interfaces is still around.
func netGone(t *testing.T, names, ifaces []string) {
	t.Helper()
	links := ipOut(t, "-o", "link")
	for _, s := range names {
		if listed(t, s) {
			t.Errorf("%s still listed after cleanup", s)
		}
		if _, err := os.Stat(netnsDir + "/" + s); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s/%s: %v, want not exist", netnsDir, s, err)
		}
	}
	for _, s := range ifaces {
		if strings.Contains(links, s) {
			t.Errorf("%s in the root namespace", s)
		}
	}
}

// After the test, every namespace of a Net is gone, hosts added later
// (also to a Net made with no hosts) included; AddHost then fails; a half-made Net is cleaned up too.
func TestNetCleanup(t *testing.T) {
	Skip(t)
	for _, kind := range []HubKind{Bridge, Router} {
		var n *Net
		var names, ifaces []string
		t.Run(kind.String(), func(t *testing.T) {
			initial := map[HubKind]int{Bridge: 1, Router: 0}[kind] // a Net may start empty
			n = NewNet(t, kind, initial)
			for range 2 - initial {
				if _, err := n.AddHost(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			udpOK(t, context.Background(), n.Hosts[0], n.Hosts[1], kind == Router, 4400, 10, 10)
			names = append(names, n.Hub.Name)
			for _, h := range n.Hosts {
				names = append(names, h.Name)
				ifaces = append(ifaces, h.Iface, n.HubIface(h))
			}
			for _, s := range names {
				if !listed(t, s) {
					t.Errorf("%s not listed while the test runs", s)
				}
			}
		})
		if n == nil || len(names) != 3 {
			t.Fatalf("%v: subtest made %d namespaces, want 3", kind, len(names))
		}
		netGone(t, names, ifaces)
		if h, err := n.AddHost(context.Background()); err == nil || h != nil {
			t.Errorf("%v: AddHost after cleanup: %v, %v; want an error", kind, h, err)
		}
	}

	// Half-made: the hub and one host namespace exist, the veth does not.
	n := &Net{Kind: Bridge, id: seq.Add(1) - 1, slot: netSeq.Add(1) - 1}
	n.Hub = &Host{Name: n.nsName("hub")}
	n.Hub.path = netnsDir + "/" + n.Hub.Name
	ctx := context.Background()
	if err := n.createHub(ctx); err != nil {
		t.Fatal(err)
	}
	h := n.nsName("h0")
	n.nsList = append(n.nsList, h, n.nsName("h1")) // h1 was never created
	n.ports = append(n.ports, netIfName(os.Getpid(), n.id, 'p', 0))
	if err := runIP(ctx, "netns", "add", h); err != nil {
		t.Fatal(err)
	}
	if err := n.destroy(); err != nil {
		t.Errorf("destroy of a half-made Net: %v", err)
	}
	netGone(t, []string{n.Hub.Name, h}, nil)
	if err := n.destroy(); err != nil {
		t.Errorf("second destroy: %v", err)
	}
}

// A failed AddHost leaves the Net as it was and removes the half-made host;
// the next AddHost works. Too many hosts are refused.
func TestAddHostFailure(t *testing.T) {
	Skip(t)
	n := NewNet(t, Router, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Occupy the hub-side name the next host's veth needs.
	busy := netIfName(os.Getpid(), n.id, 'p', 1)
	if err := runIP(ctx, "-n", n.Hub.Name, "link", "add", busy, "type", "bridge"); err != nil {
		t.Fatal(err)
	}
	h, err := n.AddHost(ctx)
	if err == nil || h != nil || len(n.Hosts) != 1 {
		t.Fatalf("AddHost with its veth name taken: %v, %v, %d hosts; want an error and 1 host", h, err, len(n.Hosts))
	}
	if gone := n.nsName("h1"); listed(t, gone) {
		t.Errorf("namespace %s of the failed host left behind", gone)
	}
	h, err = n.AddHost(ctx)
	if err != nil || len(n.Hosts) != 2 || h.Name != n.nsName("h2") {
		t.Fatalf("AddHost after a failure: %v, %d hosts", err, len(n.Hosts))
	}
	udpOK(t, ctx, n.Hosts[0], h, false, 4300, 20, 10)
	udpOK(t, ctx, h, n.Hosts[0], true, 4300, 20, 10)

	n.mu.Lock()
	n.next = MaxHosts
	n.mu.Unlock()
	if h, err := n.AddHost(ctx); err == nil || h != nil || len(n.Hosts) != 2 {
		t.Errorf("AddHost past MaxHosts: %v, %v, %d hosts", h, err, len(n.Hosts))
	}
	var nilNet *Net
	if _, err := nilNet.AddHost(ctx); err == nil {
		t.Error("AddHost on a nil Net succeeded")
	}
}

// Interface names fit IFNAMSIZ-1 for any pid Linux can hand out (pid_max
// is at most 2^22) and differ between sides, hosts and Nets.
func TestNetIfName(t *testing.T) {
	if got, want := netIfName(1<<22-1, 0x1ff, 'p', 63), "tb3fffff-ffp3f"; got != want {
		t.Errorf("netIfName = %q, want %q", got, want)
	}
	seen := map[string]bool{}
	for _, id := range []uint64{0, 1, 0x10} {
		for _, side := range []byte{'h', 'p'} {
			for i := range MaxHosts {
				s := netIfName(1<<22, id, side, i)
				if len(s) > 15 || seen[s] {
					t.Fatalf("netIfName(%d, %c, %d) = %q: too long or repeated", id, side, i, s)
				}
				seen[s] = true
			}
		}
	}
}

// A second network (the Multus case): hosts of a Router Net joined to a
// Bridge Net by a second interface. Traffic to the second addresses crosses
// only the second hub, traffic to the first only the first; closing the
// second Net removes its interfaces and leaves the hosts working.
func TestJoinSecondNet(t *testing.T) {
	Skip(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prim := NewNet(t, Router, 2)
	a, b := prim.Hosts[0], prim.Hosts[1]
	sec, err := OpenNet(ctx, Bridge, 0)
	if sec != nil {
		defer sec.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prim.Join(ctx, a); err == nil {
		t.Error("Join on a Router Net: no error")
	}
	a2, err := sec.Join(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := sec.Join(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if a2.Name != a.Name || b2.Name != b.Name || a2.Iface == a.Iface || a2.Addr4 == a.Addr4 ||
		a2.Prefix(false).Masked() != b2.Prefix(false).Masked() || a2.Prefix(false).Masked() == a.Prefix(false).Masked() {
		t.Fatalf("joined hosts: %s %s %v / %s %s %v", a2.Name, a2.Iface, a2.Prefix(false), a.Name, a.Iface, a.Prefix(false))
	}
	tp1 := startTap(t, prim.Hub, 4200, 4201)
	tp2 := startTap(t, sec.Hub, 4200, 4201)
	udpOK(t, ctx, a2, b2, false, 4200, 40, 100)
	udpOK(t, ctx, a2, b2, true, 4201, 30, 100)
	udpOK(t, ctx, a, b, false, 4201, 20, 100)
	got2, other2 := tp2.result(3 * (40 + 30))
	checkSeen(t, got2, map[seen]int{
		{ifindex(t, sec.Hub, sec.HubIface(a2)), 4200, 64}: 40, {ifindex(t, sec.Hub, BridgeName), 4200, 64}: 40, {ifindex(t, sec.Hub, sec.HubIface(b2)), 4200, 64}: 40,
		{ifindex(t, sec.Hub, sec.HubIface(a2)), 4201, 64}: 30, {ifindex(t, sec.Hub, BridgeName), 4201, 64}: 30, {ifindex(t, sec.Hub, sec.HubIface(b2)), 4201, 64}: 30,
	}, other2)
	got1, other1 := tp1.result(2 * 20)
	checkSeen(t, got1, map[seen]int{
		{ifindex(t, prim.Hub, prim.HubIface(a)), 4201, 64}: 20, {ifindex(t, prim.Hub, prim.HubIface(b)), 4201, 63}: 20,
	}, other1)
	if err := sec.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Do(func() error { _, err := net.InterfaceByName(a2.Iface); return err }); err == nil {
		t.Errorf("%s still in %s after Close", a2.Iface, a.Name)
	}
	tcpOK(t, ctx, a, b, true, 100000) // the first network is untouched
	if err := sec.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
