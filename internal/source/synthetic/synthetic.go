// Package synthetic is a deterministic packet source for benchmarks and
// tests: a fixed set of bidirectional flows whose frames are rendered once,
// replayed in a pseudo-random order at a fixed time step, with exact
// expected counters available from Truth.
package synthetic

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"

	"github.com/weir-dev/weir/internal/craft"
	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/source"
)

// Config describes the synthetic traffic. Zero values of Snaplen, StepNs,
// Start and Iface get the defaults noted on each field.
type Config struct {
	Flows      int     // distinct bidirectional flows, 1..MaxFlows
	IPv6Share  float64 // fraction of flows over IPv6, 0..1
	UDPShare   float64 // fraction of flows over UDP, 0..1; the rest are TCP
	MinPayload int     // payload bytes after the transport header, per flow and direction,
	MaxPayload int     // drawn uniformly from [MinPayload, MaxPayload]; at most MaxPayloadLen
	Packets    int     // total packets to emit; 0 = unbounded
	Seed       int64   // same Config, same frames in the same order
	Start      int64   // timestamp of the first packet, Unix ns (default craft.ScenarioStart)
	StepNs     int64   // time between packets (default 1000)
	Snaplen    int     // bytes of each frame kept in Data (default 96: headers only); WireLen is the full length
	Iface      string  // interface name of every frame (default "syn0")
}

// Limits of Config.
const (
	MaxFlows      = 1<<24 - 2 // inside addresses are 10.x.y.z / 2001:db8:1::/104
	MaxPayloadLen = 65000     // keeps every IP total length under 65536
	DefaultSnap   = 96
)

// Truth is the expected counters of one flow; see craft.Truth. Only Key,
// the packet, byte and TCP flag counters, Iface and Link are set.
type Truth = craft.Truth

// Source emits the configured traffic. It is not safe for concurrent use.
//
// Every flow has two pre-rendered Ethernet frames: initiator → responder
// and back, with real checksums (computed over the full payload, of which
// only Snaplen bytes are kept). Next picks a flow and a direction with a
// xorshift generator; a flow's first emitted packet is always in the
// initiator direction, so the first packet's sender is the initiator. TCP
// flows carry ACK|PSH in both directions and have no handshake.
type Source struct {
	flows   int
	packets int
	step    int64
	iface   string

	data  []byte   // all frames back to back, each cut to Snaplen
	off   []uint32 // frame k (flow k/2, direction k%2) is data[off[k]:off[k+1]]
	wire  []uint32 // full frame length of frame k
	ipLen []uint32 // IP total length of frame k
	keys  []flow.Key
	seen  []uint64 // bitset: flows whose first (initiator) packet was emitted
	count []uint64 // packets emitted per frame k

	state   uint64 // xorshift64* state, never zero
	emitted int
	now     int64
}

// New renders the frames of every flow. Memory is about 2*Flows*(Snaplen+40)
// bytes.
func New(cfg Config) (*Source, error) {
	if cfg.Flows < 1 || cfg.Flows > MaxFlows {
		return nil, fmt.Errorf("synthetic: Flows %d out of range 1..%d", cfg.Flows, MaxFlows)
	}
	if cfg.MinPayload < 0 || cfg.MaxPayload < cfg.MinPayload || cfg.MaxPayload > MaxPayloadLen {
		return nil, fmt.Errorf("synthetic: payload range [%d, %d] invalid (0 <= min <= max <= %d)", cfg.MinPayload, cfg.MaxPayload, MaxPayloadLen)
	}
	if !(cfg.IPv6Share >= 0 && cfg.IPv6Share <= 1 && cfg.UDPShare >= 0 && cfg.UDPShare <= 1) {
		return nil, errors.New("synthetic: IPv6Share and UDPShare must be within 0..1")
	}
	if cfg.Packets < 0 || cfg.Snaplen < 0 || cfg.StepNs < 0 {
		return nil, errors.New("synthetic: Packets, Snaplen and StepNs must not be negative")
	}
	if cfg.Snaplen == 0 {
		cfg.Snaplen = DefaultSnap
	}
	if cfg.StepNs == 0 {
		cfg.StepNs = 1000
	}
	if cfg.Start == 0 {
		cfg.Start = craft.ScenarioStart
	}
	if cfg.Iface == "" {
		cfg.Iface = "syn0"
	}
	s := &Source{
		flows: cfg.Flows, packets: cfg.Packets, step: cfg.StepNs, iface: cfg.Iface, now: cfg.Start,
		off:   make([]uint32, 0, 2*cfg.Flows+1),
		wire:  make([]uint32, 2*cfg.Flows),
		ipLen: make([]uint32, 2*cfg.Flows),
		keys:  make([]flow.Key, cfg.Flows),
		seen:  make([]uint64, (cfg.Flows+63)/64),
		count: make([]uint64, 2*cfg.Flows),
		state: splitmix(uint64(cfg.Seed)) | 1,
	}
	s.data = make([]byte, 0, 2*cfg.Flows*min(cfg.Snaplen, 128))
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x73796e7468657463))
	var buf []byte
	for i := range cfg.Flows {
		v6 := rng.Float64() < cfg.IPv6Share
		udp := rng.Float64() < cfg.UDPShare
		p := flowPacket(i, v6, udp)
		k := &s.keys[i]
		k.SetSrc(p.Src)
		k.SetDst(p.Dst)
		k.SrcPort, k.DstPort, k.Proto = p.SrcPort, p.DstPort, p.Proto
		for d := range 2 {
			if d == 1 {
				p.Src, p.Dst, p.SrcPort, p.DstPort = p.Dst, p.Src, p.DstPort, p.SrcPort
			}
			p.Payload = cfg.MinPayload + rng.IntN(cfg.MaxPayload-cfg.MinPayload+1)
			buf = p.Append(buf[:0])
			j := 2*i + d
			s.off = append(s.off, uint32(len(s.data)))
			s.data = append(s.data, buf[:min(len(buf), cfg.Snaplen)]...)
			s.wire[j], s.ipLen[j] = uint32(len(buf)), uint32(p.IPLen())
		}
	}
	s.off = append(s.off, uint32(len(s.data)))
	if uint64(len(s.data)) > 1<<32-1 {
		return nil, errors.New("synthetic: rendered frames exceed 4 GiB; lower Flows or Snaplen")
	}
	return s, nil
}

