package ipfix

import (
	"fmt"
	"net"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// BenchmarkAntreaCycle is the export cycle of Antrea's flow exporter
// benchmarks in weir's terms: a store of 20,000 connection records (one in
// ten ending) and 20,000 deny records (one in ten idle) is scanned, and
// the 4,000 due records are encoded and sent, unpaced, as IPFIX over UDP
// to a receiver on loopback that drains its socket. One op is one cycle.
// mtu=1400 is the default (about 170 datagrams a cycle); mtu=65000 shows
// how much of the cycle is the kernel's per-datagram cost.
func BenchmarkAntreaCycle(b *testing.B) {
	for _, mtu := range []int{1400, 65000} {
		b.Run(fmt.Sprintf("mtu=%d", mtu), func(b *testing.B) { benchAntreaCycle(b, mtu) })
	}
}

func benchAntreaCycle(b *testing.B, mtu int) {
	l, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	l.SetReadBuffer(8 << 20)
	go func() {
		buf := make([]byte, 65536)
		for {
			if _, err := l.Read(buf); err != nil {
				return
			}
		}
	}()
	defer l.Close()
	x, err := New(Config{URL: "ipfix+udp://" + l.LocalAddr().String(), Rate: -1, MTU: mtu})
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	conns, deny := records(20000), records(20000)
	for i := range conns {
		conns[i].EndReason, deny[i].EndReason = flow.ReasonActive, flow.ReasonActive
		if i%10 == 0 {
			conns[i].EndReason, deny[i].EndReason = flow.ReasonEnd, flow.ReasonIdle
		}
	}
	due := make([]flow.Record, 0, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for range b.N {
		due = due[:0]
		for _, set := range [][]flow.Record{conns, deny} {
			for i := range set {
				if r := &set[i]; r.EndReason == flow.ReasonEnd || r.EndReason == flow.ReasonIdle {
					due = append(due, *r)
				}
			}
		}
		if err := x.Write(due); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportCPU(b, cpu) // the receiver's reads included: the collector's side of loopback
	if len(due) != 4000 {
		b.Fatalf("%d records due per cycle, want 4,000", len(due))
	}
	st := x.Stats()
	if st.SendErrors != 0 || st.DroppedRecords != 0 {
		b.Fatalf("send errors: %+v", st)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/4000, "ns/record")
	b.ReportMetric(float64(st.Messages)/float64(b.N), "msgs/op")
	b.ReportMetric(float64(x.tr.(*udpTransport).batch.calls)/float64(b.N), "sends/op")
}
