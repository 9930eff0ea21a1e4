package ipfix

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// withNAT gives record i a translation or a verdict, in a pattern that
// meets every combination with the family, drops and sampling of the
// other helpers: SNAT only (i%11 == 4), DNAT only (5), both (6); a deny
// verdict with its rule (i%13 == 7); the conntrack mark and zone, which do
// not travel, on some of each and on others (i%17 == 9).
func withNAT(rec *flow.Record, i int) {
	icmp := rec.Key.Proto == flow.ProtoICMP || rec.Key.Proto == flow.ProtoICMPv6
	if k := i % 11; k >= 4 && k <= 6 {
		n := rec.Key
		if k != 5 { // SNAT: the initiator masqueraded
			n.SrcAddr = netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}).As16()
			if n.IPVersion == 6 {
				n.SrcAddr = netip.AddrFrom16([16]byte{0x20, 1, 0xd, 0xb8, 0xff, 0xff, 14: byte(i >> 8), 15: byte(i)}).As16()
			}
			if !icmp {
				n.SrcPort = uint16(61000 + i%4000)
			}
		}
		if k != 4 { // DNAT: the service VIP's backend
			n.DstAddr = netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}).As16()
			if n.IPVersion == 6 {
				n.DstAddr = netip.AddrFrom16([16]byte{0xfd, 0, 10, 244, 14: byte(i >> 8), 15: byte(i)}).As16()
			}
			if !icmp {
				n.DstPort = 8443
			}
		}
		rec.PostNAT = n
	}
	if i%13 == 7 {
		rec.Verdict, rec.Rule, rec.Mark = flow.VerdictDeny, "weir-deny", uint32(i)
	}
	if i%17 == 9 || i%11 == 6 {
		rec.Mark, rec.Zone = 0x4000_0000|uint32(i), uint16(i%3)
	}
}

// travelled is rec as weir's decoder gives it back from weir's encoding:
// millisecond times, the name cut and sanitised, one forced end, the drop reason as its
// RFC 7270 name, no rule, mark or zone (no IANA element carries them).
func travelled(rec flow.Record) flow.Record {
	if rec.DropPackets > 0 {
		rec.DropReason = dropCodeNames[dropStatus(rec.DropReason)-fwdDropped]
	}
	rec.Start -= rec.Start % 1e6
	rec.End -= rec.End % 1e6
	rec.Iface = decodedName(rec.Iface)
	if rec.EndReason == flow.ReasonEOF || rec.EndReason == flow.ReasonNone {
		rec.EndReason = flow.ReasonShutdown
	}
	rec.Sampling = unsampled(rec.Sampling)
	rec.Rule, rec.Mark, rec.Zone = "", 0, 0
	return rec
}

