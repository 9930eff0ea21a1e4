package ipfix

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// encodeAll encodes recs with cfg and returns the messages and the flow
// records each one counted (Encoder.Flows during emit).
func encodeAll(t *testing.T, cfg Config, recs []flow.Record) (msgs [][]byte, flows []uint32) {
	t.Helper()
	var e *Encoder
	e, err := NewEncoder(cfg, func(m []byte) error {
		msgs = append(msgs, append([]byte(nil), m...))
		flows = append(flows, e.Flows())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if err := e.Add(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	return msgs, flows
}

// mixedRecords are records of every shape: both families, drops, two
// sampling intervals, NAT, deny and enrichment, and names of every length
// (so that sets end on every alignment).
func mixedRecords(n int) []flow.Record {
	r := rand.New(rand.NewPCG(21, 22))
	recs := make([]flow.Record, n)
	for i := range recs {
		recs[i] = randRecord(r, i)
		withDrops(&recs[i], i)
		recs[i].Sampling = []uint32{0, 4, 0, 100}[i%4]
		recs[i].Iface = string(make([]byte, i%9))
		if i%6 == 1 {
			recs[i].PostNAT = recs[i].Key
			recs[i].PostNAT.SrcPort++
		}
		if i%11 == 5 {
			recs[i].Verdict, recs[i].Rule = flow.VerdictDeny, "deny-"+string(rune('a'+i%26))
		}
		if i%13 == 4 {
			recs[i].SrcWorkload = &flow.Workload{Name: "web", Namespace: "shop"}
		}
	}
	return recs
}

// TestPadding: every set of every message (templates, options templates,
// options data, flow records of every template) ends on a 4-octet
// boundary, its padding zero octets fewer than its shortest record
// (parseMessage checks those) and no message exceeds the MTU; weir's own
// decoder reads every record back.
func TestPadding(t *testing.T) {
	recs := mixedRecords(3000)
	for _, mtu := range []int{MinMTU, 577, 578, 579, DefaultMTU} {
		msgs, _ := encodeAll(t, Config{Domain: 5, MTU: mtu, PEN: testPEN, RefreshMessages: 9}, recs)
		known := map[uint16][]wireField{}
		sets, padded := 0, 0
		for _, m := range msgs {
			if len(m) > mtu {
				t.Fatalf("MTU %d: message of %d octets", mtu, len(m))
			}
			pm := parseMessage(t, m, known)
			for id, f := range pm.templates {
				known[id] = f
			}
			for p := headerLen; p < len(m); p += int(binary.BigEndian.Uint16(m[p+2:])) {
				sets++
				if l := binary.BigEndian.Uint16(m[p+2:]); l%4 != 0 {
					t.Fatalf("MTU %d: set %d of %d octets", mtu, binary.BigEndian.Uint16(m[p:]), l)
				}
				if m[p+int(binary.BigEndian.Uint16(m[p+2:]))-1] == 0 {
					padded++ // padded, or a record ending in 0
				}
			}
		}
		d := NewDecoder(DecoderConfig{PEN: testPEN})
		n := 0
		for _, m := range msgs {
			if err := d.Decode(netip.MustParseAddrPort("192.0.2.1:4739"), m, func(*flow.Record) { n++ }); err != nil {
				t.Fatal(err)
			}
		}
		if st := d.Stats(); n != len(recs) || st.Errors != [NumDecodeErrors]uint64{} || st.SequenceGaps != 0 {
			t.Errorf("MTU %d: decoded %d of %d records, stats %+v", mtu, n, len(recs), st)
		}
		if padded < sets/4 {
			t.Errorf("MTU %d: %d sets, %d end in a zero octet: padding shows little", mtu, sets, padded)
		}
	}
}

// TestOneSet: with OneSet every message holds one set and every template
// set one template, unpadded (what vmware/go-ipfix's collector reads);
// sequence numbers still count the data records before each message, and
// the records decode whole.
func TestOneSet(t *testing.T) {
	recs := mixedRecords(2000)
	msgs, _ := encodeAll(t, Config{Domain: 5, OneSet: true, RefreshMessages: 20}, recs)
	known := map[uint16][]wireField{}
	var seq uint32
	for i, m := range msgs {
		if l := int(binary.BigEndian.Uint16(m[headerLen+2:])); headerLen+l != len(m) {
			t.Fatalf("message %d: first set of %d octets in a message of %d", i, l, len(m))
		}
		if got := binary.BigEndian.Uint32(m[8:]); got != seq {
			t.Fatalf("message %d: sequence %d, want %d", i, got, seq)
		}
		pm := parseMessage(t, m, known)
		if id := binary.BigEndian.Uint16(m[headerLen:]); (id == 2 || id == 3) && len(pm.templates)-len(known) > 1 {
			t.Fatalf("message %d: a template set with %d templates", i, len(pm.templates)-len(known))
		}
		for id, f := range pm.templates {
			known[id] = f
		}
		seq += uint32(len(pm.records) + len(pm.options))
	}
	d := NewDecoder(DecoderConfig{})
	n := 0
	for _, m := range msgs {
		if err := d.Decode(netip.MustParseAddrPort("192.0.2.1:4739"), m, func(*flow.Record) { n++ }); err != nil {
			t.Fatal(err)
		}
	}
	if n != len(recs) || d.Stats().SequenceGaps != 0 {
		t.Errorf("decoded %d of %d records, stats %+v", n, len(recs), d.Stats())
	}
}

// TestUnidirectional: each record goes out as a forward and a reverse data
// record (a direction without packets left out), in templates without
// reverse elements; weir's decoder reads them back with the key swapped
// for the reverse, ICMP echo requests answered by replies, the counters
// and flags of each direction, the drops on the first only; both records
// of a flow share a message, and Flows counts flows.
func TestUnidirectional(t *testing.T) {
	recs := mixedRecords(3000)
	for i := range recs {
		switch i % 10 {
		case 3:
			recs[i].RevPackets, recs[i].RevBytes = 0, 0 // forward only
		case 7:
			recs[i].Packets, recs[i].Bytes = 0, 0 // reverse only
		}
	}
	msgs, flows := encodeAll(t, Config{Domain: 5, Unidirectional: true, PEN: testPEN}, recs)
	var want []flow.Record
	per := make([]int, len(recs)) // data records of each flow
	for i := range recs {
		r := recs[i]
		fwd, rev := r.Packets > 0 || r.RevPackets == 0, r.RevPackets > 0
		per[i] = map[bool]int{false: 1, true: 2}[fwd && rev]
		if fwd {
			f := r
			f.RevPackets, f.RevBytes, f.RevTCPFlags = 0, 0, 0
			want = append(want, f)
		}
		if rev {
			v := r
			v.Key.SrcAddr, v.Key.DstAddr, v.Key.SrcPort, v.Key.DstPort = r.Key.DstAddr, r.Key.SrcAddr, r.Key.DstPort, r.Key.SrcPort
			if v.Key.ICMPType == 8 && v.Key.Proto == flow.ProtoICMP {
				v.Key.ICMPType = 0
			}
			if v.Key.ICMPType == 128 && v.Key.Proto == flow.ProtoICMPv6 {
				v.Key.ICMPType = 129
			}
			v.Packets, v.Bytes, v.TCPFlags, v.RevPackets, v.RevBytes, v.RevTCPFlags = r.RevPackets, r.RevBytes, r.RevTCPFlags, 0, 0, 0
			v.SrcWorkload, v.DstWorkload = r.DstWorkload, r.SrcWorkload
			if fwd {
				v.DropPackets, v.DropBytes = 0, 0
			}
			want = append(want, v)
		}
	}
	d := NewDecoder(DecoderConfig{PEN: testPEN})
	var got []flow.Record
	var nflows uint32
	known := map[uint16][]wireField{}
	for k, m := range msgs {
		pm := parseMessage(t, m, known)
		for id, fs := range pm.templates {
			known[id] = fs
			for _, f := range fs {
				if f.pen == ReversePEN {
					t.Fatalf("template %d has the reverse element %d", id, f.id)
				}
			}
		}
		n := 0 // the data records of the flows the message counts: both records of each
		for _, c := range per[nflows : nflows+flows[k]] {
			n += c
		}
		if n != len(pm.records) {
			t.Fatalf("message %d: %d data records for %d flows of %d", k, len(pm.records), flows[k], n)
		}
		nflows += flows[k]
		if err := d.Decode(netip.MustParseAddrPort("192.0.2.1:4739"), m, func(r *flow.Record) { got = append(got, *r) }); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != len(want) || nflows != uint32(len(recs)) {
		t.Fatalf("%d data records in messages counting %d flows, want %d and %d", len(got), nflows, len(want), len(recs))
	}
	for i := range want {
		w, g := &want[i], &got[i]
		if g.Key != w.Key || g.Packets != w.Packets || g.Bytes != w.Bytes || g.TCPFlags != w.TCPFlags || g.RevPackets != 0 ||
			g.DropPackets != w.DropPackets || g.DropBytes != w.DropBytes || g.Start/int64(time.Millisecond) != w.Start/int64(time.Millisecond) ||
			g.Sampling != unsampled(w.Sampling) || g.Verdict != w.Verdict || (g.SrcWorkload == nil) != (w.SrcWorkload == nil) {
			t.Fatalf("data record %d:\n got %+v\nwant %+v", i, *g, *w)
		}
	}
	if st := d.Stats(); st.Errors != [NumDecodeErrors]uint64{} || st.SequenceGaps != 0 {
		t.Errorf("decoder stats %+v", st)
	}
}
