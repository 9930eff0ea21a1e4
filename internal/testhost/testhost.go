// Package testhost builds throw-away "test hosts" for weir's live tests:
// Linux network namespaces joined by veth pairs, with addresses that exist
// only inside those namespaces, and a bounded traffic driver (SendUDP,
// TCPTransfer) whose counts are the ground truth the capture, eBPF and
// conntrack tests compare against.
//
// Topologies: NewPair joins two hosts point to point; NewNet joins N hosts
// to a hub namespace, either through a Linux bridge (Bridge) or an IP router
// (Router), and Net.AddHost joins more hosts while a test runs.
//
// Safety rules the package keeps:
//   - both veth ends are created directly inside the test namespaces
//     (ip link add ... netns A type veth peer ... netns B), so nothing is
//     ever added to, or changed in, the host's own network namespace;
//   - addresses come only from 198.18.0.0/15 (RFC 2544 benchmarking) and
//     fd00:77ee::/48, and only exist inside the namespaces;
//   - sysctls are only written inside the test namespaces;
//   - every namespace is deleted by a t.Cleanup registered before anything
//     else is created, which also runs when the test fails or panics;
//     namespaces left behind by a killed test binary are swept on the next
//     run (their creating process no longer exists);
//   - every loop is bounded in count and in time.
//
// Building hosts needs root (or CAP_SYS_ADMIN and CAP_NET_ADMIN) and the
// iproute2 "ip" command (and "bridge" for Bridge Nets); call Skip(t) first
// in every test that uses them.
package testhost

import (
	"cmp"
	"errors"
	"net/netip"
	"os"
	"testing"
)

// Prefix is the start of every namespace name this package creates.
// Names look like weirtb-<pid>-<starttime>-<seq><a|b>, where starttime is
// the creating process's start time in clock ticks since boot, so a
// namespace can be matched to its creator even after pid reuse.
const Prefix = "weirtb-"

// Address plan. Everything stays inside 198.18.0.0/15 and fd00:77ee::/48.
//
// Pair number n (0-based, per process, wrapping) gets the IPv4 subnet
// 198.18.0.0/15 + 4n as a /30 (A = .1, B = .2 of that /30) and the IPv6
// subnet fd00:77ee:0:n::/64 (A = ::1, B = ::2). The first 16384 pairs of a
// process stay inside 198.18.0.0/16 and fd00:77ee:0:0-3fff::/64.
//
// Net number k (0-based, per process, wrapping at 256) gets 198.19.k.0/24
// and the 64 IPv6 subnets fd00:77ee:0:s::/64 with s = 0xc000 | k<<6 | i,
// i = 0..63, so Nets never overlap the first 16384 pairs. Host number i
// (0-based, in order of creation, hosts added later included) gets:
//   - Bridge: 198.19.k.(i+1)/24 and fd00:77ee:0:(0xc000|k<<6)::(i+1)/64, one
//     subnet for all hosts; the hub has no address;
//   - Router: the /30 198.19.k.(4i)/30 with the hub at .4i+1 and the host at
//     .4i+2, and fd00:77ee:0:(0xc000|k<<6|i)::/64 with the hub at ::1 and the
//     host at ::2; the hub's address is the host's default gateway.
//
// Besides, addresses only exist inside their namespaces, so even a clash
// (after 16384 pairs) would not let traffic cross from one net to another.
const (
	// Bits4 is the IPv4 prefix length on the interfaces of Pair hosts.
	Bits4 = 30
	// Bits6 is the IPv6 prefix length on the interfaces of Pair hosts.
	Bits6 = 64
)

var (
	base4 = netip.MustParseAddr("198.18.0.0")  // RFC 2544 benchmarking range, /15
	base6 = netip.MustParseAddr("fd00:77ee::") // unique-local, /48
)

// ErrUnsupported is returned on systems without network namespaces.
var ErrUnsupported = errors.New("testhost: network namespaces are not supported on this system")

// Host is a test host: a network namespace holding one veth end, one end of
// a Pair or joined to the hub of a Net. The hub of a Net is a Host too (see
// Net.Hub).
type Host struct {
	Name  string     // network namespace name (as listed by "ip netns list")
	Iface string     // veth interface name inside the namespace (the host's own end)
	Addr4 netip.Addr // IPv4 address of Iface (subnet: Prefix(false))
	Addr6 netip.Addr // IPv6 address of Iface (subnet: Prefix(true)), usable at once (no DAD)
	path  string     // bind-mount path of the namespace, for setns

	// Set for hosts of a Net only.
	owner        *Net
	index        int        // host number i in the Net
	bits4, bits6 int        // prefix lengths (0: Bits4, Bits6)
	hubIf        string     // hub-side veth end
	hub4, hub6   netip.Addr // hub's addresses facing the host (Router only)
	mac, hubMAC  [6]byte    // host-side and hub-side veth MAC addresses
	joined       bool       // the namespace belongs to another Net (Net.Join)
}

// Prefix returns the subnet of h's IPv6 address if v6 is set, else of its
// IPv4 address, with the host address kept (e.g. 198.19.0.2/30).
func (h *Host) Prefix(v6 bool) netip.Prefix {
	if v6 {
		return netip.PrefixFrom(h.Addr6, cmp.Or(h.bits6, Bits6))
	}
	return netip.PrefixFrom(h.Addr4, cmp.Or(h.bits4, Bits4))
}

// Addr returns h's IPv6 address if v6 is set, else its IPv4 address.
func (h *Host) Addr(v6 bool) netip.Addr {
	if v6 {
		return h.Addr6
	}
	return h.Addr4
}

// Pair is two test hosts joined by one veth pair: A.Iface and B.Iface are
// the two ends, A.Addr4/B.Addr4 share a /30 and A.Addr6/B.Addr6 a /64.
type Pair struct {
	A, B *Host
}

// Skip stops the test when test hosts cannot be built here: t.Skip with the
// reason, or t.Fatal when the CI environment variable is set (CI runs as
// root, so a skip there would hide a broken setup).
func Skip(t testing.TB) {
	t.Helper()
	if ok, why := Available(); !ok {
		skipOrFail(t, why)
	}
}

// skipOrFail skips the test, or fails it if the CI variable is set.
func skipOrFail(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("testhost: test hosts unavailable in CI: %s", why)
	}
	t.Skipf("testhost: test hosts unavailable: %s", why)
}

// pairAddrs returns the addresses of pair number n.
func pairAddrs(n uint64) (a4, b4, a6, b6 netip.Addr) {
	b := base4.As4()
	off := uint32(n%(1<<15)) * 4 // 2^17 addresses in the /15 = 2^15 subnets of 4
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += off
	a4 = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v) + 1})
	b4 = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v) + 2})
	s := base6.As16()
	s[6], s[7] = byte(n>>8), byte(n) // 16 subnet bits of the /48
	s[15] = 1
	a6 = netip.AddrFrom16(s)
	s[15] = 2
	b6 = netip.AddrFrom16(s)
	return a4, b4, a6, b6
}
