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

// TestBudgetFull: 64 exporter addresses, each within its own limits,
// fill a budget shared by two decoders; from then on every new session
// or template makes room by evicting the least recently used session of
// the exporter holding the most (counted as budget_full), so an exporter
// that joins during the flood gets every template in and every record
// through, and is never the victim; nothing is refused and the budget
// holds. The exporters' own limits still span both decoders.
func TestBudgetFull(t *testing.T) {
	c := &clock{time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	b := NewBudget(1<<20, ExporterLimits{Sessions: 8})
	d1, d2 := NewDecoder(DecoderConfig{Budget: b, Now: c.now}), NewDecoder(DecoderConfig{Budget: b, Now: c.now})
	good := netip.MustParseAddrPort("192.0.2.7:4739") // 5 sessions, ~8 KiB: under the fair share (1 MiB ÷ 65, ~16 KiB)
	var buf []byte
	got, want := 0, 0
	for round := range 40 {
		for i := range 64 { // 64 addresses × 8 domains × 20 templates of 100 fields: ~7.5 MB wanted, 1 MiB held
			from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), 4739)
			buf = floodMsg(buf, uint32(round%8), uint16(256+4*(round/8)), 4, 100)
			[]*Decoder{d1, d2}[i%2].Decode(from, buf, nil)
		}
		if round%8 == 7 { // meanwhile a real exporter adds a domain and sends data in each
			for dom := uint32(0); dom <= uint32(round/8); dom++ {
				want++
				if err := d2.Decode(good, oneField(dom, 300, true), func(*flow.Record) { got++ }); err != nil {
					t.Fatalf("round %d, domain %d: %v", round, dom, err)
				}
			}
		}
	}
	used, limit := b.Used()
	st1, st2 := d1.Stats(), d2.Stats()
	refused := st1.Errors[ErrTemplateBudget] + st2.Errors[ErrTemplateBudget]
	evicted := st1.Evicted[EvictBudgetFull] + st2.Evicted[EvictBudgetFull]
	t.Logf("%d of %d bytes held; %d evicted (budget_full), %d refused; the exporter holds %+v", used, limit, evicted, refused, *b.by[good.Addr()])
	if got != want || refused != 0 || evicted == 0 || used > limit || int64(st1.StateBytes+st2.StateBytes) != used {
		t.Fatalf("%d of %d records; %d refused, %d evicted, %d of %d bytes; %+v %+v", got, want, refused, evicted, used, limit, st1, st2)
	}
	if u := b.by[good.Addr()]; u.sessions != 5 || u.templates != 5 || b.heavy[0].bytes <= u.bytes {
		t.Errorf("the real exporter holds %+v, the largest %+v", *u, *b.heavy[0])
	}
	// Every exporter: the largest holds at most one session more than
	// the smallest flooder (max-min fairness), within its 1/16 share.
	small := int64(limit)
	for _, u := range b.by {
		if u.addr != good.Addr() {
			small = min(small, u.bytes)
		}
	}
	if top := b.heavy[0].bytes; top > limit/DefaultExporterShare || top-small > 2*(sessionCost+4*templateCost(100)) {
		t.Errorf("largest exporter %d bytes, smallest flooder %d", top, small)
	}
	d1.Close()
	d2.Close()
	if used, _ := b.Used(); used != 0 || len(b.heavy) != 0 || len(b.by) != 0 {
		t.Errorf("closed: %d bytes, %d exporters still held", used, len(b.heavy))
	}
	// One exporter in both decoders: 8 sessions in all.
	x := netip.MustParseAddr("192.0.2.9")
	for dom := range uint32(12) {
		d := []*Decoder{d1, d2}[dom%2]
		if err := d.Decode(netip.AddrPortFrom(x, 4739), oneField(dom, 256, true), func(*flow.Record) {}); err != nil {
			t.Fatalf("domain %d: %v", dom, err)
		}
	}
	if u := b.by[x]; u == nil || u.sessions != 8 || len(d1.exporters[x].all())+len(d2.exporters[x].all()) != 8 {
		t.Errorf("exporter over two decoders holds %+v", u)
	}
}

// all lists the sessions, most recent first.
func (l *exporterList) all() []*session {
	var ss []*session
	for s := l.newest; s != nil; s = s.older {
		ss = append(ss, s)
	}
	return ss
}

