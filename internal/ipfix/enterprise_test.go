package ipfix

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/weir-dev/weir/internal/flow"
)

const testPEN = DocumentationPEN

// Enrichment as internal/enrich gives it: shared, immutable values.
var (
	entWorkloads = []*flow.Workload{
		{Name: "frontend-7d9f", Namespace: "shop", Node: "node-1"},
		{Name: "db-0", Namespace: "shop", Node: "node-2"},
		{Name: "gateway", Node: "edge-ü"}, // no namespace; not ASCII
		{Name: "host-a"},
	}
	entServices = []*flow.Service{
		{Name: "shop/frontend", Backends: "10.244.1.7:8443,10.244.2.9:8443", Group: "lbg-web"},
		{Name: "shop/db,shop/db-ro", Backends: "10.244.3.1:5432"},
		{Name: "kube-system/dns"},
	}
)

// withEnt gives record i enrichment in a pattern (i%8) that meets the
// other helpers' in every combination: 0 none at all (what withNAT gave
// of rule, mark and zone removed too), 1 the source workload, 2 the
// destination and a VIP service, 3 everything, 4 only a mark, 5 only a
// rule, 6 both workloads and an ambiguous service, 7 a service match
// without a service and a zone.
func withEnt(rec *flow.Record, i int) {
	w := func(k int) *flow.Workload { return entWorkloads[k%len(entWorkloads)] }
	switch i % 8 {
	case 0:
		rec.Rule, rec.Mark, rec.Zone = "", 0, 0
	case 1:
		rec.SrcWorkload = w(i)
	case 2:
		rec.DstWorkload, rec.Service, rec.ServiceMatch = w(i+1), entServices[0], flow.ServiceMatchVIP
	case 3:
		rec.SrcWorkload, rec.DstWorkload = w(i), w(i+2)
		rec.Service, rec.ServiceMatch = entServices[i%3], flow.ServiceMatchNAT
		rec.Rule, rec.Mark, rec.Zone = "allow-web", 0xdead_beef, 65535
	case 4:
		rec.Mark = uint32(i)
	case 5:
		rec.Rule = "weir-deny-" + strconv.Itoa(i%5)
	case 6:
		rec.SrcWorkload, rec.DstWorkload = w(i+3), w(i)
		rec.Service, rec.ServiceMatch = entServices[1], flow.ServiceMatchAmbiguous
	case 7:
		rec.ServiceMatch, rec.Zone = flow.ServiceMatchBackend, uint16(i)
	}
}

// travelledEnt is rec as weir's decoder gives it back from an Encoder
// with a PEN, read with the same PEN (pen) or without it: with, the rule,
// mark and zone travel too; without, no enrichment does. A workload or
// service of empty strings reads back as none.
func travelledEnt(rec flow.Record, pen bool) flow.Record {
	r := travelled(rec)
	if !pen {
		r.SrcWorkload, r.DstWorkload, r.Service, r.ServiceMatch = nil, nil, nil, flow.ServiceMatchNone
		return r
	}
	r.Rule, r.Mark, r.Zone = rec.Rule, rec.Mark, rec.Zone
	for _, w := range []**flow.Workload{&r.SrcWorkload, &r.DstWorkload} {
		if *w != nil && **w == (flow.Workload{}) {
			*w = nil
		}
	}
	if r.Service != nil && *r.Service == (flow.Service{}) {
		r.Service = nil
	}
	return r
}

// sameRecord compares records, workloads and services by value.
func sameRecord(a, b flow.Record) bool {
	eqW := func(x, y *flow.Workload) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	if !eqW(a.SrcWorkload, b.SrcWorkload) || !eqW(a.DstWorkload, b.DstWorkload) ||
		(a.Service == nil) != (b.Service == nil) || (a.Service != nil && *a.Service != *b.Service) {
		return false
	}
	a.SrcWorkload, a.DstWorkload, a.Service = nil, nil, nil
	b.SrcWorkload, b.DstWorkload, b.Service = nil, nil, nil
	return a == b
}

// show prints a record with its workloads and service.
func show(r flow.Record) string {
	s := fmt.Sprintf("%+v", r)
	for _, w := range []*flow.Workload{r.SrcWorkload, r.DstWorkload} {
		if w != nil {
			s += fmt.Sprintf(" workload %+v", *w)
		}
	}
	if r.Service != nil {
		s += fmt.Sprintf(" service %+v", *r.Service)
	}
	return s
}

// entWant are the enterprise strings of rec, by "pen/id", as the wire
// carries them.
func entWant(rec *flow.Record) map[string]string {
	var s [entStrings]string
	loadStrings(&s, rec)
	m := map[string]string{}
	for i, id := range entStringIDs {
		m[fmt.Sprintf("%d/%d", testPEN, id)] = s[i]
	}
	return m
}

