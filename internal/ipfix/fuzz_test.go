package ipfix

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/weir-dev/weir/internal/flow"
)

// FuzzDecode: two messages of any bytes, as any version, decoded by a
// fresh decoder (from one of a few exporters each): no
// panic, records are IPv4 or IPv6 with printable names and times near
// the receive time, errors are counted, and every bound holds — sessions,
// templates, selectors, interned values, the budget and each exporter's
// limits — with the budget's books equal to what the sessions hold.
//
// Each input gets its own decoder, so its coverage does not depend on the
// inputs before it, and the seeds are small (one record a message): the
// fuzzer minimises every new input before it goes on (0 execs/s
// meanwhile, with -parallel 1), by a search quadratic in its length that
// stops only when it succeeds or after -fuzzminimizetime (60 s). With a
// shared decoder the new coverage did not reproduce and with the
// encoder's 1,400-byte messages the search was too long: every new input
// cost the whole 60 s (golang/go#48820).
func FuzzDecode(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed[0], seed[1])
	}
	exporters := []netip.AddrPort{exporter, netip.MustParseAddrPort("[::1]:9"), netip.MustParseAddrPort("127.0.0.1:2")}
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	const skew = time.Hour
	limits := ExporterLimits{Sessions: 3, Templates: 12, Bytes: 96 << 10}
	f.Fuzz(func(t *testing.T, first, second []byte) {
		b := NewBudget(128<<10, limits)
		d := NewDecoder(DecoderConfig{MaxSessions: 4, MaxTemplates: 8, PEN: testPEN, Budget: b, MaxClockSkew: skew, Now: func() time.Time { return now }})
		for i, msg := range [][]byte{first, second} {
			from := exporters[(len(msg)+i)%len(exporters)]
			before := d.Stats()
			err := d.Decode(from, msg, func(r *flow.Record) {
				if r.Key.IPVersion != 4 && r.Key.IPVersion != 6 {
					t.Fatalf("record of IP version %d", r.Key.IPVersion)
				}
				if r.NATed() && (r.PostNAT == r.Key || (r.PostNAT.IPVersion != 4 && r.PostNAT.IPVersion != 6) || r.PostNAT.Proto != r.Key.Proto) {
					t.Fatalf("post-NAT key %+v of key %+v", r.PostNAT, r.Key)
				}
				if r.ServiceMatch > flow.ServiceMatchAmbiguous ||
					(r.SrcWorkload != nil && *r.SrcWorkload == flow.Workload{}) || (r.Service != nil && *r.Service == flow.Service{}) {
					t.Fatalf("enrichment %s", show(*r))
				}
				if clean, changed := SanitiseName(nil, []byte(r.Iface)); (changed && r.Iface != flow.OtherIface) || !utf8.ValidString(r.Iface) || string(clean) != r.Iface {
					t.Fatalf("interface name %q", r.Iface)
				}
				if lo, hi := now.Add(-skew).UnixNano(), now.Add(skew).UnixNano(); r.Start < lo || r.Start > hi || r.End < lo || r.End > hi {
					t.Fatalf("times %d–%d, receive time %d", r.Start, r.End, now.UnixNano())
				}
			})
			after := d.Stats()
			var eb, ea uint64
			for i := range after.Errors {
				eb, ea = eb+before.Errors[i], ea+after.Errors[i]
			}
			if err != nil && (ea == eb || !errors.Is(err, ErrDecode)) {
				t.Fatalf("error %v not counted", err)
			}
		}
		checkBounds(t, d, b, limits)
		d.Close()
		if used, _ := b.Used(); used != 0 || len(b.by) != 0 {
			t.Fatalf("closed decoder left %d bytes, %d exporters in the budget", used, len(b.by))
		}
	})
}

