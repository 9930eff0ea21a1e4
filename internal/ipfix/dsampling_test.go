package ipfix

import (
	"encoding/binary"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// u32s and u64s encode values big-endian.
func u32s(v ...uint32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.BigEndian.AppendUint32(b, x)
	}
	return b
}

func u64s(v ...uint64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.BigEndian.AppendUint64(b, x)
	}
	return b
}

// cat concatenates byte slices.
func cat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// TestDecodeSamplingForms: the sampling encodings of other exporters set
// flow.Record.Sampling: a per-record samplingInterval (34);
// samplingPacketInterval and Space (305/306) per record, as (i+s)/i
// rounded; a record's selectorId (302) mapped through options data of
// RFC 5476's form (selectorId as scope, selectorAlgorithm, 305/306), and
// through NetFlow v9 options of Cisco's (samplerId 48, samplingInterval);
// options data without a selector as the default of the session's
// records. A selector no options data named is counted and falls back to
// the default; selectors are kept per exporter and domain, bounded, and
// overflowing values are ignored.
func TestDecodeSamplingForms(t *testing.T) {
	d := NewDecoder(DecoderConfig{})
	src := []byte{10, 0, 0, 1}
	tmpls := set(2,
		u16s(400, 3, 8, 4, 2, 4, 34, 4),          // per-record samplingInterval
		u16s(401, 4, 8, 4, 2, 4, 305, 4, 306, 4), // per-record packet interval and space
		u16s(402, 3, 8, 4, 2, 4, 302, 8),         // per-record selectorId
		u16s(403, 2, 8, 4, 2, 4),                 // no sampling information
		u16s(404, 4, 8, 4, 2, 4, 302, 2, 34, 2),  // both: the record's own interval wins
		u16s(405, 3, 8, 4, 2, 4, 305, 4),         // packet interval alone: read as N
		u16s(406, 4, 8, 4, 2, 4, 305, 4, 306, 8)) // a space past 32 bits (or 64 when doubled): ignored
	opts := set(3,
		u16s(500, 4, 1, 302, 4, 304, 2, 305, 4, 306, 4), // RFC 5476 selector report: scope selectorId
		u16s(501, 2, 1, 149, 4, 34, 4))                  // scope observationDomainId, samplingInterval: no selector
	type want struct{ packets, sampling uint32 }
	cases := []struct {
		name string
		msg  []byte
		want []want
	}{
		{"own interval", build(Version, 0, 1, tmpls, set(400, cat(src, u32s(1, 64)), cat(src, u32s(2, 0)))), []want{{1, 64}, {2, 0}}},
		{"packet interval and space", build(Version, 2, 1, set(401, cat(src, u32s(1, 1, 99)), cat(src, u32s(2, 2, 3)), cat(src, u32s(3, 3, 1)), cat(src, u32s(4, 0, 5)))),
			[]want{{1, 100}, {2, 3}, {3, 1}, {4, 0}}},
		{"selector before its options", build(Version, 6, 1, set(402, cat(src, u32s(1), u64s(7)))), []want{{1, 0}}},
		{"selector", build(Version, 7, 1, opts, set(500, cat(u32s(7), u16s(1), u32s(1, 9)), cat(u32s(8), u16s(1), u32s(2, 2))),
			set(402, cat(src, u32s(1), u64s(7)), cat(src, u32s(2), u64s(8)), cat(src, u32s(3), u64s(9)))),
			[]want{{1, 10}, {2, 2}, {3, 0}}}, // 1 in 10; 2 in 4 is 1 in 2; 9 unknown
		{"default", build(Version, 12, 1, set(501, u32s(1, 50)),
			set(403, cat(src, u32s(1))), set(402, cat(src, u32s(2), u64s(9)), cat(src, u32s(3), u64s(7))), set(400, cat(src, u32s(4, 5)))),
			[]want{{1, 50}, {2, 50}, {3, 10}, {4, 5}}},
		{"own wins", build(Version, 17, 1, set(404, cat(src, u32s(1), u16s(7, 3)))), []want{{1, 3}}},
		{"packet interval alone", build(Version, 18, 1, set(405, cat(src, u32s(1, 32)))), []want{{1, 32}}},
		{"overflow", build(Version, 19, 1, set(406, cat(src, u32s(1, 1), u64s(1<<40)), cat(src, u32s(2, 1), u64s(1<<63)))), []want{{1, 50}, {2, 50}}},
		{"other domain", build(Version, 0, 2, tmpls, set(402, cat(src, u32s(1), u64s(7)))), []want{{1, 0}}},
	}
	unknown := []uint64{0, 0, 1, 2, 3, 3, 3, 3, 4} // ErrUnknownSelector after each case
	for i, c := range cases {
		var got []want
		if err := d.Decode(exporter, c.msg, func(r *flow.Record) { got = append(got, want{uint32(r.Packets), r.Sampling}) }); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(got) != len(c.want) {
			t.Fatalf("%s: %v, want %v", c.name, got, c.want)
		}
		for k := range got {
			if got[k] != c.want[k] {
				t.Errorf("%s: record %d: %v, want %v", c.name, k, got[k], c.want[k])
			}
		}
		if n := d.Stats().Errors[ErrUnknownSelector]; n != unknown[i] {
			t.Errorf("%s: %d unknown selectors, want %d", c.name, n, unknown[i])
		}
	}
	if st := d.Stats(); st.SequenceGaps != 0 || st.OptionsRecords != 3 {
		t.Errorf("stats %+v", st)
	}

	// The bound: 64 selectors per session; the 65th is counted, not kept;
	// a known one still changes.
	var recs [][]byte
	for id := range uint32(maxSelectors + 1) {
		recs = append(recs, cat(u32s(100+id), u16s(1), u32s(1, 1)))
	}
	var got []uint32
	d.Decode(exporter, build(Version, 21, 1, set(500, recs...), set(500, cat(u32s(7), u16s(1), u32s(1, 19))),
		set(402, cat(src, u32s(1), u64s(7)))), func(r *flow.Record) { got = append(got, r.Sampling) })
	s := d.sessions[sessionKey{exporter, 1, Version}]
	if st := d.Stats(); len(s.selectors) != maxSelectors || st.Errors[ErrTooManySelectors] != 3 || s.selectors[7] != 20 ||
		len(got) != 1 || got[0] != 20 {
		t.Errorf("%d selectors (bound %d), %d over the bound, selector 7: 1 in %d, its record's %v", len(s.selectors), maxSelectors,
			st.Errors[ErrTooManySelectors], s.selectors[7], got)
	}
}

