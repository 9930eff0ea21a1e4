package ipfix

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

var exporter = netip.MustParseAddrPort("127.0.0.1:40000")

// build assembles a message: a header for version 10 or 9 and the sets
// (each given as id and body; the set header is added). v9's count field
// is left 0 (weir reads flowsets by length).
func build(version uint16, seq, domain uint32, sets ...[]byte) []byte {
	be := binary.BigEndian
	hl := headerLen
	if version == 9 {
		hl = v9HeaderLen
	}
	b := make([]byte, hl)
	be.PutUint16(b, version)
	if version == 9 {
		be.PutUint32(b[4:], 60_000)        // uptime 60 s
		be.PutUint32(b[8:], 1_800_000_000) // export time
		be.PutUint32(b[12:], seq)
		be.PutUint32(b[16:], domain)
	} else {
		be.PutUint32(b[4:], 1_800_000_000)
		be.PutUint32(b[8:], seq)
		be.PutUint32(b[12:], domain)
	}
	for _, s := range sets {
		b = append(b, s...)
	}
	if version == Version {
		be.PutUint16(b[2:], uint16(len(b)))
	}
	return b
}

// set returns a set with header id and the given body.
func set(id uint16, body ...[]byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, id)
	b = append(b, 0, 0)
	for _, x := range body {
		b = append(b, x...)
	}
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	return b
}

// u16s encodes uint16 values, u32/u64 one value.
func u16s(v ...uint16) []byte {
	var b []byte
	for _, x := range v {
		b = binary.BigEndian.AppendUint16(b, x)
	}
	return b
}

func collectAll(t *testing.T, d *Decoder, msgs ...[]byte) ([]flow.Record, []error) {
	t.Helper()
	var out []flow.Record
	var errs []error
	for _, m := range msgs {
		if err := d.Decode(exporter, m, func(r *flow.Record) { out = append(out, *r) }); err != nil {
			errs = append(errs, err)
		}
	}
	return out, errs
}

