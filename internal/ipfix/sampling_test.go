package ipfix

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// samplings are the intervals withSampling gives records: unsampled (0
// and 1) and two sources sampling 1 in 4 and 1 in 100.
var samplings = []uint32{0, 4, 1, 100, 4}

// withSampling gives record i one of samplings.
func withSampling(rec *flow.Record, i int) { rec.Sampling = samplings[i%len(samplings)] }

// unsampled is the Sampling a record decodes with: 1 travels as unsampled.
func unsampled(n uint32) uint32 {
	if n <= 1 {
		return 0
	}
	return n
}

// collectMsgs returns an emit function that keeps copies of the messages.
func collectMsgs(msgs *[][]byte) func([]byte) error {
	return func(m []byte) error { *msgs = append(*msgs, append([]byte(nil), m...)); return nil }
}

// TestSamplingRoundTrip: records of both families, with and without
// drops, unsampled and sampled 1 in 4 and 1 in 100, read back by an
// independent parser: sampled records (only they) are in the sampled
// templates with selectorId = their interval, every interval is in an
// options record (scope observationDomainId; selectorId, selectorAlgorithm,
// samplingInterval) of a message before the first record that uses it, and
// again with every template refresh; sequence numbers count the options
// records. weir's decoder gives every record its Sampling back, with no
// unknown selector and no sequence gap.
func TestSamplingRoundTrip(t *testing.T) {
	var msgs [][]byte
	e, _ := NewEncoder(Config{Domain: 42, RefreshMessages: 10}, collectMsgs(&msgs))
	r := rand.New(rand.NewPCG(21, 22))
	const n = 3000
	recs := make([]flow.Record, n)
	for i := range recs {
		recs[i] = randRecord(r, i)
		withDrops(&recs[i], i)
		withSampling(&recs[i], i)
		if err := e.Add(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	e.Flush()
	var templates map[uint16][]wireField
	var got []decoded
	var seq uint32
	announced := map[uint32]bool{}
	for k, b := range msgs {
		m := parseMessage(t, b, templates)
		templates = m.templates
		if m.seq != seq {
			t.Fatalf("message %d: sequence %d, want %d (flow and options records before it)", k, m.seq, seq)
		}
		seq += uint32(len(m.records) + len(m.options))
		hasTmpl := binary.BigEndian.Uint16(b[16:]) == 2
		if len(m.options) > 0 && !hasTmpl {
			t.Errorf("message %d: options records without the templates", k)
		}
		if hasTmpl && k > 2 && len(m.options) != 2 { // from the fourth message (after 1 in 100 came): both, every refresh
			t.Errorf("message %d: %d options records with the templates, want 2", k, len(m.options))
		}
		for _, o := range m.options {
			want := map[string][2]uint64{"0/149": {4, 42}, "0/304": {2, selectorUniform}}
			for f, w := range want {
				if len(o[f]) != int(w[0]) || u(o[f]) != w[1] {
					t.Fatalf("message %d: options field %s = %x, want %d", k, f, o[f], w[1])
				}
			}
			if len(o) != 4 || len(o["0/302"]) != 4 || u(o["0/302"]) != u(o["0/34"]) || len(o["0/34"]) != 4 {
				t.Fatalf("message %d: options record %v", k, o)
			}
			announced[uint32(u(o["0/34"]))] = true
		}
		for _, d := range m.records {
			w := &recs[len(got)]
			if s := unsampled(w.Sampling); s != 0 {
				if !announced[s] || u(d["0/302"]) != uint64(s) || len(d["0/302"]) != 4 {
					t.Fatalf("record %d (1 in %d): selectorId %x, announced %v", len(got), s, d["0/302"], announced)
				}
			} else if _, ok := d["0/302"]; ok {
				t.Fatalf("unsampled record %d with a selectorId", len(got))
			}
			nf := map[bool]int{false: 17, true: 20}[w.DropPackets > 0]
			if w.Sampling > 1 {
				nf++
			}
			if len(d) != nf || u(d["0/2"]) != w.Packets || string(d["0/82"]) != w.Iface[:min(len(w.Iface), maxName)] {
				t.Fatalf("record %d: %d fields, want %d; packets %d, want %d", len(got), len(d), nf, u(d["0/2"]), w.Packets)
			}
			got = append(got, d)
		}
	}
	if len(got) != n || e.Sequence() != seq {
		t.Fatalf("%d records of %d; Sequence() %d, want %d", len(got), n, e.Sequence(), seq)
	}
	d := NewDecoder(DecoderConfig{})
	var i int
	for _, m := range msgs {
		if err := d.Decode(exporter, m, func(r *flow.Record) {
			if want := unsampled(recs[i].Sampling); r.Sampling != want || r.Packets != recs[i].Packets {
				t.Fatalf("decoded record %d: sampling %d packets %d, want %d and %d", i, r.Sampling, r.Packets, want, recs[i].Packets)
			}
			i++
		}); err != nil {
			t.Fatal(err)
		}
	}
	st := d.Stats()
	if i != n || st.SequenceGaps != 0 || st.Errors != [NumDecodeErrors]uint64{} || st.TemplatesLive != 9 || st.OptionsRecords == 0 {
		t.Errorf("decoded %d of %d records; stats %+v", i, n, st)
	}
}

// TestUnsampledUnchanged: records with drops, marked unsampled as 0 or 1,
// give byte for byte what the encoder gave before sampling existed (the
// digests were taken then), at the smallest and the default MTU.
func TestUnsampledUnchanged(t *testing.T) {
	for mtu, want := range map[int]string{
		MinMTU:     "ccb748439501eb05301884ed676b1f9631ed1ef929bb45e398b0d58e6e200e76",
		DefaultMTU: "153943cf3a0fe9b4a5564c19d3af1628d2311308907b4a348e18559d3911b06d",
	} {
		now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
		h := sha256.New()
		e, _ := NewEncoder(Config{Domain: 9, MTU: mtu, RefreshMessages: 7, Now: func() time.Time { return now }}, func(m []byte) error { h.Write(m); return nil })
		r := rand.New(rand.NewPCG(15, 16))
		for i := range 1000 {
			rec := randRecord(r, i)
			withDrops(&rec, i)
			rec.Sampling = uint32(i % 2)
			if err := e.Add(&rec); err != nil {
				t.Fatal(err)
			}
		}
		e.Flush()
		if got := fmt.Sprintf("%x", h.Sum(nil)); got != want {
			t.Errorf("MTU %d: output digest %s changed", mtu, got)
		}
	}
}

// TestSamplingSmallMTU: at MinMTU, with all eight templates and sixteen
// intervals announced the templates need several messages; each stays
// within the MTU, and every record decodes with its interval. More
// intervals than an encoder announces at once (maxSamplers) still decode
// right: the newest take the oldest's places, and a selectorId is its
// interval, so what a collector learnt stays true.
func TestSamplingSmallMTU(t *testing.T) {
	var msgs [][]byte
	e, _ := NewEncoder(Config{MTU: MinMTU, RefreshMessages: 5}, collectMsgs(&msgs))
	r := rand.New(rand.NewPCG(23, 24))
	var recs []flow.Record
	for i := range 400 {
		rec := randRecord(r, i)
		rec.Iface = string(make([]byte, 300)) // the longest name
		withDrops(&rec, i)
		rec.Sampling = uint32(2 + i%(maxSamplers+4))
		if i%9 == 0 {
			rec.Sampling = 0
		}
		if err := e.Add(&rec); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	e.Flush()
	d := NewDecoder(DecoderConfig{})
	i, most := 0, 0
	var templates map[uint16][]wireField
	for k, m := range msgs {
		if len(m) > MinMTU {
			t.Fatalf("message %d of %d bytes at MTU %d", k, len(m), MinMTU)
		}
		pm := parseMessage(t, m, templates)
		templates = pm.templates
		most = max(most, len(pm.options))
		if err := d.Decode(exporter, m, func(r *flow.Record) {
			if want := unsampled(recs[i].Sampling); r.Sampling != want {
				t.Fatalf("record %d: sampling %d, want %d", i, r.Sampling, want)
			}
			i++
		}); err != nil {
			t.Fatal(err)
		}
	}
	if st := d.Stats(); i != len(recs) || st.SequenceGaps != 0 || st.Errors != [NumDecodeErrors]uint64{} {
		t.Errorf("%d of %d records, %+v", i, len(recs), st)
	}
	if most > maxSamplers || most < maxSamplers/2 {
		t.Errorf("at most %d options records in a message; bound %d", most, maxSamplers)
	}
}

// TestSamplingAllocs: encoding and decoding sampled records (intervals
// already announced and learnt) allocate nothing, nor does decoding a
// refresh of the templates and the sampling options.
func TestSamplingAllocs(t *testing.T) {
	var msgs [][]byte
	e, _ := NewEncoder(Config{}, collectMsgs(&msgs))
	r := rand.New(rand.NewPCG(25, 26))
	recs := make([]flow.Record, 7)
	for i := range recs {
		recs[i] = randRecord(r, i)
		withDrops(&recs[i], i)
		withSampling(&recs[i], i)
	}
	i := 0
	if a := testing.AllocsPerRun(10000, func() { e.Add(&recs[i%len(recs)]); i++ }); a != 0 {
		t.Errorf("encoding: %v allocations per record", a)
	}
	e.Flush()
	d := NewDecoder(DecoderConfig{})
	emit := func(*flow.Record) {}
	for _, m := range msgs {
		d.Decode(exporter, m, emit)
	}
	refresh := msgs[3] // the templates, both intervals, records
	if binary.BigEndian.Uint16(refresh[16:]) != templateSet || len(parseMessage(t, refresh, nil).options) != 2 {
		t.Fatal("message 3 is not a refresh with both intervals")
	}
	if a := testing.AllocsPerRun(100, func() { d.Decode(exporter, msgs[len(msgs)/2], emit); d.Decode(exporter, refresh, emit) }); a != 0 {
		t.Errorf("decoding: %v allocations per message", a)
	}
}

// encodedSampled returns weir's messages for n records of mixed sampling.
func encodedSampled(n int) [][]byte {
	r := rand.New(rand.NewPCG(27, 28))
	var msgs [][]byte
	e, _ := NewEncoder(Config{}, collectMsgs(&msgs))
	for i := range n {
		rec := randRecord(r, i)
		withSampling(&rec, i)
		e.Add(&rec)
	}
	e.Flush()
	return msgs
}

// BenchmarkAddSampled: as BenchmarkAdd, records sampled 1 in 4 and 1 in
// 100 (IPv4 and IPv6) between unsampled ones.
func BenchmarkAddSampled(b *testing.B) {
	e, _ := NewEncoder(Config{}, func([]byte) error { return nil })
	r := rand.New(rand.NewPCG(9, 10))
	recs := []flow.Record{randRecord(r, 1), randRecord(r, 3), randRecord(r, 4), randRecord(r, 6)}
	recs[1].Sampling, recs[2].Sampling, recs[3].Sampling = 4, 100, 4
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := e.Add(&recs[i&3]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeSampled: as BenchmarkDecode, of messages with sampled
// records (each looks up its selector).
func BenchmarkDecodeSampled(b *testing.B) {
	msgs := encodedSampled(5000)
	d := NewDecoder(DecoderConfig{})
	var n int
	emit := func(*flow.Record) { n++ }
	for _, m := range msgs {
		d.Decode(exporter, m, emit)
	}
	n = 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		d.Decode(exporter, msgs[3+i%(len(msgs)-3)], emit)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/record")
}

// TestSamplingReset: a new transport session (Reset) sends the sampled
// templates and every interval again before any record, and numbers from
// 0 although the dropped message held options records.
func TestSamplingReset(t *testing.T) {
	var msgs [][]byte
	e, _ := NewEncoder(Config{RefreshMessages: -1, RefreshInterval: -1}, collectMsgs(&msgs))
	rec := randRecord(rand.New(rand.NewPCG(31, 32)), 1)
	for _, n := range []uint32{4, 100, 4} {
		rec.Sampling = n
		e.Add(&rec)
	}
	// Sent: the options record of 1 in 4 and its record; open: both
	// options records and two records.
	if e.Sequence() != 2+4 || len(msgs) != 1 {
		t.Fatalf("Sequence() %d, %d messages sent", e.Sequence(), len(msgs))
	}
	if n := e.Reset(); n != 2 || e.Sequence() != 0 {
		t.Errorf("Reset dropped %d records, Sequence() %d; want 2 and 0", n, e.Sequence())
	}
	e.Add(&rec)
	e.Flush()
	m := parseMessage(t, msgs[len(msgs)-1], nil)
	if m.seq != 0 || len(m.options) != 2 || len(m.records) != 1 || u(m.records[0]["0/302"]) != 4 {
		t.Errorf("after Reset: sequence %d, %d options records, %d records", m.seq, len(m.options), len(m.records))
	}
}
