package conntrack

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"testing"
)

// loadDump reads a captured dump (concatenated netlink messages, gzip)
// and splits it into messages.
func loadDump(tb testing.TB, name string) [][]byte {
	tb.Helper()
	f, err := os.ReadFile(name)
	if err != nil {
		tb.Fatal(err)
	}
	z, err := gzip.NewReader(bytes.NewReader(f))
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := io.ReadAll(z)
	if err != nil {
		tb.Fatal(err)
	}
	var msgs [][]byte
	for len(raw) > 0 {
		msg, rest, err := NextMessage(raw)
		if err != nil {
			tb.Fatal(err)
		}
		msgs, raw = append(msgs, msg), rest
	}
	return msgs
}

// BenchmarkDecode replays a dump of 1,000 real conntrack entries (600
// IPv4, 400 IPv6 UDP flows with accounting and timestamps, captured by
// TestCaptureDump1000) through one Decoder and Conn; one op is the whole
// dump. It reports ns per message; the goal is 0 allocs/op.
func BenchmarkDecode(b *testing.B) {
	msgs := loadDump(b, "testdata/dump1000.bin.gz")
	var d Decoder
	var c Conn
	var pkts uint64
	size := 0
	for _, m := range msgs {
		size += len(m)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		for _, m := range msgs {
			if err := d.Decode(&c, m); err != nil {
				b.Fatal(err)
			}
			pkts += c.CountersOrig.Packets
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/msg")
	if pkts == 0 {
		b.Fatal("no packets counted")
	}
}

// TestDump1000 checks the benchmark's input: 1,000 entries that all decode.
func TestDump1000(t *testing.T) {
	msgs := loadDump(t, "testdata/dump1000.bin.gz")
	var c Conn
	v6 := 0
	for i, m := range msgs {
		if err := Decode(&c, m); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if c.Orig.V6 {
			v6++
		}
	}
	if len(msgs) != 1000 || v6 != 400 {
		t.Errorf("%d messages, %d IPv6; want 1000, 400", len(msgs), v6)
	}
}
