package craft

import (
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// udp sends one datagram (fragmented to mtu if mtu > 0).
func (g *gen) udp(c *conv, t int64, fwd bool, payload, mtu int) int64 {
	p := c.pkt(fwd)
	p.Payload = payload
	return g.emit(c, t, fwd, &p, mtu)
}

// newUDP starts a UDP flow from a random inside or outside client.
func (g *gen) newUDP(v6 bool, port uint16) *conv {
	inside := g.chance(60)
	return g.newConv(g.host(inside, v6), g.host(!inside, v6), inside, flow.ProtoUDP, g.clientPort(), port)
}

// query sends 1..3 DNS-like request/response pairs.
func (g *gen) query(c *conv, t int64) int64 {
	for range 1 + g.rng.IntN(3) {
		t = g.udp(c, t, true, 20+g.rng.IntN(41), 0)
		t = g.udp(c, t+g.dur(500*time.Microsecond, 40*time.Millisecond), false, 40+g.rng.IntN(461), 0)
		t += g.dur(10*time.Millisecond, 500*time.Millisecond)
	}
	return t
}

// dns: request/response flows to port 53, one in five near the end (eof).
func (g *gen) dns(n int) {
	for range n {
		c := g.newUDP(g.chance(30), 53)
		start := g.dur(0, sec(215))
		if g.chance(20) {
			start = g.dur(sec(229), sec(236))
		}
		g.query(c, start)
	}
}

// streams: one-way UDP streams (RTP-like), the first three still running
// when the capture ends.
func (g *gen) streams(n int) {
	for i := range n {
		c := g.newUDP(g.chance(25), 5004)
		t := g.dur(0, sec(200))
		if i < 3 {
			t = g.dur(sec(231), sec(233))
		}
		count, step, size := 20+g.rng.IntN(41), g.dur(20*time.Millisecond, 200*time.Millisecond), 100+g.rng.IntN(1101)
		for k := 0; k < count && t < int64(sec(239.5)); k++ {
			t = g.udp(c, t, true, size+g.rng.IntN(21)-10, 0) + step
		}
	}
}

// fragmented: UDP exchanges whose datagrams are split into IP fragments,
// four IPv4 (MTU 1500, one 576) and four IPv6 (MTU 1280, one with an
// extension header chain that is partly unfragmentable).
func (g *gen) fragmented() {
	for i := range 8 {
		v6 := i >= 4
		c := g.newUDP(v6, 5001)
		mtu := 1500
		switch {
		case i == 3:
			mtu = 576
		case v6:
			mtu = 1280
		}
		if i == 7 {
			c.base.IPv6Ext = []Ext{{ExtHopByHop, 2}, {ExtRouting, 16}, {ExtDestOpts, 6}}
		}
		t := g.dur(0, sec(200))
		for range 1 + g.rng.IntN(2) {
			t = g.udp(c, t, true, 1500+g.rng.IntN(4501), mtu)
			t = g.udp(c, t+g.dur(time.Millisecond, 50*time.Millisecond), false, 100+g.rng.IntN(2901), mtu)
			t += g.dur(10*time.Millisecond, time.Second)
		}
	}
}

// IPv4 option sets: router alert (copied), record route (not copied), and
// NOP + timestamp.
var v4OptionSets = [][]byte{
	{0x94, 0x04, 0x00, 0x00},
	{0x07, 0x0b, 0x04, 0, 0, 0, 0, 0, 0, 0, 0},
	{0x01, 0x44, 0x0c, 0x05, 0, 0, 0, 0, 0, 0, 0, 0},
}

// v4Options: three TCP sessions and three DNS-like flows with IPv4 options.
func (g *gen) v4Options() {
	for i := range 6 {
		var c *conv
		t := g.dur(0, sec(200))
		if i%2 == 0 {
			c = g.newTCP(false)
			c.base.IPv4Options = v4OptionSets[i/2]
			g.session(c, t)
		} else {
			c = g.newUDP(false, 53)
			c.base.IPv4Options = v4OptionSets[i/2]
			g.query(c, t)
		}
	}
}

// IPv6 extension header chains.
var v6Chains = [][]Ext{
	{{ExtHopByHop, 6}},
	{{ExtHopByHop, 4}, {ExtRouting, 16}, {ExtDestOpts, 8}},
	{{ExtHopByHop, 2}, {ExtDestOpts, 4}, {ExtRouting, 32}, {ExtAH, 12}, {ExtDestOpts, 10}},
	{{ExtAH, 12}},
	{{ExtDestOpts, 20}, {ExtAH, 16}},
	{{ExtRouting, 16}, {ExtAH, 12}},
}

// v6Chains: TCP sessions and DNS-like flows over extension header chains.
func (g *gen) v6Chains() {
	for i, chain := range v6Chains {
		var c *conv
		t := g.dur(0, sec(200))
		if i%2 == 0 {
			c = g.newTCP(true)
			c.base.IPv6Ext = chain
			g.session(c, t)
		} else {
			c = g.newUDP(true, 53)
			c.base.IPv6Ext = chain
			g.query(c, t)
		}
	}
}

// echo: eight ICMP and six ICMPv6 ping flows of 3-5 request/reply pairs a
// second apart; every fourth flow's last request goes unanswered.
func (g *gen) echo() {
	for i := range 14 {
		v6 := i >= 8
		in, out := g.pair(v6)
		reqInside := g.chance(70)
		req, resp := in, out
		if !reqInside {
			req, resp = out, in
		}
		proto, reqType, repType := uint8(flow.ProtoICMP), uint8(8), uint8(0)
		if v6 {
			proto, reqType, repType = flow.ProtoICMPv6, 128, 129
		}
		c := g.newConv(req, resp, reqInside, proto, 0, 0)
		c.truth.Key.ICMPType = reqType
		id := uint32(g.rng.IntN(65536)) << 16
		start := g.dur(0, sec(200))
		pings := 3 + g.rng.IntN(3)
		for k := range pings {
			p := c.pkt(true)
			p.ICMPType, p.Seq, p.Payload = reqType, id|uint32(k+1), 56
			t := g.emit(c, start+int64(k)*int64(time.Second), true, &p, 0)
			if i%4 == 3 && k == pings-1 {
				break
			}
			r := c.pkt(false)
			r.ICMPType, r.Seq, r.Payload = repType, p.Seq, 56
			g.emit(c, t+g.dur(time.Millisecond, 50*time.Millisecond), false, &r, 0)
		}
	}
}

// unreachable: two UDP probes answered by ICMP port unreachable (type 3
// code 3, quoting the IP header and 8 bytes) and one answered by ICMPv6 port
// unreachable (type 1 code 4, quoting the whole probe). Each probe and each
// error is its own flow; the error is sent by the probed host.
func (g *gen) unreachable() {
	for i := range 3 {
		v6 := i == 2
		in, out := g.pair(v6)
		inside := g.chance(50)
		prober, target := in, out
		if !inside {
			prober, target = out, in
		}
		probe := g.newConv(prober, target, inside, flow.ProtoUDP, g.clientPort(), uint16(33434+i))
		p := probe.pkt(true)
		p.Payload = 32
		t := g.emit(probe, g.dur(0, sec(200)), true, &p, 0)
		orig := p.AppendIP(nil) // p.ID was set by emit: the bytes as sent

		proto, typ, code := uint8(flow.ProtoICMP), uint8(3), uint8(3)
		if v6 {
			proto, typ, code = flow.ProtoICMPv6, 1, 4
		} else {
			orig = orig[:int(orig[0]&0x0f)*4+8]
		}
		c := g.newConv(target, prober, !inside, proto, 0, 0)
		c.base.Link, c.base.VLANs, c.base.QinQ = probe.base.Link, probe.base.VLANs, probe.base.QinQ
		c.truth.Iface, c.truth.Link = probe.truth.Iface, probe.truth.Link
		c.truth.Key.ICMPType, c.truth.Key.ICMPCode = typ, code
		e := c.pkt(true)
		e.ICMPType, e.ICMPCode, e.Body = typ, code, orig
		g.emit(c, t+g.dur(100*time.Microsecond, 20*time.Millisecond), true, &e, 0)
	}
}

// sctp: associations exchanging DATA chunks both ways (the handshake is not
// modelled); one over IPv6.
func (g *gen) sctp(n int) {
	ports := []uint16{3868, 2905, 36412, 9899}
	for i := range n {
		v6 := i == n-1
		inside := g.chance(50)
		c := g.newConv(g.host(inside, v6), g.host(!inside, v6), inside, flow.ProtoSCTP,
			g.clientPort(), ports[i%len(ports)])
		tags := [2]uint32{g.rng.Uint32(), g.rng.Uint32()} // tag each side expects
		c.seq = [2]uint32{g.rng.Uint32(), g.rng.Uint32()}
		t := g.dur(0, sec(200))
		for range 5 + g.rng.IntN(8) {
			for _, fwd := range []bool{true, false} {
				me, peer := 0, 1
				if !fwd {
					me, peer = 1, 0
				}
				p := c.pkt(fwd)
				p.Seq, p.Ack, p.Payload = c.seq[me], tags[peer], 20+g.rng.IntN(381)
				c.seq[me]++
				t = g.emit(c, t+g.dur(5*time.Millisecond, 400*time.Millisecond), fwd, &p, 0)
			}
		}
	}
}
