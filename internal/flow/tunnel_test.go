package flow

import (
	"net/netip"
	"testing"
)

func a16(s string) *[16]byte { a := netip.MustParseAddr(s).As16(); return &a }

// TestTunnelRecords: a flow seen through a tunnel carries the tunnel's
// outer endpoints, the initiator's side as TunnelSrc, however the flow was
// first seen (request first, or a SYN-ACK whose receiver is the
// initiator); both directions share one index; a plain flow on the same
// interface carries none.
func TestTunnelRecords(t *testing.T) {
	for _, synAckFirst := range []bool{false, true} {
		var ifs Ifaces
		base := ifs.Index("eth0")
		tb, s := newTable(t, Config{MaxFlows: 64, Ifaces: &ifs})
		// Pod 10.0.0.9 (behind node 192.0.2.20) opens a connection to pod
		// 10.0.1.5 (behind node 192.0.2.10): the lower inner endpoint is
		// the responder, so orientation is really exercised.
		syn := pk("10.0.0.9", 40000, "10.0.1.5", 80, 6, 1*sec, 60, 0x02, RoleInitiator)
		synAck := pk("10.0.1.5", 80, "10.0.0.9", 40000, 6, 2*sec, 60, 0x12, RoleResponder)
		n1, n2 := a16("::ffff:192.0.2.20"), a16("::ffff:192.0.2.10")
		syn.Iface = ifs.IndexTunnel(base, &syn.Key, n1, n2, 4)
		synAck.Iface = ifs.IndexTunnel(base, &synAck.Key, n2, n1, 4)
		if syn.Iface != synAck.Iface || syn.Iface == base {
			t.Fatalf("indexes %d and %d (base %d): both directions must share one tunnel index", syn.Iface, synAck.Iface, base)
		}
		plain := pk("10.9.9.9", 1, "10.9.9.8", 2, 17, 1*sec, 30, 0, RoleUnknown)
		plain.Iface = base
		pkts := []Packet{syn, synAck, plain}
		if synAckFirst {
			pkts = []Packet{synAck, plain}
		}
		for i := range pkts {
			tb.Update(&pkts[i])
		}
		tb.Flush(ReasonEOF)
		var tun, pl *Record
		for i := range s.recs {
			if s.recs[i].Key.Proto == 6 {
				tun = &s.recs[i]
			} else {
				pl = &s.recs[i]
			}
		}
		if tun == nil || pl == nil {
			t.Fatalf("records %+v", s.recs)
		}
		if tun.Key.Src().String() != "10.0.0.9" || tun.TunnelSrc.String() != "192.0.2.20" || tun.TunnelDst.String() != "192.0.2.10" || tun.Iface != "eth0" {
			t.Fatalf("synAckFirst=%v: %v → %v via %v → %v on %q", synAckFirst, tun.Key.Src(), tun.Key.Dst(), tun.TunnelSrc, tun.TunnelDst, tun.Iface)
		}
		if pl.TunnelSrc.IsValid() || pl.TunnelDst.IsValid() || pl.Iface != "eth0" {
			t.Fatalf("plain flow: %+v", *pl)
		}
	}
}

// TestTunnelBound: tunnels past MaxTunnels keep the plain index and are
// counted; IPv6 outer endpoints come back as IPv6.
func TestTunnelBound(t *testing.T) {
	var ifs Ifaces
	base := ifs.Index("uplink")
	k := mkKey("2001:db8::1", 1, "2001:db8::2", 2, 17)
	var last uint16
	for i := 0; i < MaxTunnels+2; i++ {
		var src [16]byte
		src[0], src[1], src[14], src[15] = 0x20, 0x01, byte(i>>8), byte(i)
		last = ifs.IndexTunnel(base, &k, &src, a16("2001:db8:f::1"), 6)
		if i < MaxTunnels && (last == base || ifs.Name(last) != "uplink") {
			t.Fatalf("tunnel %d: index %d named %q", i, last, ifs.Name(last))
		}
	}
	if last != base || ifs.TunnelOverflow() != 2 {
		t.Fatalf("past the bound: index %d, overflow %d", last, ifs.TunnelOverflow())
	}
	src, dst := ifs.tunnel(base+1, &k)
	if !src.Is6() || src.String() != "2001::" || dst.String() != "2001:db8:f::1" {
		t.Fatalf("IPv6 endpoints %v %v", src, dst)
	}
	if other := ifs.Index("eth1"); ifs.Name(other) != "eth1" {
		t.Fatalf("a new interface after the tunnels: %q", ifs.Name(other))
	}
}
