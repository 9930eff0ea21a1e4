// Package gendb generates deterministic, realistic flow records for
// building large stores: Zipf-distributed client and server hosts and
// service ports, ~5% IPv6, both directions counted, one batch per time
// block. The same Config always yields the same records, so benchmarks
// and tests can be rerun on identical data.
package gendb

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// Config shapes the data. Zero values get the defaults of the issue's
// benchmark store: 7 days × 288 blocks × 5,000 flows = 10.08M rows.
type Config struct {
	Days          int       // default 7
	BlocksPerDay  int       // default 288 (one block per 5 minutes)
	FlowsPerBlock int       // default 5000
	Start         time.Time // first block; default 2026-01-01T00:00:00Z
	Seed          uint64    // default 1
	Clients       int       // distinct client hosts, default 20000
	Servers       int       // distinct server hosts, default 2000
	IPv6Share     float64   // share of IPv6 flows, default 0.05
	Ifaces        []string  // interfaces the flows are spread over, default ["eth0"]
}

// Limits keep a mistyped flag from asking for unbounded work.
const (
	MaxRows  = 1 << 31
	MaxHosts = 1 << 24
)

func (c Config) normalize() (Config, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Days, 7)
	def(&c.BlocksPerDay, 288)
	def(&c.FlowsPerBlock, 5000)
	def(&c.Clients, 20000)
	def(&c.Servers, 2000)
	if c.Start.IsZero() {
		c.Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.IPv6Share == 0 {
		c.IPv6Share = 0.05
	}
	if len(c.Ifaces) == 0 {
		c.Ifaces = []string{"eth0"}
	}
	switch {
	case c.Days < 0 || c.BlocksPerDay < 0 || c.FlowsPerBlock < 0 || c.Clients < 0 || c.Servers < 0:
		return c, errors.New("gendb: negative size")
	case int64(c.Days)*int64(c.BlocksPerDay)*int64(c.FlowsPerBlock) > MaxRows:
		return c, fmt.Errorf("gendb: more than %d rows", int64(MaxRows))
	case c.Clients > MaxHosts || c.Servers > MaxHosts:
		return c, fmt.Errorf("gendb: more than %d hosts", MaxHosts)
	case c.IPv6Share < 0 || c.IPv6Share > 1:
		return c, errors.New("gendb: IPv6Share must be within 0..1")
	}
	return c, nil
}

// Rows returns the number of records Generate yields for cfg.
func (c Config) Rows() int64 {
	n, err := c.normalize()
	if err != nil {
		return 0
	}
	return int64(n.Days) * int64(n.BlocksPerDay) * int64(n.FlowsPerBlock)
}

// services are the destination ports flows go to, most popular first, with
// their transport protocol; Zipf picks among them.
var services = []struct {
	port  uint16
	proto uint8
}{
	{443, flow.ProtoTCP}, {80, flow.ProtoTCP}, {53, flow.ProtoUDP}, {22, flow.ProtoTCP}, {123, flow.ProtoUDP},
	{8080, flow.ProtoTCP}, {5432, flow.ProtoTCP}, {3306, flow.ProtoTCP}, {6379, flow.ProtoTCP}, {9092, flow.ProtoTCP},
	{25, flow.ProtoTCP}, {993, flow.ProtoTCP}, {8443, flow.ProtoTCP}, {161, flow.ProtoUDP}, {514, flow.ProtoUDP},
	{3478, flow.ProtoUDP}, {9200, flow.ProtoTCP}, {27017, flow.ProtoTCP}, {11211, flow.ProtoTCP}, {5353, flow.ProtoUDP},
}

// Generate calls fn once per block, in time order, with the block's start
// (Unix ns) and its records. recs is reused between calls: fn must not keep
// it. An error from fn stops generation and is returned.
func Generate(cfg Config, fn func(blockStart int64, recs []flow.Record) error) error {
	c, err := cfg.normalize()
	if err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(c.Seed, c.Seed^0x5eed))
	clients := rand.NewZipf(r, 1.1, 8, uint64(c.Clients-1))
	servers := rand.NewZipf(r, 1.2, 4, uint64(c.Servers-1))
	ports := rand.NewZipf(r, 1.3, 1, uint64(len(services)-1))
	sizes := rand.NewZipf(r, 1.5, 2, 1<<20) // packets per flow: mostly few, some huge
	step := int64(24*time.Hour) / int64(c.BlocksPerDay)
	recs := make([]flow.Record, c.FlowsPerBlock)
	for b := range c.Days * c.BlocksPerDay {
		t0 := c.Start.UnixNano() + int64(b)*step
		for i := range recs {
			rec := &recs[i]
			*rec = flow.Record{}
			v6 := r.Float64() < c.IPv6Share
			setHost(&rec.Key.SrcAddr, v6, false, uint32(clients.Uint64()))
			setHost(&rec.Key.DstAddr, v6, true, uint32(servers.Uint64()))
			rec.Key.IPVersion = 4
			if v6 {
				rec.Key.IPVersion = 6
			}
			svc := services[ports.Uint64()]
			rec.Key.Proto, rec.Key.DstPort = svc.proto, svc.port
			rec.Key.SrcPort = uint16(32768 + r.IntN(28232))
			if r.IntN(50) == 0 { // 2% ICMP echo
				rec.Key.Proto, rec.Key.SrcPort, rec.Key.DstPort = flow.ProtoICMP, 0, 0
				if v6 {
					rec.Key.Proto = flow.ProtoICMPv6
				}
				rec.Key.ICMPType = 8
			}
			p := sizes.Uint64() + 1
			rec.Packets = p
			rec.Bytes = p * uint64(60+r.IntN(200))
			rec.RevPackets = p * uint64(1+r.IntN(3)) / 2
			rec.RevBytes = rec.RevPackets * uint64(60+r.IntN(1400))
			if rec.Key.Proto == flow.ProtoTCP {
				rec.TCPFlags, rec.RevTCPFlags = flow.TCPSyn|flow.TCPAck|flow.TCPFin, flow.TCPSyn|flow.TCPAck|flow.TCPFin
			}
			rec.Start = t0 + r.Int64N(step)
			rec.End = rec.Start + r.Int64N(step)
			rec.EndReason = []flow.EndReason{flow.ReasonIdle, flow.ReasonEnd, flow.ReasonEnd, flow.ReasonActive}[r.IntN(4)]
			rec.Iface = c.Ifaces[r.IntN(len(c.Ifaces))]
		}
		if err := fn(t0, recs); err != nil {
			return err
		}
	}
	return nil
}

// setHost writes host number n of the client (10.0.0.0/8, 2001:db8:c::/64)
// or server (172.16.0.0/12, 2001:db8:5::/64) population.
func setHost(dst *[16]byte, v6, server bool, n uint32) {
	if !v6 {
		a := [4]byte{10, byte(n >> 16), byte(n >> 8), byte(n)}
		if server {
			a = [4]byte{172, 16 | byte(n>>16)&0x0f, byte(n >> 8), byte(n)}
		}
		flow.SetAddr4(dst, a[:])
		return
	}
	*dst = [16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0x0c}
	if server {
		dst[5] = 0x05
	}
	dst[12], dst[13], dst[14], dst[15] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
}