// TestNATRoundTrip: records of both families translated (SNAT only, DNAT
// only, both) or denied or both, with and without drops and sampling, in
// every one of the 32 templates: an independent parser finds the post-NAT
// fields (225–228, 281/282) with the post-NAT key and firewallEvent 3 on
// denied records, and on those only; the NAT and deny templates are not in
// the first message (no record needed them yet); weir's decoder gives
// every record back equal, with no error and no sequence gap.
func TestNATRoundTrip(t *testing.T) {
	const n = 16000 // 3·5·7·11·13 and more: every combination of the helpers' patterns
	msgs, recs, templates, got, _ := encodeParse(t, Config{Domain: 5, RefreshMessages: 10}, 41, n, withDrops, withSampling, withNAT)
	for i := range Templates {
		if _, ok := templates[templateID(i)]; !ok {
			t.Errorf("template %d (index %d) never announced", templateID(i), i)
		}
	}
	if len(got) != n {
		t.Fatalf("%d records parsed, want %d", len(got), n)
	}
	var nat, deny int
	for i, d := range got {
		w := &recs[i]
		if w.NATed() {
			nat++
			src, dst, sk, dk := w.PostNAT.SrcAddr[12:], w.PostNAT.DstAddr[12:], "0/225", "0/226"
			if w.Key.IPVersion == 6 {
				src, dst, sk, dk = w.PostNAT.SrcAddr[:], w.PostNAT.DstAddr[:], "0/281", "0/282"
			}
			if string(d[sk]) != string(src) || string(d[dk]) != string(dst) ||
				u(d["0/227"]) != uint64(w.PostNAT.SrcPort) || u(d["0/228"]) != uint64(w.PostNAT.DstPort) || len(d["0/227"]) != 2 {
				t.Fatalf("record %d: post-NAT fields %x %x %x %x, want %+v", i, d[sk], d[dk], d["0/227"], d["0/228"], w.PostNAT)
			}
		} else if _, ok := d["0/227"]; ok {
			t.Fatalf("record %d without NAT carries post-NAT fields", i)
		}
		if fe, ok := d["0/233"]; ok != (w.Verdict == flow.VerdictDeny) || (ok && (len(fe) != 1 || fe[0] != 3)) {
			t.Fatalf("record %d (verdict %q): firewallEvent %x", i, w.Verdict, fe)
		} else if ok {
			deny++
		}
	}
	if nat < n/5 || deny < n/15 {
		t.Errorf("%d translated and %d denied records: the test shows little", nat, deny)
	}
	d := NewDecoder(DecoderConfig{})
	dec, errs := collectAll(t, d, msgs...)
	if len(errs) > 0 || len(dec) != n {
		t.Fatalf("decoded %d of %d, errors %v", len(dec), n, errs)
	}
	for i := range recs {
		if want := travelled(recs[i]); dec[i] != want {
			t.Fatalf("record %d:\n got %+v\nwant %+v", i, dec[i], want)
		}
	}
	if st := d.Stats(); st.SequenceGaps != 0 || st.Errors != [NumDecodeErrors]uint64{} || st.TemplatesLive != 33 {
		t.Errorf("stats %+v", st)
	}
}

// TestNoNATUnchanged: records with a conntrack mark, zone or rule but no
// translation or verdict, and records translated between families (sent
// without their NAT fields), give byte for byte what the encoder gave
// before NAT existed: the digests of TestNoDropsUnchanged and
// TestUnsampledUnchanged.
func TestNoNATUnchanged(t *testing.T) {
	for _, c := range []struct {
		mtu, seed int
		drops     bool
		want      string
	}{
		{DefaultMTU, 13, false, "ede63de3c3208b8892bc9ac170bd7080e0dd2342e0cfee30482b9f9106b35bd0"},
		{MinMTU, 15, true, "ccb748439501eb05301884ed676b1f9631ed1ef929bb45e398b0d58e6e200e76"},
		{DefaultMTU, 15, true, "153943cf3a0fe9b4a5564c19d3af1628d2311308907b4a348e18559d3911b06d"},
	} {
		now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
		h := sha256.New()
		e, _ := NewEncoder(Config{Domain: 9, MTU: c.mtu, RefreshMessages: 7, Now: func() time.Time { return now }}, func(m []byte) error { h.Write(m); return nil })
		r := rand.New(rand.NewPCG(uint64(c.seed), uint64(c.seed+1)))
		for i := range 1000 {
			rec := randRecord(r, i)
			if c.drops {
				withDrops(&rec, i)
			}
			rec.Sampling = uint32(i % 2)
			rec.Mark, rec.Zone, rec.Rule = uint32(i), uint16(i%5), "accept"
			if i%4 == 1 { // NAT64: the other family
				rec.PostNAT = rec.Key
				rec.PostNAT.IPVersion = 10 - rec.Key.IPVersion
			}
			if err := e.Add(&rec); err != nil {
				t.Fatal(err)
			}
		}
		e.Flush()
		if got := fmt.Sprintf("%x", h.Sum(nil)); got != c.want {
			t.Errorf("MTU %d, drops %v: output digest %s changed", c.mtu, c.drops, got)
		}
	}
}