// TestEnterpriseRoundTrip: records of both families, with and without
// drops, sampling, NAT, deny and enrichment (every subset withEnt makes)
// from an Encoder with a PEN, in each of the 64 templates: the enterprise
// templates (289–320) carry every element with the enterprise bit and the
// PEN, and are not in the first message; an independent parser finds each
// enriched record's strings and integers, and none on records without
// enrichment; weir's decoder with the PEN gives every record back equal,
// with no error and no gap; without the PEN, or with another, the records
// come back with no enrichment (the elements skipped) and still no error.
func TestEnterpriseRoundTrip(t *testing.T) {
	const n = 40000
	msgs, recs, templates, got, e := encodeParse(t, Config{Domain: 5, RefreshMessages: 10, PEN: testPEN}, 61, n, withDrops, withSampling, withNAT, withEnt)
	for i := range 64 {
		fs, ok := templates[templateID(i)]
		if !ok {
			t.Errorf("template %d (index %d) never announced", templateID(i), i)
			continue
		}
		var ent int
		for _, f := range fs {
			if f.pen == testPEN {
				ent++
			} else if f.pen != 0 && f.pen != ReversePEN {
				t.Errorf("template %d: field %d of PEN %d", templateID(i), f.id, f.pen)
			}
		}
		if want := map[bool]int{true: 13, false: 0}[i&tEnt != 0]; ent != want {
			t.Errorf("template %d has %d enterprise fields, want %d", templateID(i), ent, want)
		}
	}
	if len(got) != n {
		t.Fatalf("%d records parsed, want %d", len(got), n)
	}
	key := func(id int) string { return fmt.Sprintf("%d/%d", testPEN, id) }
	var nent int
	for i, d := range got {
		w := &recs[i]
		if _, ok := d[key(EntCtMark)]; ok != enriched(w) {
			t.Fatalf("record %d (enriched %v): enterprise fields %v", i, enriched(w), ok)
		} else if !ok {
			continue
		}
		nent++
		for k, v := range entWant(w) {
			if string(d[k]) != v {
				t.Fatalf("record %d: %s = %q, want %q", i, k, d[k], v)
			}
		}
		if u(d[key(EntServiceMatch)]) != uint64(w.ServiceMatch) || u(d[key(EntCtMark)]) != uint64(w.Mark) ||
			u(d[key(EntCtZone)]) != uint64(w.Zone) || len(d[key(EntCtMark)]) != 4 || len(d[key(EntCtZone)]) != 2 {
			t.Fatalf("record %d: match %x mark %x zone %x", i, d[key(EntServiceMatch)], d[key(EntCtMark)], d[key(EntCtZone)])
		}
	}
	if nent < n/2 || nent == n {
		t.Errorf("%d of %d records enriched: the test shows little", nent, n)
	}
	for _, c := range []struct {
		pen  uint32
		want bool
	}{{testPEN, true}, {0, false}, {12345, false}} {
		d := NewDecoder(DecoderConfig{PEN: c.pen})
		dec, errs := collectAll(t, d, msgs...)
		if len(errs) > 0 || len(dec) != n {
			t.Fatalf("PEN %d: decoded %d of %d, errors %v", c.pen, len(dec), n, errs)
		}
		for i := range recs {
			if want := travelledEnt(recs[i], c.want); !sameRecord(dec[i], want) {
				t.Fatalf("PEN %d, record %d:\n got %s\nwant %s", c.pen, i, show(dec[i]), show(want))
			}
		}
		if st := d.Stats(); st.SequenceGaps != 0 || st.Errors != [NumDecodeErrors]uint64{} || st.TemplatesLive != 65 || st.InternFull != 0 {
			t.Errorf("PEN %d: stats %+v", c.pen, st)
		}
	}
	if e.Cut() != 0 {
		t.Errorf("%d strings cut", e.Cut())
	}
}