// TestDecodeSamplingNetFlow: NetFlow v9 with Cisco's sampler options
// (scope System; samplerId, samplerRandomInterval, samplerMode,
// samplingInterval) and records that name their sampler; NetFlow v5
// records take the header's interval.
func TestDecodeSamplingNetFlow(t *testing.T) {
	d := NewDecoder(DecoderConfig{})
	tmpl := u16s(260, 3, 8, 4, 2, 4, 48, 1)
	opts := u16s(261, 4, 16, 1, 4, 48, 1, 50, 4, 49, 1, 34, 4) // scope System, then 4 options: their specs take 4 and 16 bytes
	optRec := func(id byte, n uint32) []byte { return cat(u32s(0), []byte{id}, u32s(n), []byte{2}, u32s(n)) }
	rec := func(pkts uint32, id byte) []byte { return cat([]byte{10, 0, 0, 1}, u32s(pkts), []byte{id}) }
	got, errs := collectAll(t, d, build(9, 0, 42, set(0, tmpl), set(1, opts), set(261, optRec(1, 1000), optRec(2, 4000)),
		set(260, rec(1, 2), rec(2, 1), rec(3, 3))))
	if len(errs) > 0 || len(got) != 3 || got[0].Sampling != 4000 || got[1].Sampling != 1000 || got[2].Sampling != 0 ||
		d.Stats().Errors[ErrUnknownSelector] != 1 {
		t.Errorf("v9: %+v, errors %v, stats %+v", got, errs, d.Stats())
	}
	v5 := make([]byte, v5HeaderLen+v5RecordLen)
	binary.BigEndian.PutUint16(v5, 5)
	binary.BigEndian.PutUint16(v5[2:], 1)
	binary.BigEndian.PutUint16(v5[22:], 2<<14|256) // random, 1 in 256
	v5[v5HeaderLen+38] = 6
	unsampled := append([]byte(nil), v5...)
	binary.BigEndian.PutUint16(unsampled[22:], 0)
	got, errs = collectAll(t, d, v5, unsampled)
	if len(errs) > 0 || len(got) != 2 || got[0].Sampling != 256 || got[1].Sampling != 0 {
		t.Errorf("v5: %+v, errors %v", got, errs)
	}
}