// TestNATSmallMTU: at MinMTU, with all 32 templates announced (they take
// several messages), every message stays within the MTU and every record
// decodes as it was sent.
func TestNATSmallMTU(t *testing.T) {
	var msgs [][]byte
	e, _ := NewEncoder(Config{MTU: MinMTU, RefreshMessages: 5}, collectMsgs(&msgs))
	r := rand.New(rand.NewPCG(43, 44))
	var want []flow.Record
	for i := range 16000 {
		rec := randRecord(r, i)
		rec.Iface = string(make([]byte, 300)) // the longest name
		withDrops(&rec, i)
		withSampling(&rec, i)
		withNAT(&rec, i)
		if err := e.Add(&rec); err != nil {
			t.Fatal(err)
		}
		want = append(want, travelled(rec))
	}
	e.Flush()
	for k, m := range msgs {
		if len(m) > MinMTU {
			t.Fatalf("message %d of %d bytes at MTU %d", k, len(m), MinMTU)
		}
	}
	d := NewDecoder(DecoderConfig{})
	got, errs := collectAll(t, d, msgs...)
	if len(errs) > 0 || len(got) != len(want) {
		t.Fatalf("decoded %d of %d, errors %v", len(got), len(want), errs)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("record %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	if st := d.Stats(); st.SequenceGaps != 0 || st.TemplatesLive != 33 {
		t.Errorf("stats %+v", st)
	}
}

// TestNATAllocs: encoding and decoding translated and denied records
// (templates announced and learnt) allocate nothing.
func TestNATAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 46))
	var recs []flow.Record
	for i := range 400 {
		rec := randRecord(r, i)
		withNAT(&rec, i)
		if rec.NATed() || rec.Verdict != flow.VerdictNone {
			recs = append(recs, rec)
		}
	}
	// Each run adds all of them: AllocsPerRun rounds down, so an
	// allocation in some records only would not show per record.
	e, _ := NewEncoder(Config{}, func([]byte) error { return nil })
	if a := testing.AllocsPerRun(100, func() {
		for i := range recs {
			e.Add(&recs[i])
		}
	}); a != 0 {
		t.Errorf("encoding: %v allocations per %d records", a, len(recs))
	}
	var msgs [][]byte
	e, _ = NewEncoder(Config{}, collectMsgs(&msgs))
	for i := range recs {
		e.Add(&recs[i])
	}
	e.Flush()
	d := NewDecoder(DecoderConfig{})
	emit := func(*flow.Record) {}
	for _, m := range msgs {
		d.Decode(exporter, m, emit)
	}
	if a := testing.AllocsPerRun(100, func() {
		for _, m := range msgs {
			d.Decode(exporter, m, emit)
		}
	}); a != 0 {
		t.Errorf("decoding: %v allocations per %d messages", a, len(msgs))
	}
}

