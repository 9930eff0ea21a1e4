package ipfix

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// ent is a template field of enterprise element id under pen.
func ent(id, length uint16, pen uint32) []byte { return cat(u16s(id|0x8000, length), u32s(pen)) }

// varStr is a variable-length string field: 1 length octet, or 255 and 2.
func varStr(s string) []byte {
	if len(s) < 255 {
		return cat([]byte{byte(len(s))}, []byte(s))
	}
	return cat([]byte{255}, u16s(uint16(len(s))), []byte(s))
}

// TestDecodeEnterpriseForms: weir's enterprise elements as another
// exporter might send them: in any order and subset, a string at a fixed
// length, a 3-octet length, a reduced-size mark; an element id weir does
// not know and another PEN's element skipped; lengths weir never sends
// (serviceMatch in 2 octets, ctZone in 4, ctMark variable) counted as
// bad_enterprise_field and skipped; a serviceMatch weir does not know
// counted and read as none; workloads of empty strings read as none; a
// string past its set is bad_field_length. Read without the PEN, none of
// it is taken and nothing is counted.
func TestDecodeEnterpriseForms(t *testing.T) {
	const pen = testPEN
	node := strings.Repeat("n", 300)
	key := cat(u16s(8, 4, 12, 4, 4, 1))
	tmpls := set(2,
		cat(u16s(400, 11), key, ent(12, 2, pen), ent(7, 5, pen), ent(1, Variable, pen), ent(3, Variable, pen),
			ent(10, 1, pen), ent(11, Variable, pen), ent(99, 3, pen), ent(1, Variable, 9999)),
		cat(u16s(401, 7), key, ent(10, 2, pen), ent(13, 4, pen), ent(12, Variable, pen), ent(4, Variable, pen)),
		cat(u16s(402, 7), key, ent(1, Variable, pen), ent(2, Variable, pen), ent(3, Variable, pen), ent(10, 1, pen)))
	addr := []byte{10, 0, 0, 1, 10, 0, 0, 2, 6}
	msg := build(Version, 0, 1, tmpls,
		set(400, cat(addr, u16s(0x0102), []byte("svc-a"), varStr("pod-1"), varStr(node), []byte{3}, varStr("r1"), []byte{1, 2, 3}, varStr("zzz"))),
		set(401, cat(addr, u16s(2), u32s(7), varStr("mark?"), varStr("db-0"))),
		set(402, cat(addr, varStr(""), varStr(""), varStr(""), []byte{9})))
	bad := build(Version, 1, 1, set(402, cat(addr, varStr("x"), []byte{40}, []byte("short"))))
	d := NewDecoder(DecoderConfig{PEN: pen})
	got, errs := collectAll(t, d, msg, bad)
	if len(got) != 3 || len(errs) != 1 {
		t.Fatalf("%d records, errors %v", len(got), errs)
	}
	var de *Error
	if !errors.As(errs[0], &de) || de.Reason != ErrBadFieldLength {
		t.Errorf("string past the set: %v", errs[0])
	}
	want := []flow.Record{
		{SrcWorkload: &flow.Workload{Name: "pod-1", Node: node}, Service: &flow.Service{Name: "svc-a"},
			ServiceMatch: flow.ServiceMatchBackend, Rule: "r1", Mark: 0x0102},
		{DstWorkload: &flow.Workload{Name: "db-0"}},
		{},
	}
	for i, w := range want {
		g := got[i]
		g.Key = flow.Key{}
		if !sameRecord(g, w) {
			t.Errorf("record %d:\n got %s\nwant %s", i, show(g), show(w))
		}
	}
	// 3 lengths in template 401, 1 match in 402.
	if st := d.Stats(); st.Errors[ErrBadEnterpriseField] != 4 || st.Errors[ErrBadTemplate] != 0 {
		t.Errorf("errors %v", st.Errors)
	}
	d = NewDecoder(DecoderConfig{})
	got, _ = collectAll(t, d, msg)
	for i, g := range got {
		g.Key = flow.Key{}
		if !sameRecord(g, flow.Record{}) {
			t.Errorf("without the PEN, record %d: %s", i, show(g))
		}
	}
	if st := d.Stats(); st.Errors != [NumDecodeErrors]uint64{} {
		t.Errorf("without the PEN: errors %v", st.Errors)
	}
}

// TestEnterpriseIntern: a workload decoded again, in another message, as
// source or destination, is the same *flow.Workload, and a service the
// same *flow.Service; past the table's bound of values (or of bytes) the
// table is emptied, counted, and never holds more than its bound, while
// every record still reads back right.
func TestEnterpriseIntern(t *testing.T) {
	var msgs [][]byte
	e, _ := NewEncoder(Config{PEN: testPEN}, collectMsgs(&msgs))
	w, sv := entWorkloads[0], entServices[0]
	for i := range 600 {
		rec := flow.Record{Key: flow.Key{IPVersion: 4, Proto: flow.ProtoUDP}, SrcWorkload: w, Service: sv}
		if i%2 == 1 {
			rec.SrcWorkload, rec.DstWorkload = nil, w
		}
		e.Add(&rec)
	}
	e.Flush()
	if len(msgs) < 2 {
		t.Fatalf("%d messages", len(msgs))
	}
	d := NewDecoder(DecoderConfig{PEN: testPEN})
	got, errs := collectAll(t, d, msgs...)
	if len(got) != 600 || len(errs) > 0 {
		t.Fatalf("%d records, errors %v", len(got), errs)
	}
	first := got[0].SrcWorkload
	for i, r := range got {
		ww := r.SrcWorkload
		if i%2 == 1 {
			ww = r.DstWorkload
		}
		if ww != first || r.Service != got[0].Service || *ww != *w || *r.Service != *sv {
			t.Fatalf("record %d: workload %p (%+v), service %p; want %p, %p", i, ww, ww, r.Service, first, got[0].Service)
		}
	}
	for _, c := range []struct {
		n, size int
	}{{3 * maxEntValues, 10}, {3 * maxEntBytes / 2000, 2000}} {
		msgs = msgs[:0]
		e, _ = NewEncoder(Config{PEN: testPEN, MTU: MaxMTU}, collectMsgs(&msgs))
		pad := strings.Repeat("p", c.size)
		for i := range c.n {
			rec := flow.Record{Key: flow.Key{IPVersion: 4, Proto: flow.ProtoUDP}, SrcWorkload: &flow.Workload{Name: fmt.Sprint(i, pad)}}
			e.Add(&rec)
		}
		e.Flush()
		d = NewDecoder(DecoderConfig{PEN: testPEN})
		var k int
		var wrong error
		emit := func(r *flow.Record) {
			if r.SrcWorkload == nil || r.SrcWorkload.Name != fmt.Sprint(k, pad) {
				wrong = fmt.Errorf("record %d: %+v", k, r.SrcWorkload)
			}
			k++
			for _, s := range d.sessions {
				if s.ent.n > maxEntValues || s.ent.bytes > maxEntBytes || len(s.ent.workloads) != s.ent.n {
					wrong = fmt.Errorf("table of %d values (%d in the map), %d bytes", s.ent.n, len(s.ent.workloads), s.ent.bytes)
				}
			}
		}
		for _, m := range msgs {
			if err := d.Decode(exporter, m, emit); err != nil {
				t.Fatal(err)
			}
		}
		if st := d.Stats(); wrong != nil || k != c.n || st.InternFull < 2 {
			t.Errorf("%d workloads of %d octets: %d records, %d times full: %v", c.n, c.size, k, st.InternFull, wrong)
		}
	}
}