// checkBounds checks d's bounds and that b's books (d its only user)
// agree with what d's sessions hold, and d's exporter lists with its map.
func checkBounds(t *testing.T, d *Decoder, b *Budget, limits ExporterLimits) {
	if len(d.sessions) > d.cfg.MaxSessions || d.live > d.cfg.MaxSessions*d.cfg.MaxTemplates {
		t.Fatalf("bounds broken: %d sessions, %d templates", len(d.sessions), d.live)
	}
	used, limit := b.Used()
	st := d.Stats()
	if used > limit || int64(st.StateBytes) != used {
		t.Fatalf("budget: %d of %d bytes used, sessions hold %d", used, limit, st.StateBytes)
	}
	live, listed := 0, 0
	per := map[netip.Addr]*usage{}
	for k, s := range d.sessions {
		if len(s.selectors) > maxSelectors || len(s.names) > maxNames {
			t.Fatalf("bounds broken: %d selectors, %d names", len(s.selectors), len(s.names))
		}
		if et := &s.ent; et.n > maxEntValues || et.bytes > maxEntBytes || len(et.workloads)+len(et.services)+len(et.rules) > et.n {
			t.Fatalf("bounds broken: %d enterprise values (%d bytes)", et.n, et.bytes)
		}
		var sum int64 = sessionCost + s.ent.charged + int64(len(s.selectors))*selectorCost
		for _, tm := range s.templates {
			sum += tm.cost
		}
		for _, n := range s.names {
			if n.name == n.raw {
				sum += stringCost(len(n.raw), 0)
			} else {
				sum += stringCost(len(n.raw), len(n.name))
			}
		}
		if sum != s.cost {
			t.Fatalf("session %v charged %d, holds %d", k, s.cost, sum)
		}
		live += len(s.templates)
		u := per[k.from.Addr()]
		if u == nil {
			u = &usage{}
			per[k.from.Addr()] = u
		}
		u.sessions, u.templates, u.bytes = u.sessions+1, u.templates+len(s.templates), u.bytes+s.cost
	}
	for a, l := range d.exporters {
		for s := l.newest; s != nil; s = s.older {
			if s.key.from.Addr() != a || d.sessions[s.key] != s {
				t.Fatalf("exporter list of %v holds %v", a, s.key)
			}
			listed++
		}
	}
	if live != d.live || listed != len(d.sessions) {
		t.Fatalf("%d templates counted, %d held; %d sessions listed of %d", d.live, live, listed, len(d.sessions))
	}
	for a, u := range per {
		if bu := b.by[a]; bu == nil || bu.sessions != u.sessions || bu.templates != u.templates || bu.bytes != u.bytes ||
			bu.in[d] != u.bytes || b.heavy[bu.idx] != bu || u.sessions > limits.Sessions || u.templates > limits.Templates || u.bytes > limits.Bytes {
			t.Fatalf("exporter %v holds %+v, the budget says %+v (limits %+v)", a, *u, bu, limits)
		}
	}
	if len(b.by) != len(per) || len(b.heavy) != len(per) {
		t.Fatalf("budget knows %d exporters, sessions %d", len(b.by), len(per))
	}
}

