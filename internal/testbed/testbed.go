// Package testbed builds throw-away "test hosts" for weir's live tests:
// Linux network namespaces joined by veth pairs, with addresses that exist
// only inside those namespaces, and a bounded traffic driver (SendUDP,
// TCPTransfer) whose counts are the ground truth the capture, eBPF and
// conntrack tests compare against.
//
// Safety rules the package keeps:
//   - both veth ends are created directly inside the test namespaces
//     (ip link add ... netns A type veth peer ... netns B), so nothing is
//     ever added to, or changed in, the host's own network namespace;
//   - addresses come only from 198.18.0.0/15 (RFC 2544 benchmarking) and
//     fd00:77ee::/48, and only exist inside the namespaces;
//   - every namespace is deleted by a t.Cleanup registered before anything
//     else is created, which also runs when the test fails or panics;
//     namespaces left behind by a killed test binary are swept on the next
//     run (their creating process no longer exists);
//   - every loop is bounded in count and in time.
//
// Building hosts needs root (or CAP_SYS_ADMIN and CAP_NET_ADMIN) and the
// iproute2 "ip" command; call Skip(t) first in every test that uses them.
package testbed

import (
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

// Address plan. Pair number n (0-based, per process, wrapping) gets the
// IPv4 subnet 198.18.0.0/15 + 4n as a /30 (A = .1, B = .2 of that /30) and
// the IPv6 subnet fd00:77ee:0:n::/64 (A = ::1, B = ::2).
const (
	// Bits4 is the IPv4 prefix length on every test host interface.
	Bits4 = 30
	// Bits6 is the IPv6 prefix length on every test host interface.
	Bits6 = 64
)

var (
	base4 = netip.MustParseAddr("198.18.0.0")  // RFC 2544 benchmarking range, /15
	base6 = netip.MustParseAddr("fd00:77ee::") // unique-local, /48
)

// ErrUnsupported is returned on systems without network namespaces.
var ErrUnsupported = errors.New("testbed: network namespaces are not supported on this system")

// Host is one end of a Pair: a network namespace holding one veth end.
type Host struct {
	Name  string     // network namespace name (as listed by "ip netns list")
	Iface string     // veth interface name inside the namespace
	Addr4 netip.Addr // IPv4 address of Iface (prefix length Bits4)
	Addr6 netip.Addr // IPv6 address of Iface (prefix length Bits6), usable at once (no DAD)
	path  string     // bind-mount path of the namespace, for setns
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
	ok, why := Available()
	if ok {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("testbed: test hosts unavailable in CI: %s", why)
	}
	t.Skipf("testbed: test hosts unavailable: %s", why)
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
