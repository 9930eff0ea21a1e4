package meter

import (
	"testing"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/source"
	"github.com/weir-dev/weir/internal/source/synthetic"
)

// TestShardTake: Take hands the batch to the table exactly once per
// packetBatch decoded packets, never for a frame that does not decode,
// and Finish evicts every packet taken into records for the sink.
func TestShardTake(t *testing.T) {
	const n = 1000
	src, err := synthetic.New(synthetic.Config{Flows: 50, Packets: n, Seed: 3, MaxPayload: 200})
	if err != nil {
		t.Fatal(err)
	}
	var out collect
	s, err := NewShard(ShardConfig{Table: tableConfig(1024), Batch: 7}, &out)
	if err != nil {
		t.Fatal(err)
	}
	iface := s.Ifaces().Index("eth9")
	var f source.Frame
	applied, bad := 0, 0
	for i := 0; src.Next(&f) == nil; i++ {
		if s.Take(&f, iface) {
			applied++
		}
		if i%100 == 0 { // a truncated frame in between: dropped, counted, no batch
			g := source.Frame{Data: f.Data[:10], WireLen: 10, Time: f.Time, Link: f.Link}
			if s.Take(&g, iface) {
				t.Fatalf("frame %d: a frame that does not decode applied the batch", i)
			}
			bad++
		}
	}
	if applied != n/packetBatch {
		t.Errorf("%d batches applied for %d packets, want %d", applied, n, n/packetBatch)
	}
	st := s.Stats()
	if st.Table.Packets != n-n%packetBatch || st.Flows == 0 {
		t.Errorf("before Finish: table counted %d packets in %d flows, want %d (the last partial batch still pending)", st.Table.Packets, st.Flows, n-n%packetBatch)
	}
	s.Finish(s.LastTime(), flow.ReasonEOF)
	var pkts uint64
	for _, r := range out.recs {
		pkts += r.Packets + r.RevPackets
		if r.Iface != "eth9" {
			t.Fatalf("record on interface %q, want eth9", r.Iface)
		}
	}
	st = s.Stats()
	var decErrs uint64
	for _, e := range st.Decoder.Errors {
		decErrs += e
	}
	if pkts != n || st.Records != uint64(len(out.recs)) || st.Flows != 0 || decErrs != uint64(bad) || s.Err() != nil {
		t.Errorf("after Finish: %d packets in %d records (stats: %d records, %d flows left), %d decoder errors for %d bad frames, err %v",
			pkts, len(out.recs), st.Records, st.Flows, decErrs, bad, s.Err())
	}
}

// TestShardVLAN: a tag the capture stripped (Frame.HasVLAN) becomes the
// packet's VLAN, its priority bits masked off; without one the frame's own
// (absent) tag stands.
func TestShardVLAN(t *testing.T) {
	src, err := synthetic.New(synthetic.Config{Flows: 2, Packets: 2, Seed: 5, MaxPayload: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out collect
	s, err := NewShard(ShardConfig{Table: tableConfig(16)}, &out)
	if err != nil {
		t.Fatal(err)
	}
	var f source.Frame
	want := map[flow.Key]uint16{}
	for i := 0; src.Next(&f) == nil; i++ {
		f.HasVLAN, f.VLAN = i == 0, 0xa000|42 // PCP 5, VID 42 on the first frame only
		s.Take(&f, 0)
		var p flow.Packet
		if !packet.NewDecoder(packet.Config{}).Decode(f.Link, f.Data, f.WireLen, &p) {
			t.Fatal("synthetic frame does not decode")
		}
		want[p.Key] = map[bool]uint16{true: 42}[i == 0]
	}
	s.Finish(0, flow.ReasonEOF)
	if len(out.recs) != 2 {
		t.Fatalf("%d records, want 2 (two flows)", len(out.recs))
	}
	for _, r := range out.recs {
		if w, ok := want[r.Key]; !ok || r.VLAN != w {
			t.Errorf("flow %v: VLAN %d, want %d", r.Key, r.VLAN, w)
		}
	}
}
