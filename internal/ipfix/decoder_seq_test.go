package ipfix

import (
	"encoding/binary"
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
	}{
		{"rfc", false, false, -1, 0},
		{"softflowd", true, true, -1, 0},
		{"inclusive", true, false, -1, 0},
		{"before flows", false, true, -1, 0},
		{"rfc lost", false, false, 5, 1},
		{"softflowd lost", true, true, 5, 1},
		{"rfc lost early", false, false, 1, 1},
		{"softflowd lost early", true, true, 1, 1},
		{"rfc lost with options", false, false, 4, 1},
		{"softflowd lost with options", true, true, 4, 1},
	} {
		d := NewDecoder(DecoderConfig{})
		_, errs := collectAll(t, d, numbered(tc.inclusive, tc.flowsOnly, tc.skip)...)
		if st := d.Stats(); len(errs) > 0 || st.SequenceGaps != tc.gaps {
			t.Errorf("%s: %d gaps, want %d (errors %v)", tc.name, st.SequenceGaps, tc.gaps, errs)
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
