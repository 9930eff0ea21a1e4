package meter

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/source"
	"github.com/weir-dev/weir/internal/source/pcap"
	"github.com/weir-dev/weir/internal/source/synthetic"
)

// collect is a sink that keeps copies of what it is given.
type collect struct{ recs []flow.Record }

func (c *collect) Write(r []flow.Record) error { c.recs = append(c.recs, r...); return nil }
func (c *collect) Close() error                { return nil }

func tableConfig(max int) flow.Config {
	return flow.Config{MaxFlows: max, IdleTimeout: 15 * time.Second, ActiveTimeout: 60 * time.Second, EndLinger: 2 * time.Second}
}

// TestSyntheticTruth: every packet of a synthetic run is in exactly one
// record, per flow and direction, as the source's own truth says.
func TestSyntheticTruth(t *testing.T) {
	src, err := synthetic.New(synthetic.Config{Flows: 3000, Packets: 50000, IPv6Share: 0.5, UDPShare: 0.5, MaxPayload: 1400, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	var out collect
	p, err := New(Config{Table: tableConfig(4096)}, &out)
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Run(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	truth := src.Truth()
	got := map[flow.Key]flow.Record{}
	for _, r := range out.recs {
		g := got[r.Key]
		g.Packets += r.Packets
		g.Bytes += r.Bytes
		g.RevPackets += r.RevPackets
		g.RevBytes += r.RevBytes
		got[r.Key] = g
		if r.EndReason != flow.ReasonEOF {
			t.Fatalf("record %v ended %v, want eof (no timeouts in 50 ms of packet time)", r.Key, r.EndReason)
		}
	}
	if len(got) != len(truth) || st.Frames != 50000 || st.Records != uint64(len(out.recs)) {
		t.Fatalf("%d flows (truth %d), %d frames, %d records (sink saw %d)", len(got), len(truth), st.Frames, st.Records, len(out.recs))
	}
	for k, tr := range truth {
		g := got[k]
		if g.Packets != tr.Packets || g.Bytes != tr.Bytes || g.RevPackets != tr.RevPackets || g.RevBytes != tr.RevBytes {
			t.Errorf("%v: got %d/%d %d/%d, want %d/%d %d/%d", k, g.Packets, g.RevPackets, g.Bytes, g.RevBytes,
				tr.Packets, tr.RevPackets, tr.Bytes, tr.RevBytes)
		}
	}
}

// TestCancelFlushesWithShutdown: a cancelled run flushes every flow with
// reason shutdown and loses no packet.
func TestCancelFlushesWithShutdown(t *testing.T) {
	src, err := synthetic.New(synthetic.Config{Flows: 100, Packets: 0, Seed: 1, MaxPayload: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out collect
	p, err := New(Config{Table: tableConfig(1024)}, &out)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	st, err := p.Run(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	var pkts uint64
	for _, r := range out.recs {
		if r.EndReason != flow.ReasonShutdown {
			t.Fatalf("reason %v, want shutdown", r.EndReason)
		}
		pkts += r.Packets + r.RevPackets
	}
	if len(out.recs) != 100 || pkts != st.Frames || st.Frames == 0 {
		t.Fatalf("%d records with %d packets for %d frames", len(out.recs), pkts, st.Frames)
	}
}

type discard struct{ n int }

func (d *discard) Write(r []flow.Record) error { d.n += len(r); return nil }
func (d *discard) Close() error                { return nil }

func benchConfig(flows int) synthetic.Config {
	return synthetic.Config{Flows: flows, IPv6Share: 0.5, UDPShare: 0.5, MinPayload: 0, MaxPayload: 1400, Seed: 1}
}

// BenchmarkPipeline times the whole meter per packet — source, decoder,
// flow table and ticks — with flows visited in a seeded random order.
func BenchmarkPipeline(b *testing.B) {
	for _, c := range []struct {
		name  string
		flows int
	}{{"flows=10k", 10000}, {"flows=100k", 100000}} {
		b.Run(c.name, func(b *testing.B) {
			cfg := benchConfig(c.flows)
			cfg.Packets = b.N
			src, err := synthetic.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			p, err := New(Config{Table: tableConfig(c.flows * 2)}, &discard{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			if _, err := p.Run(context.Background(), src); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkReplay times replay of an in-memory pcap file (10k flows,
// 200k packets, header-only snap length) through the real pcap reader:
// what `weir capture --read` does, minus the disk.
func BenchmarkReplay(b *testing.B) {
	const packets = 200000
	cfg := benchConfig(10000)
	cfg.Packets = packets
	src, err := synthetic.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	var file bytes.Buffer
	w, err := pcap.NewWriter(&file, 1, 96)
	if err != nil {
		b.Fatal(err)
	}
	var f source.Frame
	for src.Next(&f) != io.EOF {
		if err := w.WritePacket(f.Time, f.WireLen, f.Data); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var n int
	for n < b.N {
		r, err := pcap.NewReader(bytes.NewReader(file.Bytes()))
		if err != nil {
			b.Fatal(err)
		}
		p, err := New(Config{Table: tableConfig(20000)}, &discard{})
		if err != nil {
			b.Fatal(err)
		}
		st, err := p.Run(context.Background(), r)
		if err != nil {
			b.Fatal(err)
		}
		n += int(st.Frames)
	}
	b.StopTimer()
	// One op is one packet: rescale the total to b.N packets.
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/packet")
}