// TestDecodeEncoder: weir's encoder → decoder keeps every field (times at
// the millisecond, names cut to 254 bytes as the encoder does), both
// families, with and without drops (the drop reason comes back as the
// name of its RFC 7270 code), records split over many messages with
// refreshed templates; sequence numbers show no gap.
func TestDecodeEncoder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var want []flow.Record
	var msgs [][]byte
	e, _ := NewEncoder(Config{Domain: 3, RefreshMessages: 5}, func(m []byte) error { msgs = append(msgs, append([]byte(nil), m...)); return nil })
	for i := range 2000 {
		rec := randRecord(r, i)
		withDrops(&rec, i)
		e.Add(&rec)
		if rec.DropPackets > 0 {
			rec.DropReason = dropCodeNames[dropStatus(rec.DropReason)-fwdDropped] // the Linux name does not travel
		}
		rec.Start -= rec.Start % 1e6
		rec.End -= rec.End % 1e6
		rec.Iface = decodedName(rec.Iface)
		if rec.EndReason == flow.ReasonEOF || rec.EndReason == flow.ReasonNone {
			rec.EndReason = flow.ReasonShutdown // IPFIX has one "forced end"
		}
		want = append(want, rec)
	}
	e.Flush()
	d := NewDecoder(DecoderConfig{})
	got, errs := collectAll(t, d, msgs...)
	if len(errs) > 0 || len(got) != len(want) {
		t.Fatalf("%d records of %d, errors %v", len(got), len(want), errs)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("record %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	st := d.Stats()
	if st.Records != 2000 || st.SequenceGaps != 0 || st.Messages[2] != uint64(len(msgs)) || st.TemplatesLive != 4 {
		t.Errorf("stats %+v", st)
	}
	if got[2].DropPackets == 0 || got[2].DropReason != "FOR_US" || got[9].DropReason != "ACL_DROP" || got[9].Key.IPVersion != 6 {
		t.Errorf("records with drops: %+v\n%+v", got[2], got[9])
	}
	// Lose a message (not one whose templates the next needs: message 1
	// announced the drop templates): the next one shows a gap.
	d2 := NewDecoder(DecoderConfig{})
	collectAll(t, d2, append(msgs[:2:2], msgs[3:]...)...)
	if g := d2.Stats().SequenceGaps; g != 1 {
		t.Errorf("one message lost: %d gaps, want 1", g)
	}
}

// TestDecodeDrops: other exporters' drop elements: forwardingStatus in 1
// octet and in 4 (the old unsigned32 type, as an integer or with the
// status octet first), dropped counters of reduced size; only the
// Dropped status names a reason; the same from NetFlow v9.
func TestDecodeDrops(t *testing.T) {
	be := binary.BigEndian
	// addresses, protocol, packets, droppedOctetDeltaCount and
	// droppedPacketDeltaCount in 4 octets, forwardingStatus in 1
	t1 := u16s(300, 7, 8, 4, 12, 4, 4, 1, 2, 4, 132, 4, 133, 4, 89, 1)
	t4 := u16s(301, 4, 8, 4, 12, 4, 2, 4, 89, 4) // forwardingStatus in 4 octets, no dropped counters
	addrs := []byte{10, 0, 0, 1, 192, 0, 2, 9}
	rec1 := func(status byte) []byte {
		b := append(append([]byte(nil), addrs...), 17)
		b = be.AppendUint32(b, 5)    // packets
		b = be.AppendUint32(b, 1500) // dropped octets
		b = be.AppendUint32(b, 3)    // dropped packets
		return append(b, status)
	}
	rec4 := func(status uint32) []byte {
		return be.AppendUint32(be.AppendUint32(append([]byte(nil), addrs...), 7), status)
	}
	msg := build(Version, 0, 1, set(2, t1, t4),
		set(300, rec1(0x80|12), rec1(0x40|2), rec1(0x80|50)), // Dropped RPF; Forwarded not fragmented; Dropped, code unassigned
		set(301, rec4(0x8d), rec4(0x83<<24), rec4(0xc1)))     // Dropped for us, as an integer and octet first; Consumed
	got, errs := collectAll(t, NewDecoder(DecoderConfig{}), msg)
	if len(errs) > 0 || len(got) != 6 {
		t.Fatalf("%d records, errors %v", len(got), errs)
	}
	for i, want := range []string{"RPF", "", "DROP_178", "FOR_US", "UNROUTABLE", ""} {
		if got[i].DropReason != want {
			t.Errorf("record %d: drop reason %q, want %q", i, got[i].DropReason, want)
		}
	}
	if g := got[0]; g.DropBytes != 1500 || g.DropPackets != 3 || g.Packets != 5 || got[3].DropPackets != 0 {
		t.Errorf("counters %+v, %+v", g, got[3])
	}
	// NetFlow v9 shares the element numbers.
	v9 := build(9, 0, 1, set(0, u16s(260, 4, 8, 4, 12, 4, 133, 4, 89, 1)), set(260, be.AppendUint32(append([]byte(nil), addrs...), 2), []byte{0x80 | 2}))
	if got, errs := collectAll(t, NewDecoder(DecoderConfig{}), v9); len(errs) > 0 || len(got) != 1 || got[0].DropPackets != 2 || got[0].DropReason != "ACL_DROP" {
		t.Errorf("v9: %+v, errors %v", got, errs)
	}
}

// TestDecodeFieldForms: reduced-size integers, 1- and 3-octet variable
// lengths, an enterprise field weir does not know, padding, NTP and
// uptime-relative times, totals instead of deltas, an ingress index for a
// name.
func TestDecodeFieldForms(t *testing.T) {
	be := binary.BigEndian
	tmpl := append(u16s(300, 12), u16s(
		8, 4, 12, 4, 4, 1, // addresses, protocol
		1, 2, // octetDeltaCount in 2 octets
		86, 3, // packetTotalCount in 3 octets
		0x8000|1, 4)..., // reverse octets, enterprise
	)
	tmpl = be.AppendUint32(tmpl, ReversePEN)
	tmpl = append(tmpl, u16s(0x8000|999, 2)...) // unknown enterprise field
	tmpl = be.AppendUint32(tmpl, 12345)
	tmpl = append(tmpl, u16s(82, Variable, 156, 8, 22, 4, 21, 4, 160, 8)...)
	rec := []byte{10, 0, 0, 1, 192, 0, 2, 9, 17, 0x12, 0x34, 0, 1, 0, 0, 0, 0, 77, 0xff, 0xff}
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'a' + byte(i%26)
	}
	rec = append(rec, 255, 1, 44) // 3-octet length: 300
	rec = append(rec, long...)
	ntpStart := uint64(1_800_000_000+2208988800)<<32 | 1<<31 // +0.5 s
	rec = be.AppendUint64(rec, ntpStart)
	rec = be.AppendUint32(rec, 1000) // start uptime ms
	rec = be.AppendUint32(rec, 3500) // end uptime ms
	rec = be.AppendUint64(rec, 1_700_000_000_000)
	msg := build(Version, 0, 1, set(2, tmpl), set(300, rec, []byte{0, 0, 0})) // 3 bytes of padding
	d := NewDecoder(DecoderConfig{})
	got, errs := collectAll(t, d, msg)
	if len(errs) > 0 || len(got) != 1 {
		t.Fatalf("%d records, errors %v", len(got), errs)
	}
	g := got[0]
	if g.Bytes != 0x1234 || g.Packets != 0x100 || g.RevBytes != 77 || g.Key.Proto != 17 ||
		netip.AddrFrom16(g.Key.SrcAddr).Unmap().String() != "10.0.0.1" || g.Key.IPVersion != 4 {
		t.Errorf("record %+v", g)
	}
	if g.Iface != string(long[:MaxNameLen]) {
		t.Errorf("name of %d bytes, want the 300-byte one cut to %d", len(g.Iface), MaxNameLen)
	}
	// sysUpTime times win over the NTP start: both are in the record and
	// systemInitTimeMilliseconds anchors them.
	if g.Start != 1_700_000_001_000*1e6 || g.End != 1_700_000_003_500*1e6 {
		t.Errorf("times %d %d", g.Start, g.End)
	}
	if d.Stats().SkippedSets != 0 {
		t.Errorf("stats %+v", d.Stats())
	}
}