// TestBudgetFullBusyDecoder: when the exporter holding the most has its
// sessions in a decoder that is busy (its mutex held, as while it
// decodes), a newcomer under its fair share is let in on an overdraft
// of at most 1/64 of the budget, and the busy decoder pays it (evicting
// that exporter's least recently used sessions, counted) as soon as it
// is released; an idle decoder is evicted from at once.
func TestBudgetFullBusyDecoder(t *testing.T) {
	b := NewBudget(256<<10, ExporterLimits{Bytes: 1 << 30})
	d1, d2 := NewDecoder(DecoderConfig{Budget: b}), NewDecoder(DecoderConfig{Budget: b})
	big := netip.MustParseAddrPort("10.0.0.1:4739")
	var buf []byte
	fill := func(from uint32) { // until big makes room by evicting its own sessions
		for dom := from; d1.Stats().Evicted[EvictBudgetFull] == 0; dom++ {
			if dom > from+1000 {
				t.Fatal("the budget never filled")
			}
			d1.Decode(big, floodMsg(buf, dom, 256, 4, 100), nil)
		}
	}
	topUp := func(dom uint32) { // one-field templates until less than one more fits
		for id := uint16(256); ; id++ {
			if used, limit := b.Used(); used+templateCost(1) > limit || id > 600 {
				break
			}
			d1.Decode(big, oneField(dom, id, false), nil)
		}
	}
	fill(0)
	topUp(9999)
	if used, limit := b.Used(); used+templateCost(1) <= limit {
		t.Fatalf("the flood holds %d of %d", used, limit)
	}
	idle := d1.Stats().Evicted[EvictBudgetFull]
	// d1 idle: a newcomer in d2 evicts big's oldest session there and then.
	newcomer := netip.MustParseAddrPort("192.0.2.7:4739")
	n := 0
	if err := d2.Decode(newcomer, oneField(1, 300, true), func(*flow.Record) { n++ }); err != nil || n != 1 {
		t.Fatalf("newcomer with d1 idle: %v, %d records", err, n)
	}
	if ev := d1.Stats().Evicted[EvictBudgetFull]; ev <= idle {
		t.Fatalf("idle decoder: nothing evicted (%d, before %d)", ev, idle)
	}
	if used, limit := b.Used(); used > limit {
		t.Fatalf("idle decoder: %d of %d held", used, limit)
	}
	// Fill again, then hold d1 busy while newcomers come.
	topUp(9998)
	before := d1.Stats().Evicted[EvictBudgetFull]
	d1.mu.Lock()
	for i := range 4 {
		if err := d2.Decode(newcomer, oneField(uint32(10+i), 300, true), func(*flow.Record) { n++ }); err != nil {
			d1.unlock()
			t.Fatalf("newcomer with d1 busy: %v", err)
		}
	}
	used, limit := b.Used()
	if !d1.owes.Load() || used <= limit || used > limit+b.over || n != 5 {
		d1.unlock()
		t.Fatalf("d1 busy: owes %v, %d of %d bytes (overdraft %d), %d records", d1.owes.Load(), used, limit, b.over, n)
	}
	d1.unlock() // pays
	used, _ = b.Used()
	if d1.owes.Load() || used > limit || d1.Stats().Evicted[EvictBudgetFull] <= before || len(b.debts) != 0 {
		t.Errorf("after d1 released: owes %v, %d of %d bytes, evicted %d (before %d)", d1.owes.Load(), used, limit,
			d1.Stats().Evicted[EvictBudgetFull], before)
	}
	d1.Close()
	d2.Close()
	if used, _ := b.Used(); used != 0 {
		t.Errorf("closed: %d bytes held", used)
	}
}

// TestBudgetFullConcurrent: two decoders sharing a small budget decode a
// flood from many addresses on two goroutines while a third exporter
// sends data: no deadlock, every record of the third exporter decodes,
// the budget holds within its overdraft, and after both stop it is
// within its limit again and agrees with the sessions.
func TestBudgetFullConcurrent(t *testing.T) {
	b := NewBudget(256<<10, ExporterLimits{})
	ds := []*Decoder{NewDecoder(DecoderConfig{Budget: b}), NewDecoder(DecoderConfig{Budget: b})}
	good := netip.MustParseAddrPort("192.0.2.7:4739")
	errs := make(chan error, 2)
	for g, d := range ds {
		go func() {
			var buf []byte
			got := 0
			for i := range 3000 {
				from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(g), 0, byte(i % 32)}), 4739)
				d.Decode(from, floodMsg(buf, uint32(i/32%8), uint16(256+i%4), 1, 100), nil)
				if g == 1 && i%100 == 0 {
					if err := d.Decode(good, oneField(uint32(i/100%4), 300, true), func(*flow.Record) { got++ }); err != nil {
						b.mu.Lock()
						errs <- fmt.Errorf("message %d: %v; debts %v; top %v %d %v; owes %v %v", i, err, b.debts, b.heavy[0].addr, b.heavy[0].bytes, b.heavy[0].in, ds[0].owes.Load(), ds[1].owes.Load())
						b.mu.Unlock()
						return
					}
				}
				if used, limit := b.Used(); used > limit+b.over {
					errs <- fmt.Errorf("message %d: %d of %d bytes held", i, used, limit)
					return
				}
			}
			if g == 1 && got != 30 {
				errs <- fmt.Errorf("%d of 30 records", got)
				return
			}
			errs <- nil
		}()
	}
	for range ds {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("deadlock: the decoders did not finish within 60 s")
		}
	}
	used, limit := b.Used()
	var held uint64
	for _, d := range ds {
		st := d.Stats()
		held += st.StateBytes
	}
	if used > limit || uint64(used) != held {
		t.Errorf("after: %d of %d bytes held, the sessions %d", used, limit, held)
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
		t.Log("race detector: the flood is cut to 50 domains from one source, 100 from many")
	}
	for _, sources := range []int{1, domains} {
		t.Run(fmt.Sprintf("%d sources", sources), func(t *testing.T) {
			doms := domains
			switch {
			case raceEnabled && sources == 1:
				doms = 50 // every template is parsed and kept (evicting): slow under the race detector
			case raceEnabled:
				doms = 100 // likewise once the budget is full (the largest exporter gives way); 100 × 4 MiB still overfill it
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
			if sources > 1 && (st.Evicted[EvictBudgetFull] == 0 || used < limit*3/4) {
				t.Errorf("many sources: budget %d of %d, %d evicted for others", used, limit, st.Evicted[EvictBudgetFull])
			}
			runtime.KeepAlive(ds)
		})
	}
}
