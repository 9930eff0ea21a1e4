package testhost

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
)

// The address plan must stay inside the two ranges the network rule allows,
// give each pair its own subnet, and put A and B in the same subnet.
func TestPairAddrs(t *testing.T) {
	p4 := netip.MustParsePrefix("198.18.0.0/15")
	p6 := netip.MustParsePrefix("fd00:77ee::/48")
	cases := []struct {
		n              uint64
		a4, b4, a6, b6 string
	}{
		{0, "198.18.0.1", "198.18.0.2", "fd00:77ee::1", "fd00:77ee::2"},
		{1, "198.18.0.5", "198.18.0.6", "fd00:77ee:0:1::1", "fd00:77ee:0:1::2"},
		{64, "198.18.1.1", "198.18.1.2", "fd00:77ee:0:40::1", "fd00:77ee:0:40::2"},
		{32767, "198.19.255.253", "198.19.255.254", "fd00:77ee:0:7fff::1", "fd00:77ee:0:7fff::2"},
		{32768, "198.18.0.1", "198.18.0.2", "fd00:77ee:0:8000::1", "fd00:77ee:0:8000::2"}, // v4 wraps
		{65535, "198.19.255.253", "198.19.255.254", "fd00:77ee:0:ffff::1", "fd00:77ee:0:ffff::2"},
		{65536, "198.18.0.1", "198.18.0.2", "fd00:77ee::1", "fd00:77ee::2"}, // both wrap
	}
	for _, c := range cases {
		a4, b4, a6, b6 := pairAddrs(c.n)
		got := [4]string{a4.String(), b4.String(), a6.String(), b6.String()}
		want := [4]string{c.a4, c.b4, c.a6, c.b6}
		if got != want {
			t.Errorf("pairAddrs(%d) = %v, want %v", c.n, got, want)
		}
	}
	for n := uint64(0); n < 1<<17; n += 97 {
		a4, b4, a6, b6 := pairAddrs(n)
		if !p4.Contains(a4) || !p4.Contains(b4) || !p6.Contains(a6) || !p6.Contains(b6) {
			t.Fatalf("pairAddrs(%d) = %v %v %v %v: outside the allowed ranges", n, a4, b4, a6, b6)
		}
		s4 := netip.PrefixFrom(a4, Bits4).Masked()
		s6 := netip.PrefixFrom(a6, Bits6).Masked()
		network, broadcast := s4.Addr(), s4.Addr().Next().Next().Next()
		if !s4.Contains(b4) || !s6.Contains(b6) || a4 == b4 || a6 == b6 ||
			a4 == network || b4 == network || a4 == broadcast || b4 == broadcast {
			t.Fatalf("pairAddrs(%d): A and B not two host addresses of one subnet: %v %v %v %v", n, a4, b4, a6, b6)
		}
	}
}

// Out-of-range arguments are refused before any socket is made, so these
// run without privileges and on any system.
func TestDriverBounds(t *testing.T) {
	ctx := context.Background()
	h := &Host{}
	udp := []struct {
		name                   string
		src, dst               *Host
		port, count, size      int
		wantSent, wantReceived int
	}{
		{"count zero", h, h, 9, 0, 10, 0, 0},
		{"count too large", h, h, 9, MaxDatagrams + 1, 10, 0, 0},
		{"size negative", h, h, 9, 1, -1, 0, 0},
		{"size too large", h, h, 9, 1, MaxDatagramSize + 1, 0, 0},
		{"port negative", h, h, -1, 1, 10, 0, 0},
		{"port too large", h, h, 65536, 1, 10, 0, 0},
		{"nil src", nil, h, 9, 1, 10, 0, 0},
		{"nil dst", h, nil, 9, 1, 10, 0, 0},
	}
	for _, c := range udp {
		sent, rcvd, err := SendUDP(ctx, c.src, c.dst, false, c.port, c.count, c.size)
		if err == nil || sent != 0 || rcvd != 0 {
			t.Errorf("SendUDP %s: sent=%d received=%d err=%v, want 0, 0 and an error", c.name, sent, rcvd, err)
		}
	}
	tcp := []struct {
		name                   string
		src, dst               *Host
		port, total, writeSize int
	}{
		{"total negative", h, h, 9, -1, 10},
		{"write size zero", h, h, 9, 10, 0},
		{"write size too large", h, h, 9, 10, MaxWriteSize + 1},
		{"port too large", h, h, 65536, 10, 10},
		{"nil src", nil, h, 9, 10, 10},
	}
	for _, c := range tcp {
		n, err := TCPTransfer(ctx, c.src, c.dst, false, c.port, c.total, c.writeSize)
		if err == nil || n != 0 {
			t.Errorf("TCPTransfer %s: received=%d err=%v, want 0 and an error", c.name, n, err)
		}
	}
	// A host not made by NewPair is refused by Do (no namespace to enter).
	if err := h.Do(func() error { return nil }); err == nil {
		t.Error("Do on a zero Host succeeded")
	}
	if _, _, err := SendUDP(ctx, h, h, false, 9, 1, 1); err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("SendUDP with zero hosts: err=%v, want a Do error", err)
	}
}

