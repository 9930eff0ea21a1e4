package craft

import (
	"math/rand/v2"
	"net/netip"
	"sort"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
)

// Frame is one captured frame of the scenario. Data is the whole frame
// (nothing is cut by a snap length), so WireLen == len(Data).
type Frame struct {
	Data    []byte
	WireLen int
	Time    int64 // Unix nanoseconds
	Link    packet.LinkType
	Iface   string
}

// Truth is the expected result for one flow of the scenario, in initiator
// orientation: Packets/Bytes/TCPFlags are what Key.Src sent, the Rev fields
// what Key.Dst sent. Bytes are sums of IP total lengths (every fragment
// counts as one packet with its own IP length). For a flow that emits
// several records (active timeout) the counters are the totals over all of
// them and EndReason is the reason of the last one.
type Truth struct {
	Key                   flow.Key
	Packets, Bytes        uint64
	RevPackets, RevBytes  uint64
	TCPFlags, RevTCPFlags uint8
	EndReason             flow.EndReason
	Iface                 string          // interface every frame of the flow was captured on
	VLAN                  uint16          // outermost VLAN ID of the flow's frames, 0 if untagged
	Link                  packet.LinkType // link type of that interface
	First, Last           int64           // times of the flow's first and last frame, Unix ns
	ActiveRecords         bool            // the flow spans more than ActiveTimeout: expect active records before the last one
	Closed                bool            // TCP FIN both ways or RST
}

// The eviction settings Truth.EndReason assumes, and the scenario's clock.
const (
	IdleTimeout      = 15 * time.Second
	ActiveTimeout    = 60 * time.Second
	EndLinger        = 2 * time.Second
	ScenarioDuration = 240 * time.Second // from ScenarioStart to the last frame, exactly
)

// ScenarioStart is the time of the scenario's first possible frame,
// 2026-01-01T00:00:00Z in Unix nanoseconds.
var ScenarioStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// ScenarioIfaces are the interfaces of the scenario and their link types.
var ScenarioIfaces = []struct {
	Name string
	Link packet.LinkType
}{
	{"eth0", packet.LinkEthernet}, // plain, 802.1Q and QinQ frames
	{"any", packet.LinkSLL2},
	{"eth1", packet.LinkSLL},
	{"tun0", packet.LinkRaw},
	{"tun4", packet.LinkIPv4}, // IPv4 flows only
	{"tun6", packet.LinkIPv6}, // IPv6 flows only
}

// Scenario returns a deterministic, time-ordered mix of traffic (same seed,
// same bytes) spanning exactly ScenarioDuration from ScenarioStart, and the
// expected flow records.
//
// The mix (about 320 flows): TCP connections in both directions (inside
// hosts 10.1.0.0/16 and 2001:db8:1::/64 against outside hosts in the
// documentation ranges) with handshake, data both ways and FIN/FIN/ACK close;
// a few closed by RST; a few still open at the end; a few that go quiet; one
// long connection of 170 s with data every ~2 s; one whose first captured
// packet is the SYN-ACK (initiator = its destination); DNS-like UDP
// request/response flows and one-way UDP streams; IPv4 with options; IPv6
// with hop-by-hop, routing, destination options and AH chains; 802.1Q and
// QinQ frames; Linux SLL and SLL2 and raw IP frames; fragmented IPv4 and
// IPv6 UDP datagrams (fragments in order, first fragment first); ICMP and
// ICMPv6 echo (keyed by type 8 / 128, code 0, initiator = request sender);
// ICMP port unreachable (type 3 code 3) and ICMPv6 port unreachable (type 1
// code 4), each its own flow keyed by that type and code; SCTP associations
// exchanging DATA chunks. Every flow has its own ports (or, for ICMP, its
// own address pair), and every flow stays on one interface.
//
// EndReason assumes a table with IdleTimeout, ActiveTimeout and EndLinger,
// timeouts judged on packet time, and a flush with reason eof when the
// capture ends after evicting whatever had expired by the last frame's time:
//
//   - end: TCP closed by FIN both ways (then the last ACK) or by RST; the
//     last packet is at least 5 s before the capture ends, so the linger
//     expires inside the capture.
//   - idle: no close, last packet at least 18 s before the capture ends.
//   - eof: no close, last packet at most 12 s before the capture ends.
//
// No flow has a gap of 12 s or more between its packets, and only the long
// connection (ActiveRecords) lasts longer than 50 s; it emits active
// records, and its Truth holds the totals over all of them.
func Scenario(seed int64) (frames []Frame, truth []Truth) {
	g := build(seed)
	truth = make([]Truth, len(g.convs))
	for i, c := range g.convs {
		truth[i] = c.truth
	}
	return g.frames, truth
}