// TestNoEnterpriseUnchanged: an Encoder with a PEN, given records with
// none of the enterprise fields (but drops, sampling and NAT64 keys, as
// TestNoNATUnchanged), gives byte for byte what it gave before the
// enterprise templates existed: TestNoNATUnchanged's digests.
func TestNoEnterpriseUnchanged(t *testing.T) {
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
		e, _ := NewEncoder(Config{Domain: 9, MTU: c.mtu, RefreshMessages: 7, PEN: testPEN, Now: func() time.Time { return now }},
			func(m []byte) error { h.Write(m); return nil })
		r := rand.New(rand.NewPCG(uint64(c.seed), uint64(c.seed+1)))
		for i := range 1000 {
			rec := randRecord(r, i)
			if c.drops {
				withDrops(&rec, i)
			}
			rec.Sampling = uint32(i % 2)
			if i%4 == 1 {
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

// TestEnterpriseConfig: the reverse elements' PEN cannot be weir's.
func TestEnterpriseConfig(t *testing.T) {
	if _, err := NewEncoder(Config{PEN: ReversePEN}, func([]byte) error { return nil }); !errors.Is(err, ErrBadConfig) {
		t.Errorf("PEN %d: %v", ReversePEN, err)
	}
}

// TestEnterpriseBudget: in every enterprise template, a record with the
// longest interface name leaves room at MinMTU for every string's length
// octet (fitStrings can always fit them, if need be empty).
func TestEnterpriseBudget(t *testing.T) {
	e, _ := NewEncoder(Config{MTU: MinMTU, PEN: testPEN}, func([]byte) error { return nil })
	for i := tEnt; i < 2*tEnt; i++ {
		if b := e.room() - e.fixed[i] - 1 - maxName; b < entStrings { // room: less the header, a set header and padding
			t.Errorf("template %d: %d octets for %d strings", templateID(i), b, entStrings)
		}
	}
}

// longStrings are the enrichment of TestEnterpriseCut: strings of
// multi-octet runes, longer than any message holds.
func longStrings(i int) (*flow.Workload, *flow.Workload, *flow.Service, string) {
	rep := func(s string, n int) string { return strings.Repeat(s, n) }
	return &flow.Workload{Name: rep("é", 1000+i), Namespace: "ns", Node: rep("n", 300)},
		&flow.Workload{Name: "short", Namespace: rep("日本", 400)},
		&flow.Service{Name: rep("s", 5000), Backends: rep("10.0.0.1:80,", 500), Group: "g"},
		rep("🙂", 100)
}

// TestEnterpriseCut: records whose strings do not fit in a message, in the
// largest template (IPv6, drops, sampling, NAT, deny) with the longest
// interface name, at MinMTU, the default and the largest MTU: every
// message fits its MTU; each string comes back whole or cut at a rune
// start to a prefix, with the strings that fit whole left whole; Cut
// counts exactly the strings cut; a record whose only long string is
// ASCII fills its message exactly; at 65535 strings of 255 octets and
// more travel whole (the 3-octet length).
func TestEnterpriseCut(t *testing.T) {
	for _, mtu := range []int{MinMTU, DefaultMTU, MaxMTU} {
		var msgs [][]byte
		e, _ := NewEncoder(Config{MTU: mtu, PEN: testPEN}, collectMsgs(&msgs))
		r := rand.New(rand.NewPCG(63, 64))
		var sent []flow.Record
		for i := range 40 {
			rec := randRecord(r, 3) // IPv6
			rec.Iface = strings.Repeat("i", 300)
			withDrops(&rec, 2)
			rec.Sampling = 4
			withNAT(&rec, 72) // translated and denied: the rule is set
			rec.SrcWorkload, rec.DstWorkload, rec.Service, rec.Rule = longStrings(i)
			if i%2 == 1 {
				rec.Service.Name = "fits" // one long string less
			}
			if i%4 == 2 { // one long ASCII string: cut to exactly what is left
				rec.SrcWorkload, rec.DstWorkload, rec.Rule = entWorkloads[0], entWorkloads[1], "r"
				rec.Service = &flow.Service{Name: strings.Repeat("s", 5000), Group: "g"}
			}
			if err := e.Add(&rec); err != nil {
				t.Fatal(err)
			}
			sent = append(sent, rec)
		}
		e.Flush()
		full := 0
		for k, m := range msgs {
			if len(m) > mtu {
				t.Fatalf("MTU %d: message %d of %d bytes", mtu, k, len(m))
			}
			if len(m) == mtu {
				full++
			}
		}
		if mtu < MaxMTU && full < 10 {
			t.Errorf("MTU %d: %d messages filled exactly by a record cut to fit", mtu, full)
		}
		got, errs := collectAll(t, NewDecoder(DecoderConfig{PEN: testPEN}), msgs...)
		if len(errs) > 0 || len(got) != len(sent) {
			t.Fatalf("MTU %d: decoded %d of %d, errors %v", mtu, len(got), len(sent), errs)
		}
		var cuts uint64
		for i := range sent {
			var ws, gs [entStrings]string
			loadStrings(&ws, &sent[i])
			loadStrings(&gs, &got[i])
			for j := range ws {
				g, w := gs[j], ws[j]
				if !strings.HasPrefix(w, g) || !utf8.ValidString(g) {
					t.Fatalf("MTU %d, record %d, string %d: %q is not a rune-cut prefix of what was sent", mtu, i, j, g)
				}
				if g != w {
					cuts++
					if len(w) < 255 && mtu > MinMTU {
						t.Errorf("MTU %d, record %d: string %d of %d octets cut", mtu, i, j, len(w))
					}
				}
			}
			if mtu == MaxMTU && gs != ws {
				t.Errorf("MTU %d, record %d: strings cut", mtu, i)
			}
			if got[i].Mark != sent[i].Mark || got[i].Zone != sent[i].Zone || got[i].ServiceMatch != sent[i].ServiceMatch {
				t.Errorf("MTU %d, record %d: integers differ", mtu, i)
			}
		}
		if e.Cut() != cuts || (mtu < MaxMTU && cuts < 40) {
			t.Errorf("MTU %d: Cut() = %d, %d strings came back cut", mtu, e.Cut(), cuts)
		}
	}
}

// TestFitStrings: the cut keeps strings that fit whole, gives the others
// the same length (less what a rune start takes), and uses the budget.
func TestFitStrings(t *testing.T) {
	s := [entStrings]string{"a", strings.Repeat("b", 100), strings.Repeat("c", 50), strings.Repeat("é", 40), "", "", "", "", "", "xyz"}
	// 180 octets for b, c and é (80 octets): cut at 65, c (50) left whole,
	// é cut to 64 (a rune start).
	cost, cut := fitStrings(&s, 10+1+3+180)
	if cut != 2 || s[0] != "a" || s[9] != "xyz" || len(s[1]) != 65 || len(s[2]) != 50 || s[3] != strings.Repeat("é", 32) {
		t.Errorf("cut %d: %q", cut, s)
	}
	if want := 10 + 1 + 3 + 65 + 50 + 64; cost != want {
		t.Errorf("cost %d, want %d", cost, want)
	}
	if got := cutRune("aé", 2); got != "a" {
		t.Errorf("cutRune: %q", got)
	}
}

// TestEnterpriseAllocs: encoding enriched records (all fields, and
// subsets) and decoding them (the same workloads again and again, as
// enrichment gives them) allocate nothing.
func TestEnterpriseAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(65, 66))
	var recs []flow.Record
	for i := range 400 {
		rec := randRecord(r, i)
		withNAT(&rec, i)
		withEnt(&rec, i)
		recs = append(recs, rec)
	}
	e, _ := NewEncoder(Config{PEN: testPEN}, func([]byte) error { return nil })
	if a := testing.AllocsPerRun(100, func() {
		for i := range recs {
			e.Add(&recs[i])
		}
	}); a != 0 {
		t.Errorf("encoding: %v allocations per %d records", a, len(recs))
	}
	var msgs [][]byte
	e, _ = NewEncoder(Config{PEN: testPEN}, collectMsgs(&msgs))
	for i := range recs {
		e.Add(&recs[i])
	}
	e.Flush()
	d := NewDecoder(DecoderConfig{PEN: testPEN})
	var n int
	emit := func(r *flow.Record) {
		if r.SrcWorkload != nil {
			n++
		}
	}
	for _, m := range msgs {
		d.Decode(exporter, m, emit)
	}
	if n == 0 {
		t.Fatal("no workloads decoded")
	}
	if a := testing.AllocsPerRun(100, func() {
		for _, m := range msgs {
			d.Decode(exporter, m, emit)
		}
	}); a != 0 {
		t.Errorf("decoding: %v allocations per %d messages", a, len(msgs))
	}
}

// enrichedPair are two records, IPv4 and IPv6, with every enterprise
// field set (and nothing else special).
func enrichedPair() []flow.Record {
	r := rand.New(rand.NewPCG(9, 10))
	recs := []flow.Record{randRecord(r, 1), randRecord(r, 3)}
	for i := range recs {
		withEnt(&recs[i], 3)
	}
	return recs
}

// BenchmarkAddEnriched: as BenchmarkAdd, of records with every enterprise
// field set (the enterprise templates, IPv4 and IPv6 alternating).
func BenchmarkAddEnriched(b *testing.B) {
	e, _ := NewEncoder(Config{PEN: testPEN}, func([]byte) error { return nil })
	recs := enrichedPair()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := e.Add(&recs[i&1]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/record")
}

// BenchmarkAddPEN: as BenchmarkAdd (plain records) from an Encoder with a
// PEN: what checking for enrichment costs.
func BenchmarkAddPEN(b *testing.B) {
	e, _ := NewEncoder(Config{PEN: testPEN}, func([]byte) error { return nil })
	r := rand.New(rand.NewPCG(9, 10))
	recs := []flow.Record{randRecord(r, 1), randRecord(r, 3)}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := e.Add(&recs[i&1]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeEnriched: as BenchmarkDecode, of records with every
// enterprise field set (interned: the same few workloads).
func BenchmarkDecodeEnriched(b *testing.B) {
	var msgs [][]byte
	e, _ := NewEncoder(Config{PEN: testPEN}, collectMsgs(&msgs))
	recs := enrichedPair()
	for i := range 5000 {
		e.Add(&recs[i&1])
	}
	e.Flush()
	d := NewDecoder(DecoderConfig{PEN: testPEN})
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
