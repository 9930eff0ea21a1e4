package testbed

import (
	"context"
	"errors"
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