// TestDecodeNATForms: other exporters' NAT and firewall elements, in any
// order and subset, set PostNAT and Verdict: an IPFIX template with the
// post-NAT fields before the key; only the source translated (the
// destination taken from the key); 0.0.0.0 and port 0, which NSEL
// exporters send for what was not translated; post-NAT fields equal to the
// key (no translation); IPv6; a post-NAT IPv4 key of an IPv6 flow (NAT64);
// firewallEvent 3 as a deny and other events as no verdict; NetFlow v9
// with Cisco ASA's NF_F_FW_EVENT (40005).
func TestDecodeNATForms(t *testing.T) {
	a4 := func(s string) []byte { b := netip.MustParseAddr(s).As4(); return b[:] }
	a6 := func(s string) []byte { b := netip.MustParseAddr(s).As16(); return b[:] }
	key := func(src, dst string, sp, dp uint16) flow.Key {
		s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
		k := flow.Key{SrcAddr: s.As16(), DstAddr: d.As16(), SrcPort: sp, DstPort: dp, Proto: flow.ProtoTCP, IPVersion: 4}
		if s.Is6() {
			k.IPVersion = 6
		}
		return k
	}
	tmpls := set(2,
		// post-NAT destination and ports first, then the key, firewallEvent
		u16s(400, 9, 226, 4, 228, 2, 227, 2, 225, 4, 8, 4, 12, 4, 7, 2, 11, 2, 4, 1),
		u16s(401, 7, 8, 4, 12, 4, 7, 2, 11, 2, 4, 1, 225, 4, 227, 2), // source only
		u16s(402, 7, 27, 16, 28, 16, 7, 2, 11, 2, 4, 1, 282, 16, 233, 1),
		u16s(403, 6, 27, 16, 28, 16, 7, 2, 11, 2, 4, 1, 225, 4), // NAT64: IPv4 after
		u16s(404, 5, 8, 4, 12, 4, 4, 1, 233, 1, 2, 4))
	rec400 := func(pd string, pdp, psp uint16, ps string) []byte {
		return cat(a4(pd), u16s(pdp, psp), a4(ps), a4("10.0.0.1"), a4("10.96.0.10"), u16s(40000, 443), []byte{6})
	}
	msg := build(Version, 0, 1, tmpls,
		set(400, rec400("10.244.1.7", 8443, 61001, "192.0.2.1"), // both
			rec400("0.0.0.0", 0, 0, "0.0.0.0"),           // all unspecified: not translated
			rec400("10.96.0.10", 443, 40000, "10.0.0.1"), // equal to the key: not translated
			rec400("10.244.1.7", 0, 0, "0.0.0.0")),       // DNAT of the address only
		set(401, cat(a4("10.0.0.1"), a4("198.51.100.9"), u16s(40000, 53), []byte{17}, a4("192.0.2.1"), u16s(1053))),
		set(402, cat(a6("fd00::1"), a6("fd00::53"), u16s(40000, 53), []byte{6}, a6("fd00::99"), []byte{3})),
		set(403, cat(a6("64:ff9b::1"), a6("64:ff9b::c000:209"), u16s(40000, 80), []byte{6}, a4("192.0.2.1"))),
		set(404, cat(a4("10.0.0.1"), a4("10.0.0.2"), []byte{6, 3}, u32s(5)), cat(a4("10.0.0.1"), a4("10.0.0.2"), []byte{6, 1}, u32s(6))))
	udp := key("10.0.0.1", "198.51.100.9", 40000, 53)
	udp.Proto = flow.ProtoUDP
	udpPost := key("192.0.2.1", "198.51.100.9", 1053, 53)
	udpPost.Proto = flow.ProtoUDP
	nat64Post := key("192.0.2.1", "0.0.0.0", 40000, 80)
	nat64Post.DstAddr = [16]byte{}
	wants := []struct {
		post    flow.Key
		verdict flow.Verdict
	}{
		{key("192.0.2.1", "10.244.1.7", 61001, 8443), 0},
		{}, {},
		{key("10.0.0.1", "10.244.1.7", 40000, 443), 0},
		{udpPost, 0},
		{key("fd00::1", "fd00::99", 40000, 53), flow.VerdictDeny},
		{nat64Post, 0},
		{flow.Key{}, flow.VerdictDeny},
		{flow.Key{}, 0},
	}
	got, errs := collectAll(t, NewDecoder(DecoderConfig{}), msg)
	if len(errs) > 0 || len(got) != len(wants) {
		t.Fatalf("%d records, errors %v", len(got), errs)
	}
	for i, w := range wants {
		if got[i].PostNAT != w.post || got[i].Verdict != w.verdict {
			t.Errorf("record %d: PostNAT %+v verdict %q, want %+v %q", i, got[i].PostNAT, got[i].Verdict, w.post, w.verdict)
		}
	}
	if got[4].Key != udp {
		t.Errorf("record 4 key %+v", got[4].Key)
	}
	// NetFlow v9 (Cisco ASA NSEL): the same ids, and NF_F_FW_EVENT.
	v9 := build(9, 0, 1, set(0, u16s(260, 7, 8, 4, 12, 4, 7, 2, 11, 2, 4, 1, 226, 4, 40005, 1)),
		set(260, cat(a4("10.0.0.1"), a4("10.96.0.10"), u16s(40000, 443), []byte{6}, a4("10.244.0.3"), []byte{3})))
	got, errs = collectAll(t, NewDecoder(DecoderConfig{}), v9)
	if len(errs) > 0 || len(got) != 1 || got[0].PostNAT != key("10.0.0.1", "10.244.0.3", 40000, 443) || got[0].Verdict != flow.VerdictDeny {
		t.Errorf("v9: %+v, errors %v", got, errs)
	}
}

