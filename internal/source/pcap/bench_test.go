package pcap

import (
	"bytes"
	"io"
	"testing"

	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/source"
)

// benchSizes is a mix of captured lengths: ACKs, full frames, DNS-sized.
var benchSizes = []int{1514, 66, 590, 1514, 60, 128, 1514, 74, 342, 1514}

func benchPcap(tb testing.TB, n int) []byte {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, packet.LinkEthernet, 0)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		size := benchSizes[i%len(benchSizes)]
		if err := w.WritePacket(t0+int64(i)*1000, size, payload(i, size)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func benchPcapng(tb testing.TB, n int) []byte {
	var buf bytes.Buffer
	w, err := NewNgWriter(&buf)
	if err != nil {
		tb.Fatal(err)
	}
	w.AddInterface("eth0", packet.LinkEthernet, 0)
	w.AddInterface("", packet.LinkRaw, 0)
	for i := range n {
		size := benchSizes[i%len(benchSizes)]
		if err := w.WritePacket(i%2, t0+int64(i)*1000, size, payload(i, size)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// benchRead reads b.N packets, starting the in-memory file over (with a
// new Reader) each time it ends: one op is one packet.
func benchRead(b *testing.B, file []byte, packets int) {
	br := bytes.NewReader(file)
	r, err := NewReader(br)
	if err != nil {
		b.Fatal(err)
	}
	var f source.Frame
	b.SetBytes(int64(len(file) / packets))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := r.Next(&f); err != nil {
			if err != io.EOF {
				b.Fatal(err)
			}
			br.Reset(file)
			if r, err = NewReader(br); err != nil {
				b.Fatal(err)
			}
			i--
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/packet")
}

func BenchmarkReadPcap(b *testing.B) {
	const n = 10000
	benchRead(b, benchPcap(b, n), n)
}

func BenchmarkReadPcapng(b *testing.B) {
	const n = 10000
	benchRead(b, benchPcapng(b, n), n)
}
