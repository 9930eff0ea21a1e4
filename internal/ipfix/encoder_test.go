package ipfix

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// wireField is a template field as read back from a message.
type wireField struct {
	id     uint16
	length uint16
	pen    uint32
	scope  bool // a scope field of an options template
}

// decoded is one data record, keyed by "pen/id".
type decoded map[string][]byte

// message is what parseMessage reads from one message.
type message struct {
	version, length uint16
	export, seq     uint32
	domain          uint32
	templates       map[uint16][]wireField
	records         []decoded
	options         []decoded // options data records
}

// parseMessage is a straightforward RFC 7011 reader written for the test:
// it learns templates and options templates from the message's own sets
// (or known) and walks every set, checking every length.
func parseMessage(t *testing.T, b []byte, known map[uint16][]wireField) message {
	t.Helper()
	be := binary.BigEndian
	if len(b) < 16 {
		t.Fatalf("message of %d bytes", len(b))
	}
	m := message{version: be.Uint16(b), length: be.Uint16(b[2:]), export: be.Uint32(b[4:]), seq: be.Uint32(b[8:]),
		domain: be.Uint32(b[12:]), templates: map[uint16][]wireField{}}
	if int(m.length) != len(b) {
		t.Fatalf("header length %d, message %d bytes", m.length, len(b))
	}
	for id, f := range known {
		m.templates[id] = f
	}
	for p := 16; p < len(b); {
		if p+4 > len(b) {
			t.Fatalf("set header past the end at %d", p)
		}
		id, sl := be.Uint16(b[p:]), int(be.Uint16(b[p+2:]))
		if sl < 4 || p+sl > len(b) {
			t.Fatalf("set %d length %d at %d of %d", id, sl, p, len(b))
		}
		body := b[p+4 : p+sl]
		switch {
		case id == 2 || id == 3:
			q := 0
			for q+6 <= len(body) { // a template record takes 4 octets, an options template's 6, and a field
				tid, n := be.Uint16(body[q:]), int(be.Uint16(body[q+2:]))
				q += 4
				scope := 0
				if id == 3 {
					scope = int(be.Uint16(body[q:]))
					q += 2
					if scope == 0 || scope > n {
						t.Fatalf("options template %d: scope count %d of %d fields", tid, scope, n)
					}
				}
				var fs []wireField
				for k := range n {
					f := wireField{id: be.Uint16(body[q:]), length: be.Uint16(body[q+2:]), scope: k < scope}
					q += 4
					if f.id&0x8000 != 0 {
						f.id &^= 0x8000
						f.pen = be.Uint32(body[q:])
						q += 4
					}
					fs = append(fs, f)
				}
				m.templates[tid] = fs
			}
			checkPadding(t, id, body[q:], 4)
		case id >= 256:
			fs, ok := m.templates[id]
			if !ok {
				t.Fatalf("data set %d without its template", id)
			}
			minLen := 0
			for _, f := range fs {
				if f.length == Variable {
					minLen++
				} else {
					minLen += int(f.length)
				}
			}
			q := 0
			for len(body)-q >= minLen {
				rec := decoded{}
				for _, f := range fs {
					l := int(f.length)
					if f.length == Variable {
						l = int(body[q])
						q++
						if l == 255 {
							l = int(be.Uint16(body[q:]))
							q += 2
						}
					}
					rec[fmt.Sprintf("%d/%d", f.pen, f.id)] = body[q : q+l]
					q += l
				}
				if fs[0].scope {
					m.options = append(m.options, rec)
				} else {
					m.records = append(m.records, rec)
				}
			}
			checkPadding(t, id, body[q:], minLen)
		default:
			t.Fatalf("unexpected set id %d", id)
		}
		p += sl
	}
	return m
}

// checkPadding checks what follows the last record of set id: padding
// (RFC 7011 3.3.1), zero octets, at most 3, fewer than its shortest record.
func checkPadding(t *testing.T, id uint16, pad []byte, minLen int) {
	t.Helper()
	if len(pad) > 3 || len(pad) >= minLen {
		t.Fatalf("set %d: %d octets after its last record (shortest record %d)", id, len(pad), minLen)
	}
	for _, c := range pad {
		if c != 0 {
			t.Fatalf("set %d: padding %x is not zero", id, pad)
		}
	}
}

func u(b []byte) uint64 {
	var x uint64
	for _, c := range b {
		x = x<<8 | uint64(c)
	}
	return x
}