// BenchmarkAddNAT: as BenchmarkAdd, of translated records (the NAT
// templates, IPv4 and IPv6 alternating).
func BenchmarkAddNAT(b *testing.B) {
	e, _ := NewEncoder(Config{}, func([]byte) error { return nil })
	r := rand.New(rand.NewPCG(9, 10))
	recs := []flow.Record{randRecord(r, 1), randRecord(r, 3)}
	withNAT(&recs[0], 6)
	withNAT(&recs[1], 6)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := e.Add(&recs[i&1]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAddDeny: as BenchmarkAdd, of denied records (firewallEvent).
func BenchmarkAddDeny(b *testing.B) {
	e, _ := NewEncoder(Config{}, func([]byte) error { return nil })
	r := rand.New(rand.NewPCG(9, 10))
	recs := []flow.Record{randRecord(r, 1), randRecord(r, 3)}
	withNAT(&recs[0], 7)
	withNAT(&recs[1], 7)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := e.Add(&recs[i&1]); err != nil {
			b.Fatal(err)
		}
	}
}

// TestNATSampled: when the only sampled records are translated or denied
// ones, their interval is still announced in options data (the sampled
// pairs include the NAT and deny ones) and decodes with no unknown
// selector.
func TestNATSampled(t *testing.T) {
	var msgs [][]byte
	e, _ := NewEncoder(Config{}, collectMsgs(&msgs))
	r := rand.New(rand.NewPCG(51, 52))
	var want []flow.Record
	for i := range 50 {
		rec := randRecord(r, i)
		if i%2 == 0 {
			withNAT(&rec, []int{6, 72}[i%4/2]) // translated, or translated and denied
			rec.Sampling = 8
		}
		e.Add(&rec)
		want = append(want, travelled(rec))
	}
	e.Flush()
	d := NewDecoder(DecoderConfig{})
	got, errs := collectAll(t, d, msgs...)
	if len(errs) > 0 || len(got) != len(want) {
		t.Fatalf("decoded %d of %d, errors %v", len(got), len(want), errs)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("record %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	if st := d.Stats(); st.Errors != [NumDecodeErrors]uint64{} || st.OptionsRecords == 0 {
		t.Errorf("stats %+v", st)
	}
}

// encodeParse encodes n random records (seeded), each changed by the with
// helpers in turn, and parses the messages with the independent parser. It
// checks that the first message announces no template before a record
// needs it, and returns the messages, the records, the last templates seen,
// the parsed records and the encoder.
func encodeParse(t *testing.T, cfg Config, seed uint64, n int, with ...func(*flow.Record, int)) ([][]byte, []flow.Record, map[uint16][]wireField, []decoded, *Encoder) {
	t.Helper()
	var msgs [][]byte
	e, err := NewEncoder(cfg, collectMsgs(&msgs))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, seed+1))
	recs := make([]flow.Record, n)
	for i := range recs {
		recs[i] = randRecord(r, i)
		for _, w := range with {
			w(&recs[i], i)
		}
		if err := e.Add(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	e.Flush()
	var templates map[uint16][]wireField
	var got []decoded
	for k, m := range msgs {
		pm := parseMessage(t, m, templates)
		if k == 0 {
			for id := range pm.templates {
				if id > TemplateSampling {
					t.Errorf("first message announces template %d before any record needs it", id)
				}
			}
		}
		templates = pm.templates
		got = append(got, pm.records...)
	}
	return msgs, recs, templates, got, e
}
