package ipfix

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// clock is an injectable time.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// oneField is a message of domain announcing template id with one field
// (protocolIdentifier), and a record of it when data.
func oneField(domain uint32, id uint16, data bool) []byte {
	sets := [][]byte{set(2, u16s(id, 1, 4, 1))}
	if data {
		sets = append(sets, set(id, []byte{6}))
	}
	return build(Version, 0, domain, sets...)
}

// TestExporterLimits: an exporter over its session limit forgets its own
// least recently used session (a session in use is kept), never another
// exporter's; over its template or byte limit likewise; each eviction is
// counted by reason.
func TestExporterLimits(t *testing.T) {
	a, b := netip.MustParseAddrPort("192.0.2.1:4739"), netip.MustParseAddrPort("192.0.2.2:4739")
	d := NewDecoder(DecoderConfig{Budget: NewBudget(0, ExporterLimits{Sessions: 4, Templates: 6})})
	decode := func(from netip.AddrPort, msg []byte) int {
		n := 0
		if err := d.Decode(from, msg, func(*flow.Record) { n++ }); err != nil {
			t.Fatalf("%v: %v", from, err)
		}
		return n
	}
	decode(b, oneField(1, 256, true))
	decode(b, oneField(2, 256, true))
	for dom := uint32(1); dom <= 4; dom++ {
		decode(a, oneField(dom, 256, true))
	}
	decode(a, oneField(1, 256, true)) // domain 1 used again: domain 2 is the least recent
	decode(a, oneField(5, 256, true))
	for _, c := range [][2]int{{1, 1}, {3, 1}, {4, 1}, {5, 1}, {2, 0}} { // 2 comes back new, without its template: 1 goes
		if got := decode(a, build(Version, 0, uint32(c[0]), set(256, []byte{6}))); got != c[1] {
			t.Errorf("exporter a, domain %d: %d records, want %d", c[0], got, c[1])
		}
	}
	for dom := uint32(1); dom <= 2; dom++ {
		if got := decode(b, build(Version, 0, dom, set(256, []byte{6}))); got != 1 {
			t.Errorf("exporter b lost domain %d", dom)
		}
	}
	st := d.Stats()
	if st.Evicted[EvictExporterSessions] != 2 || st.SessionsLive != 6 {
		t.Errorf("sessions: %+v", st)
	}
	// Templates: a holds 3 (domains 3, 4, 5; 2 has none); 4 more in
	// domain 5 (7 > 6) evict its least recently used other session, 3.
	decode(a, build(Version, 0, 5, set(2, u16s(257, 1, 4, 1), u16s(258, 1, 4, 1), u16s(259, 1, 4, 1), u16s(260, 1, 4, 1))))
	if st := d.Stats(); st.Evicted[EvictExporterTemplates] != 1 || st.TemplatesLive != 2+6 {
		t.Errorf("templates: %+v", st)
	}
	// More templates in one session than the exporter may hold: it has
	// nothing else to give up, refused.
	var tmpls []byte
	for id := uint16(300); id < 310; id++ {
		tmpls = append(tmpls, u16s(id, 1, 4, 1)...)
	}
	if err := d.Decode(a, build(Version, 0, 5, set(2, tmpls)), func(*flow.Record) {}); err == nil || d.Stats().Errors[ErrExporterLimit] != 1 {
		t.Errorf("over the limit alone: %v, %+v", err, d.Stats())
	}
	if used, _ := d.budget.Used(); uint64(used) != d.Stats().StateBytes {
		t.Errorf("budget holds %d, the sessions %d", used, d.Stats().StateBytes)
	}
	d.Close()
	if used, _ := d.budget.Used(); used != 0 {
		t.Errorf("closed: %d bytes still held", used)
	}
}

