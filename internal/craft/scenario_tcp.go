package craft

import (
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

const (
	ack    = flow.TCPAck
	pshAck = flow.TCPPsh | flow.TCPAck
	synAck = flow.TCPSyn | flow.TCPAck
	finAck = flow.TCPFin | flow.TCPAck
	rstAck = flow.TCPRst | flow.TCPAck
	mss    = 1448
)

var serverPorts = []uint16{80, 443, 22, 25, 5432, 3306, 6379, 8080, 8443, 993}

// sec is a relative time of s seconds.
func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// tcp sends one segment with consistent sequence and acknowledgement
// numbers and returns its time.
func (g *gen) tcp(c *conv, t int64, fwd bool, flags uint8, payload int) int64 {
	i, j := 0, 1
	if !fwd {
		i, j = 1, 0
	}
	p := c.pkt(fwd)
	p.TCPFlags, p.Payload = flags, payload
	p.Seq = c.seq[i]
	if flags&flow.TCPAck != 0 {
		p.Ack = c.seq[j]
	}
	adv := uint32(payload)
	if flags&(flow.TCPSyn|flow.TCPFin) != 0 {
		adv++
	}
	c.seq[i] += adv
	return g.emit(c, t, fwd, &p, 0)
}

// newTCP starts a TCP connection from a random inside or outside client.
func (g *gen) newTCP(v6 bool) *conv {
	inside := g.chance(60) // outbound (inside client) or inbound connection
	c := g.newConv(g.host(inside, v6), g.host(!inside, v6), inside, flow.ProtoTCP,
		g.clientPort(), serverPorts[g.rng.IntN(len(serverPorts))])
	c.seq = [2]uint32{g.rng.Uint32(), g.rng.Uint32()}
	return c
}

// rtt returns a random half round-trip time.
func (g *gen) halfRTT() int64 { return g.dur(100*time.Microsecond, 30*time.Millisecond) }

// handshake sends SYN, SYN-ACK, ACK.
func (g *gen) handshake(c *conv, t int64) int64 {
	t = g.tcp(c, t, true, flow.TCPSyn, 0)
	t = g.tcp(c, t+g.halfRTT(), false, synAck, 0)
	return g.tcp(c, t+g.halfRTT(), true, ack, 0)
}

// round sends a request of varied size from one side and a response of one
// to four segments from the other, acknowledged every second segment.
func (g *gen) round(c *conv, t int64, reqFwd bool) int64 {
	t = g.tcp(c, t, reqFwd, pshAck, 1+g.rng.IntN(1400))
	t += g.halfRTT()
	segs := 1 + g.rng.IntN(4)
	for s := range segs {
		n := mss
		if s == segs-1 {
			n = 1 + g.rng.IntN(mss)
		}
		t = g.tcp(c, t+g.dur(0, 2*time.Millisecond), !reqFwd, pshAck, n)
		if s%2 == 1 || s == segs-1 {
			t = g.tcp(c, t+g.halfRTT(), reqFwd, ack, 0)
		}
	}
	return t
}

// rounds sends 1..max rounds, mostly requested by the initiator.
func (g *gen) rounds(c *conv, t int64, maxRounds int) int64 {
	for range 1 + g.rng.IntN(maxRounds) {
		t = g.round(c, t+g.dur(time.Millisecond, 300*time.Millisecond), !g.chance(20))
	}
	return t
}

// closeFIN closes both sides (a random side first) and sends the last ACK.
func (g *gen) closeFIN(c *conv, t int64) int64 {
	first := g.chance(60)
	t = g.tcp(c, t+g.dur(time.Millisecond, 500*time.Millisecond), first, finAck, 0)
	t = g.tcp(c, t+g.halfRTT(), !first, finAck, 0)
	t = g.tcp(c, t+g.halfRTT(), first, ack, 0)
	c.truth.Closed = true
	return t
}

// session is a complete connection: handshake, data, FIN close.
func (g *gen) session(c *conv, t int64) int64 {
	return g.closeFIN(c, g.rounds(c, g.handshake(c, t), 6))
}

func (g *gen) tcpClosed(n int) {
	for range n {
		c := g.newTCP(g.chance(30))
		g.session(c, g.dur(0, sec(200)))
	}
}

// tcpRST: connections reset by either side, three of them refused at once.
func (g *gen) tcpRST(n int) {
	for i := range n {
		c := g.newTCP(g.chance(30))
		t := g.dur(0, sec(200))
		if i < 3 { // connection refused: SYN, RST|ACK
			t = g.tcp(c, t, true, flow.TCPSyn, 0)
			g.tcp(c, t+g.halfRTT(), false, rstAck, 0)
			c.truth.Closed = true
			continue
		}
		t = g.rounds(c, g.handshake(c, t), 3)
		g.tcp(c, t+g.dur(time.Millisecond, time.Second), g.chance(50), rstAck, 0)
		c.truth.Closed = true
	}
}

// tcpEOF: connections still exchanging data every 1-3 s when the capture
// ends. It returns the first, which also sends the capture's last frame.
func (g *gen) tcpEOF(n int) *conv {
	var first *conv
	for range n {
		c := g.newTCP(g.chance(30))
		if first == nil {
			first = c
		}
		t := g.handshake(c, g.dur(sec(200), sec(215)))
		stop := g.dur(sec(232), sec(236))
		for t < stop {
			t = g.round(c, t, !g.chance(20))
			t += g.dur(sec(1), sec(3))
		}
	}
	return first
}

// tcpIdle: connections that stop without closing long before the end.
func (g *gen) tcpIdle(n int) {
	for range n {
		c := g.newTCP(g.chance(30))
		g.rounds(c, g.handshake(c, g.dur(sec(100), sec(180))), 4)
	}
}

// tcpLong: one IPv4 connection of 170 s with data every 1.5-2.5 s, closed
// by FIN; it crosses the active timeout twice.
func (g *gen) tcpLong() {
	c := g.newTCP(false)
	t := g.handshake(c, int64(sec(5)))
	for t < int64(sec(175)) {
		t = g.round(c, t, !g.chance(20))
		t += g.dur(sec(1.5), sec(2.5))
	}
	g.closeFIN(c, t)
}

// tcpSynAckFirst: the capture starts after the SYN. The SYN-ACK's
// destination is the initiator.
func (g *gen) tcpSynAckFirst() {
	c := g.newTCP(false)
	c.seq[0]++ // the SYN was sent before the capture started
	t := g.tcp(c, int64(sec(30)), false, synAck, 0)
	t = g.tcp(c, t+g.halfRTT(), true, ack, 0)
	g.closeFIN(c, g.rounds(c, t, 3))
}