// TestDecodeTemplates: options templates and their sampling data, single
// and all-templates withdrawal, expiry on an injected clock, unknown
// templates counted while the rest of the message decodes.
func TestDecodeTemplates(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	d := NewDecoder(DecoderConfig{TemplateTimeout: time.Minute, Now: func() time.Time { return now }})
	data := u16s(400, 2, 8, 4, 2, 4)        // template 400: src addr, packets
	opts := u16s(500, 2, 1, 149, 4, 305, 4) // options template 500: scope observationDomainId, samplingPacketInterval
	rec := []byte{10, 0, 0, 1, 0, 0, 0, 5}
	optRec := []byte{0, 0, 0, 1, 0, 0, 0, 100}
	got, errs := collectAll(t, d,
		build(Version, 0, 1, set(2, data), set(3, opts), set(500, optRec), set(400, rec)),
		build(Version, 2, 1, set(401, rec), set(400, rec)), // 401 unknown: skipped, 400 decodes
	)
	if len(errs) > 0 || len(got) != 2 || got[0].Packets != 5 {
		t.Fatalf("%d records %v, errors %v", len(got), got, errs)
	}
	if s := d.Sampling(exporter, 1); s != 100 {
		t.Errorf("sampling %d, want 100", s)
	}
	st := d.Stats()
	if st.OptionsRecords != 1 || st.Errors[ErrUnknownTemplate] != 1 || st.TemplatesLive != 2 || st.SequenceGaps != 0 {
		t.Errorf("stats %+v", st)
	}
	// Withdraw 400: its data is unknown again.
	got, _ = collectAll(t, d, build(Version, 3, 1, set(2, u16s(400, 0)), set(400, rec)))
	if len(got) != 0 || d.Stats().Withdrawals != 1 || d.Stats().TemplatesLive != 1 {
		t.Errorf("after withdrawal: %d records, %+v", len(got), d.Stats())
	}
	// All options templates withdrawn.
	collectAll(t, d, build(Version, 3, 1, set(3, u16s(3, 0))))
	if d.Stats().TemplatesLive != 0 {
		t.Errorf("after withdrawing all options templates: %+v", d.Stats())
	}
	// Expiry: learnt, refreshed (the same definition again) 40 s later,
	// alive 40 s after that; then silent for over a minute.
	collectAll(t, d, build(Version, 3, 1, set(2, data)))
	now = now.Add(40 * time.Second)
	collectAll(t, d, build(Version, 3, 1, set(2, data)))
	now = now.Add(40 * time.Second)
	if got, _ = collectAll(t, d, build(Version, 3, 1, set(400, rec))); len(got) != 1 || d.Stats().Expired != 0 {
		t.Errorf("refreshed template: %d records, %+v", len(got), d.Stats())
	}
	// Redefined under the same id: records read by the new definition.
	collectAll(t, d, build(Version, 3, 1, set(2, u16s(400, 1, 2, 4)))) // packets only
	if got, _ = collectAll(t, d, build(Version, 3, 1, set(400, []byte{0, 0, 0, 7}))); len(got) != 1 || got[0].Packets != 7 {
		t.Errorf("redefined template: %+v", got)
	}
	collectAll(t, d, build(Version, 3, 1, set(2, data)))
	now = now.Add(61 * time.Second)
	got, _ = collectAll(t, d, build(Version, 3, 1, set(400, rec)))
	if len(got) != 0 || d.Stats().Expired != 1 {
		t.Errorf("after expiry: %d records, %+v", len(got), d.Stats())
	}
}