// randRecord makes a record of either family with every field set.
func randRecord(r *rand.Rand, i int) flow.Record {
	var rec flow.Record
	if i%3 == 0 {
		rec.Key.IPVersion = 6
		rec.Key.SrcAddr = netip.AddrFrom16([16]byte{0x20, 1, 0xd, 0xb8, 15: byte(i)}).As16()
		rec.Key.DstAddr = netip.AddrFrom16([16]byte{0x20, 1, 0xd, 0xb8, 14: byte(i >> 8), 15: 7}).As16()
	} else {
		rec.Key.IPVersion = 4
		rec.Key.SrcAddr = netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}).As16()
		rec.Key.DstAddr = netip.AddrFrom4([4]byte{192, 0, 2, byte(i % 7)}).As16()
	}
	switch i % 5 {
	case 0:
		rec.Key.Proto, rec.Key.ICMPType, rec.Key.ICMPCode = flow.ProtoICMP, 8, 0
		if rec.Key.IPVersion == 6 {
			rec.Key.Proto, rec.Key.ICMPType = flow.ProtoICMPv6, 128
		}
	default:
		rec.Key.Proto, rec.Key.SrcPort, rec.Key.DstPort = flow.ProtoTCP, uint16(40000+i), 443
		rec.TCPFlags, rec.RevTCPFlags = 0x1b, 0x12
	}
	rec.Packets, rec.Bytes = r.Uint64N(1<<40), r.Uint64()
	rec.RevPackets, rec.RevBytes = r.Uint64N(1<<20), r.Uint64N(1<<50)
	rec.Start = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).UnixNano() + int64(i)*1_234_567
	rec.End = rec.Start + r.Int64N(int64(time.Hour))
	rec.EndReason = flow.EndReason(1 + i%6)
	rec.VLAN = uint16(i % 4095)
	rec.Iface = fmt.Sprintf("eth%d", i%3)
	if i%50 == 0 {
		rec.Iface = string(make([]byte, 300)) // longer than a record carries: cut to 254
	}
	return rec
}

// dropReasons are the Linux drop reasons withDrops gives records.
var dropReasons = []string{"NO_SOCKET", "NETFILTER_DROP", "IP_RPFILTER", "TCP_CSUM", "QDISC_DROP", "NOT_SPECIFIED", "TCP_INVALID_SEQUENCE"}

// withDrops gives every seventh record (of either family, from the third)
// kernel drops, with counts that need all 8 octets.
func withDrops(rec *flow.Record, i int) {
	if i%7 == 2 {
		rec.DropPackets, rec.DropBytes = uint64(i)<<34|1, uint64(i)<<40|60
		rec.DropReason = dropReasons[i/7%len(dropReasons)]
	}
}

