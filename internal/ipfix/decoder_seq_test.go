package ipfix

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// TestDecodeSequence: RFC 7011 numbering (data records, options data
// included, before the message) and softflowd 1.1.0's (flow records up to
// and including it) are both recognised, a lost message is a gap under
// either, and a message with records of an unknown template resynchronises
// rather than counting a gap.
func TestDecodeSequence(t *testing.T) {
	tmpl := set(2, u16s(400, 1, 4, 1))              // template 400: protocolIdentifier
	opts := set(3, u16s(500, 2, 1, 149, 4, 305, 4)) // options: observationDomainId, samplingPacketInterval
	optRec := set(500, []byte{0, 0, 0, 1, 0, 0, 0, 100})
	recs := func(n int) []byte { return set(400, make([]byte, n)) }
	counts := []int{3, 5, 2, 2, 7, 1, 4, 4}
	withOpts := map[int]bool{0: true, 4: true} // messages that also carry one options record
	numbered := func(inclusive, flowsOnly bool, skip int) [][]byte {
		var msgs [][]byte
		var sent uint32
		for i, n := range counts {
			all := uint32(n)
			if withOpts[i] && !flowsOnly {
				all++
			}
			seq := sent
			if inclusive {
				seq += all
			}
			sent += all
			if i == skip {
				continue
			}
			var sets [][]byte
			if i == 0 {
				sets = append(sets, tmpl, opts)
			}
			if withOpts[i] {
				sets = append(sets, optRec)
			}
			msgs = append(msgs, build(Version, seq, 1, append(sets, recs(n))...))
		}
		return msgs
	}
	for _, tc := range []struct {
		name                 string
		inclusive, flowsOnly bool
		skip                 int
		gaps                 uint64
		lost                 int // records; -1: not known yet (the numbering is not learnt after one message)
	}{
		{"rfc", false, false, -1, 0, 0},
		{"softflowd", true, true, -1, 0, 0},
		{"inclusive", true, false, -1, 0, 0},
		{"before flows", false, true, -1, 0, 0},
		{"rfc lost", false, false, 5, 1, 1},
		{"softflowd lost", true, true, 5, 1, 1},
		{"rfc lost early", false, false, 1, 1, 5},
		{"softflowd lost early", true, true, 1, 1, -1},
		{"rfc lost with options", false, false, 4, 1, 7 + 1},
		{"softflowd lost with options", true, true, 4, 1, 7},
	} {
		d := NewDecoder(DecoderConfig{})
		var told Loss
		d.cfg.OnGap = func(_ netip.AddrPort, _ uint32, l Loss) { told.Records += l.Records }
		_, errs := collectAll(t, d, numbered(tc.inclusive, tc.flowsOnly, tc.skip)...)
		st := d.Stats()
		if len(errs) > 0 || st.SequenceGaps != tc.gaps {
			t.Errorf("%s: %d gaps, want %d (errors %v)", tc.name, st.SequenceGaps, tc.gaps, errs)
		}
		if tc.lost >= 0 && (st.LostRecords != uint64(tc.lost) || told.Records != st.LostRecords || st.LostPackets != 0) {
			t.Errorf("%s: %d records lost (%d told), want %d", tc.name, st.LostRecords, told.Records, tc.lost)
		}
	}
	// Records of template 401 cannot be counted: the next message resyncs.
	d := NewDecoder(DecoderConfig{})
	collectAll(t, d,
		build(Version, 0, 1, tmpl, recs(3)),
		build(Version, 3, 1, set(401, make([]byte, 8)), recs(2)), // 2 + unknown count
		build(Version, 13, 1, recs(1)),
		build(Version, 14, 1, recs(1)),
		build(Version, 99, 1, recs(1)), // a real gap
	)
	if st := d.Stats(); st.SequenceGaps != 1 {
		t.Errorf("unknown template: %d gaps, want 1", st.SequenceGaps)
	}
}