// TestManyDomains: one source announcing templates under 4,100
// observation domains (the decoder's bound is 4,096 sessions) keeps only
// its own 256 most recent; a second exporter's records all decode, then
// and after 3 minutes without data the flood's sessions are gone.
func TestManyDomains(t *testing.T) {
	c := &clock{time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	d := NewDecoder(DecoderConfig{Now: c.now})
	flood, good := netip.MustParseAddrPort("192.0.2.66:1024"), netip.MustParseAddrPort("192.0.2.7:4739")
	got := 0
	for dom := range uint32(4100) {
		d.Decode(flood, oneField(dom, 256, false), nil)
		if dom%1000 == 0 {
			if err := d.Decode(good, oneField(dom, 300, true), func(*flow.Record) { got++ }); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := d.Stats()
	if got != 5 || st.SessionsLive != DefaultExporterSessions+5 || st.Evicted[EvictExporterSessions] != 4100-DefaultExporterSessions ||
		st.Errors[ErrTooManySessions] != 0 {
		t.Fatalf("%d of 5 records; %+v", got, st)
	}
	c.t = c.t.Add(DefaultDatalessTimeout + time.Second)
	d.Decode(good, build(Version, 0, 0, set(300, []byte{6})), func(*flow.Record) { got++ })
	if st := d.Stats(); got != 6 || st.SessionsLive != 5 || st.Evicted[EvictNoData] != DefaultExporterSessions {
		t.Errorf("after %v: %d records; %+v", DefaultDatalessTimeout, got, st)
	}
}

// TestBudgetFull: when the shared budget is full, new templates are
// refused (counted) whoever sends them, two decoders count against one
// budget, and the exporters' own limits span both decoders; after the
// sessions without data expire the budget takes templates again.
func TestBudgetFull(t *testing.T) {
	c := &clock{time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	b := NewBudget(256<<10, ExporterLimits{Sessions: 8})
	d1, d2 := NewDecoder(DecoderConfig{Budget: b, Now: c.now}), NewDecoder(DecoderConfig{Budget: b, Now: c.now})
	var refused int
	for i := range 2000 {
		from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 4739)
		d := d1
		if i%2 == 1 {
			d = d2
		}
		if d.Decode(from, oneField(1, 256, false), nil) != nil {
			refused++
		}
	}
	used, limit := b.Used()
	st1, st2 := d1.Stats(), d2.Stats()
	if refused == 0 || used > limit || st1.Errors[ErrTemplateBudget]+st2.Errors[ErrTemplateBudget] != uint64(refused) ||
		int64(st1.StateBytes+st2.StateBytes) != used {
		t.Fatalf("%d refused, %d of %d bytes; %+v %+v", refused, used, limit, st1, st2)
	}
	// One exporter in both decoders: 8 sessions in all.
	x := netip.MustParseAddr("192.0.2.9")
	c.t = c.t.Add(DefaultDatalessTimeout + time.Second)
	for dom := range uint32(12) {
		d := []*Decoder{d1, d2}[dom%2]
		if err := d.Decode(netip.AddrPortFrom(x, 4739), oneField(dom, 256, true), func(*flow.Record) {}); err != nil {
			t.Fatalf("after expiry, domain %d: %v", dom, err)
		}
	}
	if u := b.by[x]; u == nil || u.sessions != 8 || len(d1.sessions)+len(d2.sessions) != 8 {
		t.Errorf("exporter over two decoders holds %+v, the decoders %d", u, len(d1.sessions)+len(d2.sessions))
	}
}

// floodMsg builds a message of domain announcing templates first..first+n-1
// of fields fields each, in buf.
func floodMsg(buf []byte, domain uint32, first uint16, n, fields int) []byte {
	be := binary.BigEndian
	buf = append(buf[:0], make([]byte, headerLen)...)
	be.PutUint16(buf, Version)
	be.PutUint32(buf[12:], domain)
	buf = be.AppendUint16(buf, 2)
	buf = be.AppendUint16(buf, uint16(4+n*(4+4*fields)))
	for i := range n {
		buf = be.AppendUint16(buf, first+uint16(i))
		buf = be.AppendUint16(buf, uint16(fields))
		for f := range fields {
			buf = be.AppendUint16(buf, uint16(1+f%300)) // known and unknown elements
			buf = be.AppendUint16(buf, 4)
		}
	}
	be.PutUint16(buf[2:], uint16(len(buf)))
	return buf
}

// heapAfterGC returns the live heap.
func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestTemplateFloodHeap: a template flood of 1,000 domains × 512
// templates × 500 fields (from one source, then from 1,000 sources) into
// two decoders sharing the default 64 MiB budget keeps the live heap
// within the budget plus a small constant, and within what the budget
// says is held plus that constant (the charges are conservative).
func TestTemplateFloodHeap(t *testing.T) {
	const domains, templates, fields = 1000, 512, 500
	const perMsg = 32 // 64 KB messages
	if raceEnabled {
		t.Log("race detector: the flood from one source is cut to 50 domains")
	}
	for _, sources := range []int{1, domains} {
		t.Run(fmt.Sprintf("%d sources", sources), func(t *testing.T) {
			doms := domains
			if raceEnabled && sources == 1 {
				doms = 50 // every template is parsed and kept (evicting): slow under the race detector
			}
			b := NewBudget(DefaultBudget, ExporterLimits{})
			ds := []*Decoder{NewDecoder(DecoderConfig{Budget: b}), NewDecoder(DecoderConfig{Budget: b})}
			var msgs [][]byte // built once (the domain is patched in): the test times the decoder, not the builder
			for first := 256; first < 256+templates; first += perMsg {
				msgs = append(msgs, floodMsg(nil, 0, uint16(first), perMsg, fields))
			}
			before := heapAfterGC()
			for dom := range doms {
				from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(dom % sources >> 8), byte(dom % sources)}), 4739)
				for _, m := range msgs {
					binary.BigEndian.PutUint32(m[12:], uint32(dom))
					ds[dom%2].Decode(from, m, nil)
				}
			}
			after := heapAfterGC()
			used, limit := b.Used()
			var st DecodeStats
			for _, d := range ds {
				s := d.Stats()
				st.Add(&s)
			}
			grew := int64(after) - int64(before)
			t.Logf("heap grew %.1f MiB; budget %.1f of %.0f MiB held; %d templates, %d sessions; evicted %v; refused: %d exporter limit, %d budget",
				float64(grew)/(1<<20), float64(used)/(1<<20), float64(limit)/(1<<20), st.TemplatesLive, st.SessionsLive, st.Evicted,
				st.Errors[ErrExporterLimit], st.Errors[ErrTemplateBudget])
			const slack = 4 << 20 // scratch buffers, map directories, the runtime's own
			if used > limit || grew > limit+slack || grew > used+slack {
				t.Errorf("heap grew %d bytes: budget %d, held %d", grew, limit, used)
			}
			if sources == 1 && (used > limit/DefaultExporterShare || st.Evicted[EvictExporterBytes] == 0) {
				t.Errorf("one source holds %d bytes (its share %d); %+v", used, limit/DefaultExporterShare, st)
			}
			if sources > 1 && (st.Errors[ErrTemplateBudget] == 0 || used < limit*3/4) {
				t.Errorf("many sources: budget %d of %d, %d refusals", used, limit, st.Errors[ErrTemplateBudget])
			}
			runtime.KeepAlive(ds)
		})
	}
}