// flowPacket is flow i's initiator → responder packet: client 10.x.y.z or
// 2001:db8:1::x:y:z (unique per flow), server from a pool of 250.
func flowPacket(i int, v6, udp bool) craft.Packet {
	c := uint32(i + 1)
	srv := byte(1 + i%250)
	p := craft.Packet{Link: packet.LinkEthernet, Proto: flow.ProtoTCP, TCPFlags: flow.TCPAck | flow.TCPPsh,
		SrcPort: uint16(1024 + i%64000), DstPort: 443, Seq: c * 2654435761, Ack: c * 40503}
	if udp {
		p.Proto, p.TCPFlags = flow.ProtoUDP, 0
	}
	if v6 {
		p.Src = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 13: byte(c >> 16), 14: byte(c >> 8), 15: byte(c)})
		p.Dst = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0xff, 15: srv})
	} else {
		p.Src = netip.AddrFrom4([4]byte{10, byte(c >> 16), byte(c >> 8), byte(c)})
		p.Dst = netip.AddrFrom4([4]byte{192, 0, 2, srv})
	}
	return p
}

// splitmix spreads a seed over 64 bits (SplitMix64 finalizer).
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Next fills f with the next frame: Data (a shared pre-rendered frame that
// the caller must not modify), WireLen, Time, Link and Iface. It returns io.EOF
// after Config.Packets frames. It does not allocate.
func (s *Source) Next(f *source.Frame) error {
	if s.packets > 0 && s.emitted >= s.packets {
		return io.EOF
	}
	// xorshift64*: three shifts and a multiply per packet.
	x := s.state
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	s.state = x
	r := x * 0x2545f4914f6cdd1d
	i := int((r >> 32) * uint64(s.flows) >> 32) // multiply-shift range reduction: no division
	d := int(r & 1)
	if w, b := i>>6, uint64(1)<<(i&63); s.seen[w]&b == 0 {
		s.seen[w] |= b
		d = 0 // a flow starts in the initiator direction
	}
	k := 2*i + d
	f.Data = s.data[s.off[k]:s.off[k+1]]
	f.WireLen = int(s.wire[k])
	f.Time = s.now
	f.Link = packet.LinkEthernet
	f.Iface = s.iface
	s.count[k]++
	s.emitted++
	s.now += s.step
	return nil
}

// Emitted returns the number of frames Next has returned.
func (s *Source) Emitted() int { return s.emitted }

// Truth returns the exact counters of every flow emitted so far, keyed by
// the initiator-oriented key. It allocates; call it off the hot path.
func (s *Source) Truth() map[flow.Key]Truth {
	out := make(map[flow.Key]Truth)
	for i, k := range s.keys {
		fwd, rev := s.count[2*i], s.count[2*i+1]
		if fwd == 0 {
			continue
		}
		t := Truth{Key: k, Packets: fwd, Bytes: fwd * uint64(s.ipLen[2*i]),
			RevPackets: rev, RevBytes: rev * uint64(s.ipLen[2*i+1]), Iface: s.iface, Link: packet.LinkEthernet}
		if k.Proto == flow.ProtoTCP {
			t.TCPFlags = flow.TCPAck | flow.TCPPsh
			if rev > 0 {
				t.RevTCPFlags = flow.TCPAck | flow.TCPPsh
			}
		}
		out[k] = t
	}
	return out
}