// TestDecodeUptimeOptions: flowStart/EndSysUpTime are relative to the
// systemInitTimeMilliseconds an exporter sends once in options data
// (softflowd without -A), and that anchor is kept per session.
func TestDecodeUptimeOptions(t *testing.T) {
	be := binary.BigEndian
	d := NewDecoder(DecoderConfig{})
	opts := set(3, u16s(500, 2, 1, 143, 4, 160, 8)) // scope meteringProcessId, systemInitTimeMilliseconds
	optRec := be.AppendUint64([]byte{0, 0, 0, 1}, 1_700_000_000_000)
	data := set(2, u16s(400, 3, 2, 4, 22, 4, 21, 4))              // packets, flowStartSysUpTime, flowEndSysUpTime
	rec := []byte{0, 0, 0, 9, 0, 0, 0x03, 0xe8, 0, 0, 0x07, 0xd0} // 9 packets, 1,000 ms, 2,000 ms
	got, errs := collectAll(t, d,
		build(Version, 0, 1, opts, data, set(500, optRec), set(400, rec)),
		build(Version, 2, 1, set(400, rec)),
		build(Version, 0, 2, data, set(400, rec)), // another domain: no anchor
	)
	if len(errs) > 0 || len(got) != 3 {
		t.Fatalf("%d records, errors %v", len(got), errs)
	}
	for i, g := range got[:2] {
		if g.Packets != 9 || g.Start != 1_700_000_001_000*1e6 || g.End != 1_700_000_002_000*1e6 {
			t.Errorf("record %d: %+v", i, g)
		}
	}
	if got[2].Start != 0 || got[2].End != 0 {
		t.Errorf("record of a domain without systemInitTime: times %d %d, want none", got[2].Start, got[2].End)
	}
}

// TestDecodeLoss: sequence numbers give the records lost, exactly — IPFIX
// and NetFlow v5 count records, NetFlow v9 export packets (counted apart);
// a late or repeated message keeps the expectation and counts as a
// reorder with its records late; a jump of over 2^24 (an exporter
// restarting at 0) is a reset, not billions lost.
func TestDecodeLoss(t *testing.T) {
	tmpl := set(2, u16s(400, 1, 4, 1))
	recs := func(n int) []byte { return set(400, make([]byte, n)) }
	d := NewDecoder(DecoderConfig{})
	var told []Loss
	d.cfg.OnGap = func(_ netip.AddrPort, _ uint32, l Loss) { told = append(told, l) }
	collectAll(t, d,
		build(Version, 0, 1, tmpl, recs(10)),
		build(Version, 10, 1, recs(10)),
		// 20..1019 lost: 1,000 records in several messages
		build(Version, 1020, 1, recs(5)),
		build(Version, 1030, 1, recs(5)), // 1025..1029 lost
		build(Version, 1025, 1, recs(5)), // ...but late: the expectation stays 1035
		build(Version, 1035, 1, recs(5)),
		build(Version, 0, 1, recs(5)), // restarted
		build(Version, 5, 1, recs(5)),
	)
	st := d.Stats()
	if st.LostRecords != 1005 || st.SeqReorders != 1 || st.LateRecords != 5 || st.SeqResets != 1 || st.SequenceGaps != 4 {
		t.Errorf("IPFIX: %+v", st)
	}
	if len(told) != 4 || told[0].Records != 1000 || told[1].Records != 5 || told[2] != (Loss{}) || told[3] != (Loss{}) {
		t.Errorf("told %v", told)
	}

	// NetFlow v9: packet numbers.
	d9 := NewDecoder(DecoderConfig{})
	v9t := set(0, u16s(260, 1, 4, 1))
	collectAll(t, d9, build(9, 100, 1, v9t, set(260, []byte{6, 17, 1, 0})), build(9, 101, 1, set(260, []byte{6})),
		build(9, 105, 1, set(260, []byte{6})), build(9, 106, 1, set(260, []byte{6})))
	if st := d9.Stats(); st.LostPackets != 3 || st.LostRecords != 0 || st.SequenceGaps != 1 {
		t.Errorf("v9: %+v", st)
	}

	// NetFlow v5: flow numbers.
	d5 := NewDecoder(DecoderConfig{})
	v5 := func(seq uint32, count int) []byte {
		b := make([]byte, v5HeaderLen+count*v5RecordLen)
		binary.BigEndian.PutUint16(b, 5)
		binary.BigEndian.PutUint16(b[2:], uint16(count))
		binary.BigEndian.PutUint32(b[16:], seq)
		return b
	}
	collectAll(t, d5, v5(0, 30), v5(30, 30), v5(90, 30), v5(120, 2), v5(4_000_000_000, 1))
	if st := d5.Stats(); st.LostRecords != 30 || st.SeqResets != 1 || st.SequenceGaps != 2 || st.Records != 93 {
		t.Errorf("v5: %+v", st)
	}
}