// TestDecodeNetFlow: NetFlow v9 (templates, options templates, data with
// uptime times, padding) and v5 (fixed records), with sequence gaps.
func TestDecodeNetFlow(t *testing.T) {
	be := binary.BigEndian
	d := NewDecoder(DecoderConfig{})
	// addresses, ports, protocol, packets, bytes, first and last switched
	tmpl := u16s(260, 9, 8, 4, 12, 4, 7, 2, 11, 2, 4, 1, 2, 4, 1, 4, 22, 4, 21, 4)
	opts := u16s(261, 4, 4, 1, 4, 34, 4) // scope 4 bytes (type 1 system, len 4), option samplingInterval
	rec := []byte{10, 0, 0, 1, 10, 0, 0, 2, 0x30, 0x39, 0, 53, 17}
	rec = be.AppendUint32(rec, 3)
	rec = be.AppendUint32(rec, 300)
	rec = be.AppendUint32(rec, 10_000) // first switched: uptime 10 s
	rec = be.AppendUint32(rec, 20_000)
	msg := build(9, 7, 42, set(0, tmpl), set(1, opts), set(261, []byte{0, 0, 0, 1, 0, 0, 0, 10}, []byte{0, 0}), set(260, rec, []byte{0, 0, 0}))
	got, errs := collectAll(t, d, msg, func() []byte { m := build(9, 9, 42, set(260, rec)); return m }())
	if len(errs) > 0 || len(got) != 2 {
		t.Fatalf("%d records, errors %v", len(got), errs)
	}
	// boot = export 1,800,000,000 s - uptime 60 s; start = boot + 10 s.
	if g := got[0]; g.Key.SrcPort != 12345 || g.Key.DstPort != 53 || g.Packets != 3 || g.Bytes != 300 ||
		g.Start != (1_800_000_000-60+10)*1e9 || g.End != (1_800_000_000-60+20)*1e9 {
		t.Errorf("v9 record %+v", g)
	}
	st := d.Stats()
	if d.Sampling(exporter, 42) != 10 || st.OptionsRecords != 1 || st.SequenceGaps != 1 || st.Messages[1] != 2 {
		t.Errorf("v9 stats %+v, sampling %d", st, d.Sampling(exporter, 42))
	}

	v5 := make([]byte, v5HeaderLen+2*v5RecordLen)
	be.PutUint16(v5, 5)
	be.PutUint16(v5[2:], 2)
	be.PutUint32(v5[4:], 60_000)
	be.PutUint32(v5[8:], 1_800_000_000)
	be.PutUint32(v5[16:], 100)
	be.PutUint16(v5[22:], 1<<14|64) // mode 1, 1 in 64
	for i := 0; i < 2; i++ {
		r := v5[v5HeaderLen+i*v5RecordLen:]
		copy(r, []byte{10, 0, 0, byte(i), 192, 0, 2, 1})
		be.PutUint16(r[12:], 3) // input ifindex
		be.PutUint32(r[16:], 5)
		be.PutUint32(r[20:], 500)
		be.PutUint32(r[24:], 30_000)
		be.PutUint32(r[28:], 31_000)
		be.PutUint16(r[32:], 1000)
		be.PutUint16(r[34:], 80)
		r[37], r[38] = 0x1b, 6
	}
	// A second message after sysUptime wrapped (uptime 1 s): a flow that
	// started 3 s before the export, at uptime 2^32-2,000 ms.
	v5w := append([]byte(nil), v5[:v5HeaderLen+v5RecordLen]...)
	be.PutUint16(v5w[2:], 1)
	be.PutUint32(v5w[4:], 1_000)
	be.PutUint32(v5w[16:], 102)
	be.PutUint32(v5w[v5HeaderLen+24:], 1<<32-2_000)
	be.PutUint32(v5w[v5HeaderLen+28:], 500)
	dw := NewDecoder(DecoderConfig{})
	if got, errs := collectAll(t, dw, v5w); len(errs) > 0 || len(got) != 1 ||
		got[0].Start != (1_800_000_000-3)*1e9 || got[0].End != 1_800_000_000*1e9-500*1e6 {
		t.Errorf("v5 across the uptime wrap: %+v, errors %v", got, errs)
	}
	d5 := NewDecoder(DecoderConfig{})
	got, errs = collectAll(t, d5, v5, v5)
	if len(errs) > 0 || len(got) != 4 || got[1].Iface != "if3" || got[1].Key.DstPort != 80 || got[1].TCPFlags != 0x1b ||
		got[1].Start != (1_800_000_000-30)*1e9 || d5.Sampling(exporter, 0) != 64 || got[1].Sampling != 64 {
		t.Errorf("v5: %d records %+v, errors %v", len(got), got, errs)
	}
	if d5.Stats().SequenceGaps != 1 { // the same packet twice: 100 again, 102 expected
		t.Errorf("v5 gaps %d, want 1", d5.Stats().SequenceGaps)
	}
	bad := append([]byte(nil), v5...)
	be.PutUint16(bad[2:], 3) // count says 3, bytes hold 2
	if _, errs := collectAll(t, d5, bad); len(errs) != 1 || !errors.Is(errs[0], ErrDecode) || d5.Stats().Errors[ErrBadCount] != 1 {
		t.Errorf("v5 bad count: %v", errs)
	}
}