// fuzzSeeds are pairs of small messages: weir's own, one record each
// (with the templates the encoder announces for it: plain, drops,
// sampled, NAT and deny, enterprise), and hand-made ones of other forms.
func fuzzSeeds() [][2][]byte {
	r := rand.New(rand.NewPCG(7, 8))
	oneEach := func(cfg Config, with func(*flow.Record, int), is ...int) [][]byte {
		var msgs [][]byte
		e, _ := NewEncoder(cfg, collectMsgs(&msgs))
		for _, i := range is {
			rec := randRecord(r, i)
			if with != nil {
				with(&rec, i)
			}
			e.Add(&rec)
			e.Flush()
		}
		return msgs
	}
	var seeds [][2][]byte
	pair := func(m [][]byte) { seeds = append(seeds, [2][]byte{m[0], m[len(m)-1]}) }
	pair(oneEach(Config{}, nil, 1, 3))                  // IPv4, then IPv6
	pair(oneEach(Config{}, withDrops, 1, 2))            // drops
	pair(oneEach(Config{}, withSampling, 1, 2))         // sampled: the options template and data
	pair(oneEach(Config{}, withNAT, 1, 4))              // translated
	pair(oneEach(Config{PEN: testPEN}, withEnt, 1, 2))  // enterprise elements
	pair(oneEach(Config{PEN: testPEN}, withNAT, 7, 15)) // denied, with a rule
	v5 := make([]byte, v5HeaderLen+v5RecordLen)
	v5[1], v5[3], v5[v5HeaderLen+38] = 5, 1, 6
	for _, m := range [][2][]byte{
		{build(Version, 0, 1, set(2, u16s(400, 1, 82, Variable)), set(400, []byte{255, 0, 9, 'x'})), nil},
		{build(Version, 0, 1, set(3, u16s(500, 2, 1, 149, 4, 305, 4)), set(500, []byte{0, 0, 0, 1, 0, 0, 0, 100})),
			build(Version, 5, 1, set(2, u16s(400, 1, 82, Variable)), set(400, []byte{5, 0x1b, '[', '2', 'J', 'x'}))},
		{build(Version, 0, 1, set(2, u16s(400, 0)), set(3, u16s(3, 0))), build(Version, 0, 2, set(2, u16s(401, 1, 4, 1)))},
		{build(9, 1, 2, set(0, u16s(260, 2, 8, 4, 1, 4)), set(1, u16s(261, 4, 4, 1, 4, 34, 4)), set(260, []byte{10, 0, 0, 1, 0, 0, 0, 9})),
			build(9, 5, 2, set(260, []byte{10, 0, 0, 1, 0, 0, 0, 9}))},
		{v5, v5},
		{[]byte{0, 10, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, nil},
		{build(Version, 0, 1, set(2, u16s(300, 4, 8, 4, 132, 2, 133, 1, 89, 4)), set(300, []byte{10, 0, 0, 1, 0, 9, 1, 0x83, 0, 0, 0})), nil},
		{build(Version, 0, 1, set(3, u16s(500, 4, 1, 302, 4, 304, 2, 305, 4, 306, 4)), set(500, cat(u32s(7), u16s(1), u32s(1, 9))),
			set(2, u16s(402, 2, 8, 4, 302, 8), u16s(401, 3, 8, 4, 305, 4, 306, 4)), set(402, cat(u32s(1), u64s(7))), set(401, u32s(1, 2, 3))), nil},
		{build(9, 0, 1, set(0, u16s(260, 2, 8, 4, 48, 1)), set(1, u16s(261, 4, 8, 1, 4, 48, 1, 34, 4)),
			set(261, cat(u32s(0), []byte{2}, u32s(64))), set(260, []byte{10, 0, 0, 1, 2})), nil},
		{build(Version, 0, 1, set(2, u16s(403, 5, 282, 16, 8, 4, 228, 2, 225, 4, 233, 1)),
			set(403, cat(make([]byte, 16), []byte{10, 0, 0, 1, 0, 80, 192, 0, 2, 1, 3}))), nil},
		{build(9, 0, 1, set(0, u16s(262, 4, 27, 16, 226, 4, 227, 2, 40005, 1)), set(262, cat(make([]byte, 15), []byte{1, 10, 0, 0, 9, 0, 0, 3}))), nil},
		{build(Version, 0, 1, set(2, cat(u16s(405, 6, 8, 4), ent(1, Variable, testPEN), ent(2, Variable, testPEN), ent(10, 1, testPEN),
			ent(12, 2, testPEN), ent(11, Variable, testPEN))), set(405, cat([]byte{10, 0, 0, 1}, varStr("pod"), varStr(strings.Repeat("n", 260)), []byte{4, 0, 9}, varStr("r")))), nil},
		{build(Version, 0, 1, set(2, cat(u16s(406, 3, 8, 4), ent(10, 2, testPEN), ent(7, Variable, 1))), set(406, cat([]byte{10, 0, 0, 1, 0, 9}, varStr("x")))), nil},
	} {
		seeds = append(seeds, [2][]byte{m[0], append([]byte{}, m[1]...)})
	}
	return seeds
}