// conv is one flow being generated.
type conv struct {
	base       Packet // initiator → responder template
	initInside bool   // the initiator is an inside host (SLL direction)
	respTTL    uint8
	truth      Truth
	seq        [2]uint32 // next TCP sequence number: [initiator, responder]
	maxGap     int64
	n          int
}

// gen accumulates the scenario.
type gen struct {
	rng    *rand.Rand
	frames []Frame
	convs  []*conv
	port   uint16 // last client port handed out
	ipID   uint32 // last IP ID / IPv6 fragment ID handed out
	pairs  int    // address pairs handed out for ICMP flows
}

func build(seed int64) *gen {
	g := &gen{rng: rand.New(rand.NewPCG(uint64(seed), 0x7765697220736365)), port: 33000}
	g.tcpClosed(140)
	g.tcpRST(10)
	eof := g.tcpEOF(10)
	g.tcpIdle(8)
	g.tcpLong()
	g.tcpSynAckFirst()
	g.dns(90)
	g.streams(20)
	g.fragmented()
	g.v4Options()
	g.v6Chains()
	g.echo()
	g.unreachable()
	g.sctp(4)
	// The last frame of the capture: a keepalive-sized segment of an open
	// connection, exactly ScenarioDuration after ScenarioStart.
	g.tcp(eof, int64(ScenarioDuration), true, flow.TCPAck|flow.TCPPsh, 1)

	// Stable: frames of one flow were appended in time order and stay so.
	sort.SliceStable(g.frames, func(i, j int) bool { return g.frames[i].Time < g.frames[j].Time })
	end := g.frames[len(g.frames)-1].Time
	for _, c := range g.convs {
		t := &c.truth
		switch {
		case t.Closed:
			t.EndReason = flow.ReasonEnd
		case end-t.Last > int64(IdleTimeout):
			t.EndReason = flow.ReasonIdle
		default:
			t.EndReason = flow.ReasonEOF
		}
		t.ActiveRecords = t.Last-t.First > int64(ActiveTimeout)
	}
	return g
}

// dur returns a random duration in [lo, hi] as nanoseconds.
func (g *gen) dur(lo, hi time.Duration) int64 {
	return int64(lo) + g.rng.Int64N(int64(hi-lo)+1)
}

// chance reports true with probability pct percent.
func (g *gen) chance(pct int) bool { return g.rng.IntN(100) < pct }

// host returns a random inside or outside host.
func (g *gen) host(inside, v6 bool) netip.Addr {
	n := byte(1 + g.rng.IntN(200))
	switch {
	case inside && !v6:
		return netip.AddrFrom4([4]byte{10, 1, byte(g.rng.IntN(2)), n})
	case inside:
		return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 15: n})
	case !v6:
		nets := [][3]byte{{192, 0, 2}, {198, 51, 100}, {203, 0, 113}}
		p := nets[g.rng.IntN(len(nets))]
		return netip.AddrFrom4([4]byte{p[0], p[1], p[2], n})
	}
	return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0xff, 14: byte(g.rng.IntN(4)), 15: n})
}

// pair returns an inside and an outside address used by no other ICMP flow.
func (g *gen) pair(v6 bool) (in, out netip.Addr) {
	g.pairs++
	n := byte(g.pairs)
	if v6 {
		return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 14: 3, 15: n}),
			netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0xff, 14: 9, 15: n})
	}
	return netip.AddrFrom4([4]byte{10, 1, 3, n}), netip.AddrFrom4([4]byte{203, 0, 113, 200 - n})
}