// The Net address plan: exact addresses for a few (slot, host) pairs worked
// out by hand from the plan in testhost.go, then every slot and host checked
// against the rules: inside the allowed ranges, clear of the first 16384
// pairs, host and hub in one subnet, no address used twice.
func TestNetHostAddrs(t *testing.T) {
	cases := []struct {
		kind           HubKind
		k              uint64
		i              int
		h4, h6, g4, g6 string
	}{
		{Bridge, 0, 0, "198.19.0.1", "fd00:77ee:0:c000::1", "invalid IP", "invalid IP"},
		{Bridge, 5, 63, "198.19.5.64", "fd00:77ee:0:c140::40", "invalid IP", "invalid IP"},
		{Bridge, 256 + 5, 1, "198.19.5.2", "fd00:77ee:0:c140::2", "invalid IP", "invalid IP"}, // slot wraps
		{Router, 0, 0, "198.19.0.2", "fd00:77ee:0:c000::2", "198.19.0.1", "fd00:77ee:0:c000::1"},
		{Router, 3, 2, "198.19.3.10", "fd00:77ee:0:c0c2::2", "198.19.3.9", "fd00:77ee:0:c0c2::1"},
		{Router, 255, 63, "198.19.255.254", "fd00:77ee:0:ffff::2", "198.19.255.253", "fd00:77ee:0:ffff::1"},
	}
	for _, c := range cases {
		var h Host
		netHost(c.kind, c.k, c.i, &h)
		got := [4]string{h.Addr4.String(), h.Addr6.String(), h.hub4.String(), h.hub6.String()}
		if want := [4]string{c.h4, c.h6, c.g4, c.g6}; got != want {
			t.Errorf("netHost(%v, %d, %d) = %v, want %v", c.kind, c.k, c.i, got, want)
		}
	}
	p4 := netip.MustParsePrefix("198.19.0.0/16")
	p6 := netip.MustParsePrefix("fd00:77ee:0:c000::/50")
	pairs4 := netip.MustParsePrefix("198.18.0.0/16")      // pairs 0..16383
	pairs6 := netip.MustParsePrefix("fd00:77ee:0:0::/50") // pairs 0..16383
	if a4, _, a6, _ := pairAddrs(16383); !pairs4.Contains(a4) || !pairs6.Contains(a6) {
		t.Fatalf("pair 16383 at %v %v, outside the ranges assumed here", a4, a6)
	}
	used := map[netip.Addr]string{}
	use := func(a netip.Addr, what string) {
		if prev, ok := used[a]; ok {
			t.Fatalf("%v used by %s and %s", a, prev, what)
		}
		used[a] = what
	}
	for _, kind := range []HubKind{Bridge, Router} {
		for k := uint64(0); k < 256; k++ {
			macs := map[[6]byte]bool{}
			for i := range MaxHosts {
				var h Host
				netHost(kind, k, i, &h)
				what := fmt.Sprintf("%v slot %d host %d", kind, k, i)
				s4, s6 := h.Prefix(false), h.Prefix(true)
				if !p4.Contains(h.Addr4) || !p6.Contains(h.Addr6) || pairs4.Contains(h.Addr4) || pairs6.Contains(h.Addr6) {
					t.Fatalf("%s: %v %v outside the Net ranges", what, h.Addr4, h.Addr6)
				}
				m4 := s4.Masked()
				last := m4.Addr().As4()
				last[3] |= byte(1<<(32-s4.Bits()) - 1)
				if h.Addr4 == m4.Addr() || h.Addr4 == netip.AddrFrom4(last) {
					t.Fatalf("%s: %v is the network or broadcast address of %v", what, h.Addr4, m4)
				}
				if kind == Router {
					if s4.Bits() != 30 || !s4.Masked().Contains(h.hub4) || !s6.Masked().Contains(h.hub6) ||
						h.hub4 == m4.Addr() || h.hub4 == netip.AddrFrom4(last) || h.hub4 == h.Addr4 || h.hub6 == h.Addr6 {
						t.Fatalf("%s: hub %v %v and host %v %v not two hosts of one subnet", what, h.hub4, h.hub6, s4, s6)
					}
					use(h.hub4, what+" hub")
					use(h.hub6, what+" hub")
				} else if s4.Bits() != 24 || h.hub4.IsValid() || h.hub6.IsValid() {
					t.Fatalf("%s: prefix %v, hub %v %v", what, s4, h.hub4, h.hub6)
				}
				use(h.Addr4, what)
				use(h.Addr6, what)
				if macs[h.mac] || macs[h.hubMAC] || h.mac == bridgeMAC || h.hubMAC == bridgeMAC || h.mac[0]&3 != 2 {
					t.Fatalf("%s: MACs %x %x not unique locally administered unicast", what, h.mac, h.hubMAC)
				}
				macs[h.mac], macs[h.hubMAC] = true, true
			}
		}
		clear(used) // a Bridge and a Router in the same slot never coexist: slots are per Net
	}
}

func TestHubKindString(t *testing.T) {
	for k, want := range map[HubKind]string{Bridge: "bridge", Router: "router", 0: "HubKind(0)", 7: "HubKind(7)"} {
		if got := k.String(); got != want {
			t.Errorf("HubKind(%d).String() = %q, want %q", int(k), got, want)
		}
	}
}