// TestDecodeHostile: lying lengths and bounds give counted, labelled
// errors, never a panic or growth.
func TestDecodeHostile(t *testing.T) {
	d := NewDecoder(DecoderConfig{MaxSessions: 2, MaxTemplates: 2})
	ok := set(2, u16s(400, 1, 8, 4))
	cases := []struct {
		msg  []byte
		want DecodeError
	}{
		{[]byte{0, 10}, ErrShortHeader},
		{[]byte{0, 7, 0, 0}, ErrBadVersion},
		{append(build(Version, 0, 1, ok), 0), ErrBadLength},
		{build(Version, 0, 1, []byte{0, 2, 0, 2}), ErrBadSetLength},
		{build(Version, 0, 1, []byte{0, 2, 0, 200, 0, 0}), ErrBadSetLength},
		{build(Version, 0, 1, set(2, u16s(100, 1, 8, 4))), ErrBadTemplate},    // id < 256
		{build(Version, 0, 1, set(2, u16s(400, 600))), ErrBadTemplate},        // field count over MaxFields
		{build(Version, 0, 1, set(2, u16s(400, 2, 8, 4))), ErrBadTemplate},    // fields cut short
		{build(Version, 0, 1, set(2, u16s(400, 1, 8, 0))), ErrBadTemplate},    // zero length
		{build(Version, 0, 1, set(3, u16s(400, 1, 0, 8, 4))), ErrBadTemplate}, // scope count 0
		{build(Version, 0, 1, set(2, u16s(401, 1, 82, Variable)), set(401, []byte{200, 1})), ErrBadFieldLength},
		{build(Version, 0, 1, set(2, u16s(402, 1, 82, Variable)), set(402, []byte{255, 0})), ErrBadFieldLength},
		{build(Version, 0, 1, set(2, u16s(403, 1, 8, 4), u16s(404, 1, 8, 4))), ErrTooManyTemplates},
		{build(Version, 0, 2, ok), ErrTooManySessions + 100}, // second session: fine
		{build(Version, 0, 3, ok), ErrTooManySessions},
	}
	for i, c := range cases {
		err := d.Decode(exporter, c.msg, func(*flow.Record) {})
		var de *Error
		if c.want > numDecodeErrors {
			if err != nil {
				t.Errorf("case %d: %v, want success", i, err)
			}
			continue
		}
		if !errors.As(err, &de) || de.Reason != c.want || !errors.Is(err, ErrDecode) {
			t.Errorf("case %d: %v, want %v", i, err, c.want)
		}
	}
	st := d.Stats()
	if len(d.sessions) > 2 || st.TemplatesLive > 4 {
		t.Errorf("bounds broken: %d sessions, %+v", len(d.sessions), st)
	}
	// Sessions silent for the template timeout make room for new ones.
	now := time.Now()
	d = NewDecoder(DecoderConfig{MaxSessions: 1, TemplateTimeout: time.Minute, Now: func() time.Time { return now }})
	ok1, ok2 := build(Version, 0, 1, ok), build(Version, 0, 2, ok)
	if d.Decode(exporter, ok1, nil) != nil || d.Decode(exporter, ok2, nil) == nil {
		t.Fatal("a second session fitted in a bound of one")
	}
	now = now.Add(2 * time.Minute)
	if err := d.Decode(exporter, ok2, nil); err != nil || d.Stats().TemplatesLive != 1 {
		t.Errorf("after the first session went silent: %v, %+v", err, d.Stats())
	}
}

// TestDecodeAllocs: decoding a message of known templates allocates
// nothing.
func TestDecodeAllocs(t *testing.T) {
	msgs := encoded(200)
	d := NewDecoder(DecoderConfig{})
	emit := func(*flow.Record) {}
	for _, m := range msgs {
		d.Decode(exporter, m, emit)
	}
	if a := testing.AllocsPerRun(100, func() { d.Decode(exporter, msgs[1], emit) }); a != 0 {
		t.Errorf("%v allocations per message", a)
	}
}

// encoded returns weir's messages for n mixed records.
func encoded(n int) [][]byte {
	r := rand.New(rand.NewPCG(7, 8))
	var msgs [][]byte
	e, _ := NewEncoder(Config{}, func(m []byte) error { msgs = append(msgs, append([]byte(nil), m...)); return nil })
	for i := range n {
		rec := randRecord(r, i)
		e.Add(&rec)
	}
	e.Flush()
	return msgs
}

// BenchmarkDecode decodes weir's own 1,400-byte messages of mixed IPv4
// and IPv6 records (templates learnt once).
func BenchmarkDecode(b *testing.B) {
	msgs := encoded(5000)
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
		d.Decode(exporter, msgs[1+i%(len(msgs)-1)], emit)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/record")
}