// TestRoundTrip: many records of both families, with and without drops,
// read back by an independent decoder from the templates on the wire,
// keep every field; messages stay within the MTU; sequence numbers count
// the records before each message; templates come first, again in the
// message after the first record with drops (with the drop templates:
// that record finishes its message) and again on refresh.
func TestRoundTrip(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	var msgs [][]byte
	e, err := NewEncoder(Config{Domain: 42, MTU: 1400, RefreshMessages: 10, Now: func() time.Time { return now }},
		func(m []byte) error { msgs = append(msgs, append([]byte(nil), m...)); return nil })
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	const n = 2000
	recs := make([]flow.Record, n)
	for i := range recs {
		recs[i] = randRecord(r, i)
		withDrops(&recs[i], i)
		if err := e.Add(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	if e.Sequence() != n {
		t.Errorf("Sequence() = %d, want %d", e.Sequence(), n)
	}
	var got []decoded
	var templates map[uint16][]wireField
	for k, b := range msgs {
		if len(b) > 1400 {
			t.Fatalf("message %d is %d bytes, MTU 1400", k, len(b))
		}
		m := parseMessage(t, b, templates)
		if m.version != 10 || m.domain != 42 || m.export != uint32(now.Unix()) || m.seq != uint32(len(got)) {
			t.Fatalf("message %d header %+v; want sequence %d", k, m, len(got))
		}
		hasTmpl := len(b) > 20 && binary.BigEndian.Uint16(b[16:]) == 2
		if want := k == 0 || k%10 == 1; hasTmpl != want {
			t.Errorf("message %d: templates %v, want %v (first, after the first drop, then every 10)", k, hasTmpl, want)
		}
		// The first message announces the two plain templates (172 bytes),
		// the rest all four (364 bytes).
		if wantLen := map[bool]uint16{true: 172, false: 364}[k == 0]; hasTmpl && binary.BigEndian.Uint16(b[18:]) != wantLen {
			t.Errorf("message %d: template set of %d bytes, want %d", k, binary.BigEndian.Uint16(b[18:]), wantLen)
		}
		if k == 0 && len(m.records) != 2 {
			t.Errorf("first message holds %d records, want the 2 before the first with drops", len(m.records))
		}
		templates = m.templates
		got = append(got, m.records...)
	}
	if len(got) != n {
		t.Fatalf("%d records decoded, want %d", len(got), n)
	}
	for i, d := range got {
		w := &recs[i]
		v6 := w.Key.IPVersion == 6
		src, dst := w.Key.SrcAddr[12:], w.Key.DstAddr[12:]
		sk, dk := "0/8", "0/12"
		if v6 {
			src, dst, sk, dk = w.Key.SrcAddr[:], w.Key.DstAddr[:], "0/27", "0/28"
		}
		icmpKey := "0/32"
		if v6 {
			icmpKey = "0/139"
		}
		name := w.Iface
		if len(name) > 254 {
			name = name[:254]
		}
		want := map[string]uint64{
			"0/152": uint64(w.Start / 1e6), "0/153": uint64(w.End / 1e6),
			"0/1": w.Bytes, "0/2": w.Packets, "29305/1": w.RevBytes, "29305/2": w.RevPackets,
			"0/7": uint64(w.Key.SrcPort), "0/11": uint64(w.Key.DstPort), "0/4": uint64(w.Key.Proto),
			"0/6": uint64(w.TCPFlags), "29305/6": uint64(w.RevTCPFlags), "0/58": uint64(w.VLAN),
			"0/136": uint64(map[flow.EndReason]uint8{flow.ReasonIdle: 1, flow.ReasonActive: 2, flow.ReasonEnd: 3,
				flow.ReasonFull: 5, flow.ReasonEOF: 4, flow.ReasonShutdown: 4}[w.EndReason]),
			icmpKey: uint64(w.Key.ICMPType)<<8 | uint64(w.Key.ICMPCode),
		}
		for k, v := range want {
			if u(d[k]) != v {
				t.Fatalf("record %d field %s = %d, want %d", i, k, u(d[k]), v)
			}
		}
		if string(d[sk]) != string(src) || string(d[dk]) != string(dst) || string(d["0/82"]) != name {
			t.Fatalf("record %d: addresses or name differ", i)
		}
		nf := 17
		if w.DropPackets > 0 {
			nf = 20
			drops := map[string]uint64{"0/132": w.DropBytes, "0/133": w.DropPackets, "0/89": uint64(dropStatus(w.DropReason))}
			for k, v := range drops {
				if len(d[k]) != map[string]int{"0/132": 8, "0/133": 8, "0/89": 1}[k] || u(d[k]) != v {
					t.Fatalf("record %d field %s = %x, want %d", i, k, d[k], v)
				}
			}
		}
		if len(d) != nf {
			t.Fatalf("record %d has %d fields, want %d", i, len(d), nf)
		}
	}
}

// TestRefreshInterval: templates are resent once the interval has passed,
// even before RefreshMessages messages.
func TestRefreshInterval(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	var withTmpl []bool
	e, _ := NewEncoder(Config{RefreshMessages: 1000, RefreshInterval: time.Minute, Now: func() time.Time { return now }},
		func(m []byte) error { withTmpl = append(withTmpl, binary.BigEndian.Uint16(m[16:]) == 2); return nil })
	rec := randRecord(rand.New(rand.NewPCG(3, 4)), 1)
	for _, step := range []time.Duration{0, 30 * time.Second, 31 * time.Second, time.Second} {
		now = now.Add(step)
		e.Add(&rec)
		e.Flush()
	}
	if fmt.Sprint(withTmpl) != "[true false true false]" {
		t.Errorf("templates per message %v, want [true false true false]", withTmpl)
	}
}

// TestReset: after Reset (a new TCP session) the open message is dropped
// and counted, the next message starts at sequence 0 and carries the
// templates again although no refresh is due.
func TestReset(t *testing.T) {
	type sent struct {
		seq  uint32
		tmpl bool
	}
	var got []sent
	e, _ := NewEncoder(Config{RefreshMessages: -1, RefreshInterval: -1}, func(m []byte) error {
		got = append(got, sent{binary.BigEndian.Uint32(m[8:]), binary.BigEndian.Uint16(m[16:]) == 2})
		return nil
	})
	rec := randRecord(rand.New(rand.NewPCG(5, 6)), 1)
	for range 3 {
		e.Add(&rec)
	}
	e.Flush()
	e.Add(&rec)
	e.Add(&rec)
	if n := e.Reset(); n != 2 {
		t.Errorf("Reset dropped %d records, want the 2 of the open message", n)
	}
	e.Add(&rec)
	e.Flush()
	e.Add(&rec)
	e.Flush()
	if fmt.Sprint(got) != "[{0 true} {0 true} {1 false}]" {
		t.Errorf("messages (seq, templates) %v, want [{0 true} {0 true} {1 false}]", got)
	}
}

func TestConfig(t *testing.T) {
	for _, mtu := range []int{100, MinMTU - 1, MaxMTU + 1} {
		if _, err := NewEncoder(Config{MTU: mtu}, nil); err == nil {
			t.Errorf("MTU %d accepted", mtu)
		}
	}
	// The smallest MTU still fits a fresh message with the templates and
	// the largest record.
	var sizes []int
	e, err := NewEncoder(Config{MTU: MinMTU}, func(m []byte) error { sizes = append(sizes, len(m)); return nil })
	if err != nil {
		t.Fatal(err)
	}
	rec := randRecord(rand.New(rand.NewPCG(5, 6)), 3) // IPv6
	rec.Iface = string(make([]byte, 400))
	for range 3 {
		if err := e.Add(&rec); err != nil {
			t.Fatal(err)
		}
	}
	e.Flush()
	for _, s := range sizes {
		if s > MinMTU {
			t.Errorf("message of %d bytes at MTU %d", s, MinMTU)
		}
	}
	// With the drop templates announced the templates and the largest
	// record no longer fit together: the templates go alone, before it,
	// every time they are due, and everything still decodes.
	var msgs [][]byte
	e, _ = NewEncoder(Config{MTU: MinMTU, RefreshMessages: 3}, func(m []byte) error { msgs = append(msgs, append([]byte(nil), m...)); return nil })
	recs := []flow.Record{rec, rec, rec}
	recs[1].DropPackets, recs[1].DropBytes, recs[1].DropReason = 1, 1280, "NETFILTER_DROP"
	for range 4 {
		for i := range recs {
			if err := e.Add(&recs[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.Flush()
	var kinds []string // per message: t templates, d data
	for _, m := range msgs {
		k := ""
		for p := headerLen; p < len(m); p += int(binary.BigEndian.Uint16(m[p+2:])) {
			k += map[bool]string{true: "t", false: "d"}[binary.BigEndian.Uint16(m[p:]) == 2]
		}
		kinds = append(kinds, k)
		if len(m) > MinMTU {
			t.Errorf("message of %d bytes at MTU %d", len(m), MinMTU)
		}
	}
	if got := fmt.Sprint(kinds); got != "[td t d d t d d t d d t d d t d d t d]" {
		t.Errorf("messages %s, want [td t d d t d d t d d t d d t d d t d]", got)
	}
	d := NewDecoder(DecoderConfig{})
	var n, drops int
	for _, m := range msgs {
		if err := d.Decode(exporter, m, func(r *flow.Record) { n, drops = n+1, drops+int(r.DropPackets) }); err != nil {
			t.Fatal(err)
		}
	}
	if n != 12 || drops != 4 || d.Stats().SequenceGaps != 0 {
		t.Errorf("decoded %d records with %d drops, want 12 and 4; %+v", n, drops, d.Stats())
	}
}

// TestNoDropsUnchanged: without records with drops (or sampled ones) the
// encoder's output is byte for byte what it was before the drop templates
// existed: same template set, same records. (The digest was taken then,
// and again when icmpTypeCode moved before the ports and sets were padded
// to 4 octets; TestNoEnterpriseUnchanged, TestNoNATUnchanged and
// TestUnsampledUnchanged share it.)
func TestNoDropsUnchanged(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	h := sha256.New()
	e, _ := NewEncoder(Config{Domain: 9, RefreshMessages: 7, Now: func() time.Time { return now }}, func(m []byte) error { h.Write(m); return nil })
	r := rand.New(rand.NewPCG(13, 14))
	for i := range 1000 {
		rec := randRecord(r, i)
		rec.Sampling = uint32(i % 2) // 0 and 1 both mean unsampled
		if err := e.Add(&rec); err != nil {
			t.Fatal(err)
		}
	}
	e.Flush()
	if got := fmt.Sprintf("%x", h.Sum(nil)); got != "ede63de3c3208b8892bc9ac170bd7080e0dd2342e0cfee30482b9f9106b35bd0" {
		t.Errorf("output digest %s changed", got)
	}
}

// TestDropStatus: Linux drop reasons map to RFC 7270 forwardingStatus
// codes; no entry of the table is shadowed by another (a name twice, a
// prefix that takes another's reasons); the names
// the decoder gives codes map back to the same codes; anything else is
// 128, unknown.
func TestDropStatus(t *testing.T) {
	for reason, want := range map[string]uint8{
		"NETFILTER_DROP": 130, "TC_INGRESS": 130, "XDP": 130, "XFRM_POLICY": 129, "SECURITY_HOOK": 129,
		"IP_INNOROUTES": 131, "IP_OUTNOROUTES": 131, "IP_INADDRERRORS": 131,
		"NEIGH_FAILED": 132, "NEIGH_CREATEFAIL": 132, "NEIGH_QUEUEFULL": 132, "NEIGH_DEAD": 132,
		"PKT_TOO_BIG": 133, "FRAG_REASM_TIMEOUT": 133, "FRAG_TOO_FAR": 133, "DUP_FRAG": 133,
		"IP_CSUM": 134, "TCP_CSUM": 134, "UDP_CSUM": 134, "ICMP_CSUM": 134, "SKB_CSUM": 134,
		"PKT_TOO_SMALL": 135, "IP_INHDR": 136, "HDR_TRUNC": 136, "TCP_MINTTL": 137,
		"QDISC_DROP": 138, "QDISC_OVERLIMIT": 138, "FQ_FLOW_LIMIT": 138, "QDISC_CONGESTED": 139, "CAKE_FLOOD": 139,
		"IP_RPFILTER": 140, "IP_INVALID_SOURCE": 140,
		"NO_SOCKET": 141, "SOCKET_RCVBUFF": 141, "TCP_INVALID_SEQUENCE": 141, "PROTO_MEM": 141,
		"NOT_SPECIFIED": 128, "SUBSYSTEM": 128, "OTHERHOST": 128, "REASON_999": 128, "": 128, "TCP": 128,
		"ACL_DROP": 130, "FOR_US": 141, "UNKNOWN": 128, "DROP_150": 150, "HARDWARE": 143,
	} {
		if got := dropStatus(reason); got != want {
			t.Errorf("dropStatus(%q) = %d, want %d", reason, got, want)
		}
	}
	for _, c := range dropCodes {
		name := c.reason
		if p, ok := strings.CutSuffix(name, "*"); ok {
			name = p + "SOMETHING"
		}
		if got := dropStatus(name); got != c.code || c.code < 128 || c.code > 143 {
			t.Errorf("table entry %s → %d: %s maps to %d", c.reason, c.code, name, got)
		}
	}
	for code := 128; code < 192; code++ {
		if got := dropStatus(dropCodeNames[code-128]); got != uint8(code) {
			t.Errorf("code %d → %s → %d", code, dropCodeNames[code-128], got)
		}
	}
}

// TestAddAllocs: encoding a record, with drops or without, allocates
// nothing (once the drop templates are announced: AllocsPerRun's warm-up
// run does that).
func TestAddAllocs(t *testing.T) {
	e, _ := NewEncoder(Config{}, func([]byte) error { return nil })
	r := rand.New(rand.NewPCG(7, 8))
	recs := []flow.Record{randRecord(r, 1), randRecord(r, 2), randRecord(r, 3), randRecord(r, 6)} // IPv4, IPv4, IPv6, IPv6
	for _, i := range []int{1, 3} {
		recs[i].DropPackets, recs[i].DropBytes, recs[i].DropReason = 3, 180, dropReasons[i]
	}
	i := 0
	if a := testing.AllocsPerRun(10000, func() { e.Add(&recs[i%4]); i++ }); a != 0 {
		t.Errorf("%v allocations per record", a)
	}
}

// BenchmarkAdd: one record encoded into a message (messages emitted to a
// no-op), IPv4 and IPv6 alternating.
func BenchmarkAdd(b *testing.B) {
	e, _ := NewEncoder(Config{}, func([]byte) error { return nil })
	r := rand.New(rand.NewPCG(9, 10))
	recs := []flow.Record{randRecord(r, 1), randRecord(r, 3)}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := e.Add(&recs[i&1]); err != nil {
			b.Fatal(err)
		}
	}
}