// clientPort hands out a port no other flow uses.
func (g *gen) clientPort() uint16 {
	g.port += uint16(1 + g.rng.IntN(5))
	return g.port
}

// newConv starts a flow from init to resp, on a random interface.
func (g *gen) newConv(init, resp netip.Addr, initInside bool, proto uint8, sport, dport uint16) *conv {
	c := &conv{initInside: initInside, respTTL: 64}
	if g.chance(50) {
		c.respTTL = 128
	}
	c.base = Packet{Src: init, Dst: resp, Proto: proto, SrcPort: sport, DstPort: dport}
	v6 := !init.Is4()
	r := g.rng.IntN(100)
	pick := func(i int) { c.truth.Iface, c.truth.Link = ScenarioIfaces[i].Name, ScenarioIfaces[i].Link }
	switch {
	case r < 55:
		pick(0)
	case r < 63:
		pick(0)
		c.base.VLANs = []uint16{uint16(100 + g.rng.IntN(50))}
	case r < 67:
		pick(0)
		c.base.VLANs = []uint16{uint16(1000 + g.rng.IntN(10)), uint16(10 + g.rng.IntN(20))}
		c.base.QinQ = true
	case r < 79:
		pick(1)
	case r < 87:
		pick(2)
	case r < 94:
		pick(3)
	case v6:
		pick(5)
	default:
		pick(4)
	}
	c.base.Link = c.truth.Link
	k := &c.truth.Key
	k.SetSrc(init)
	k.SetDst(resp)
	k.Proto = proto
	k.SrcPort, k.DstPort = sport, dport
	g.convs = append(g.convs, c)
	return c
}

// pkt returns the template for one direction.
func (c *conv) pkt(fwd bool) Packet {
	p := c.base
	p.Outgoing = c.initInside
	if !fwd {
		p.Src, p.Dst = p.Dst, p.Src
		p.SrcPort, p.DstPort = p.DstPort, p.SrcPort
		p.Outgoing = !p.Outgoing
		p.TTL = c.respTTL
	}
	return p
}

// emit adds p (sent by the initiator if fwd) at relative time t, fragmented
// to mtu if mtu > 0, and counts it. Times within a flow strictly increase.
// It returns the time of the last frame written.
func (g *gen) emit(c *conv, t int64, fwd bool, p *Packet, mtu int) int64 {
	tr := &c.truth
	if c.n > 0 && t <= tr.Last-ScenarioStart {
		t = tr.Last - ScenarioStart + int64(time.Microsecond)
	}
	g.ipID++
	p.ID = g.ipID
	var parts []Frag
	if mtu > 0 {
		parts = p.Fragments(mtu)
	} else {
		parts = []Frag{{Frame: p.Append(nil), IPLen: p.IPLen()}}
	}
	for i, f := range parts {
		at := ScenarioStart + t + int64(i)*int64(20*time.Microsecond)
		g.frames = append(g.frames, Frame{Data: f.Frame, WireLen: len(f.Frame), Time: at, Link: tr.Link, Iface: tr.Iface})
		if c.n == 0 {
			tr.First = at
			if p.Link == packet.LinkEthernet && len(p.VLANs) > 0 {
				tr.VLAN = p.VLANs[0] & 0x0fff
			}
		} else {
			c.maxGap = max(c.maxGap, at-tr.Last)
		}
		c.n++
		tr.Last = at
		if fwd {
			tr.Packets++
			tr.Bytes += uint64(f.IPLen)
			if p.Proto == flow.ProtoTCP {
				tr.TCPFlags |= p.TCPFlags
			}
		} else {
			tr.RevPackets++
			tr.RevBytes += uint64(f.IPLen)
			if p.Proto == flow.ProtoTCP {
				tr.RevTCPFlags |= p.TCPFlags
			}
		}
	}
	return tr.Last - ScenarioStart
}
