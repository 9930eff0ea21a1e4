package store

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// gen makes realistic flow records: Zipf-distributed hosts over ~10k
// addresses (~5% IPv6), Zipf destination ports over common services plus
// ephemeral ones, heavy-tailed counters and µs-resolution times.
type gen struct {
	r      *rand.Rand
	v4, v6 [][16]byte
	z4, z6 *rand.Zipf
	zd4    *rand.Zipf
	zp     *rand.Zipf
	ns     bool // ns-resolution times instead of µs
}

var commonPorts = []uint16{443, 80, 53, 123, 22, 8080, 993, 25, 3389, 8443, 445, 5353, 1900, 3306, 5432, 6379, 9092, 27017, 389, 636, 88, 137, 161, 514, 587, 853, 995, 1194, 1433, 5060}

func newGen(seed uint64) *gen {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	g := &gen{r: r}
	for i := 0; i < 9500; i++ {
		var a [16]byte
		flow.SetAddr4(&a, []byte{10, byte(r.IntN(256)), byte(r.IntN(256)), byte(1 + r.IntN(254))})
		g.v4 = append(g.v4, a)
	}
	for i := 0; i < 500; i++ {
		a := [16]byte{0x20, 0x01, 0x0d, 0xb8}
		for j := 8; j < 16; j++ {
			a[j] = byte(r.IntN(256))
		}
		g.v6 = append(g.v6, a)
	}
	g.z4 = rand.NewZipf(r, 1.2, 1, uint64(len(g.v4)-1))
	g.zd4 = rand.NewZipf(r, 1.3, 4, uint64(len(g.v4)-1))
	g.z6 = rand.NewZipf(r, 1.2, 1, uint64(len(g.v6)-1))
	g.zp = rand.NewZipf(r, 1.5, 1, uint64(len(commonPorts)-1))
	return g
}

func (g *gen) count() uint64 {
	return uint64(math.Exp(math.Abs(g.r.NormFloat64()) * 1.6)) // 1, 2, 3 … with a long tail
}

// window fills n records of one writeout window starting at t0 (Unix ns),
// in eviction order (End roughly ascending).
func (g *gen) window(dst []flow.Record, n int, t0 int64, iface string) []flow.Record {
	r := g.r
	win := int64(5 * time.Minute)
	for i := 0; i < n; i++ {
		var rec flow.Record
		if r.IntN(100) < 5 {
			rec.Key.SrcAddr = g.v6[g.z6.Uint64()]
			rec.Key.DstAddr = g.v6[len(g.v6)-1-int(g.z6.Uint64())]
			rec.Key.IPVersion = 6
		} else {
			rec.Key.SrcAddr = g.v4[g.z4.Uint64()]
			rec.Key.DstAddr = g.v4[len(g.v4)-1-int(g.zd4.Uint64())]
			rec.Key.IPVersion = 4
		}
		switch p := r.IntN(100); {
		case p < 78:
			rec.Key.Proto = flow.ProtoTCP
			rec.TCPFlags = []uint8{0x1b, 0x1b, 0x1b, 0x02, 0x18, 0x14}[r.IntN(6)]
			rec.RevTCPFlags = rec.TCPFlags | 0x10
		case p < 97:
			rec.Key.Proto = flow.ProtoUDP
		default:
			rec.Key.Proto = flow.ProtoICMP
			rec.Key.ICMPType = 8
		}
		if rec.Key.Proto != flow.ProtoICMP {
			rec.Key.SrcPort = uint16(32768 + r.IntN(28232))
			if r.IntN(10) == 0 {
				rec.Key.DstPort = uint16(1024 + r.IntN(64511))
			} else {
				rec.Key.DstPort = commonPorts[g.zp.Uint64()]
			}
		}
		rec.Packets = g.count()
		rec.Bytes = rec.Packets * uint64(40+r.IntN(200)*r.IntN(8))
		rec.RevPackets = g.count() - 1
		rec.RevBytes = rec.RevPackets * uint64(40+r.IntN(1460))
		rec.EndReason = flow.ReasonIdle
		if r.IntN(20) == 0 {
			rec.EndReason = flow.ReasonActive
		}
		end := t0 + win*int64(i)/int64(n) + r.Int64N(int64(time.Second))
		dur := int64(math.Exp(r.NormFloat64()*2) * float64(100*time.Millisecond))
		start := max(end-dur, t0)
		if !g.ns {
			start -= start % 1000
			end -= end % 1000
		}
		rec.Start, rec.End = start, end
		rec.Iface = iface
		dst = append(dst, rec)
	}
	return dst
}
