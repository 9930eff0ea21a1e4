package ipfix

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// wireField is a template field as read back from a message.
type wireField struct {
	id     uint16
	length uint16
	pen    uint32
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
}

// parseMessage is a straightforward RFC 7011 reader written for the test:
// it learns templates from the message's own template sets (or known) and
// walks every set, checking every length.
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
		case id == 2:
			for q := 0; q < len(body); {
				tid, n := be.Uint16(body[q:]), int(be.Uint16(body[q+2:]))
				q += 4
				var fs []wireField
				for range n {
					f := wireField{id: be.Uint16(body[q:]), length: be.Uint16(body[q+2:])}
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
		case id >= 256:
			fs, ok := m.templates[id]
			if !ok {
				t.Fatalf("data set %d without its template", id)
			}
			for q := 0; q < len(body); {
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
				m.records = append(m.records, rec)
			}
		default:
			t.Fatalf("unexpected set id %d", id)
		}
		p += sl
	}
	return m
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

// TestRoundTrip: many records of both families, read back by an
// independent decoder from the templates on the wire, keep every field;
// messages stay within the MTU; sequence numbers count the records before
// each message; templates come first and again on refresh.
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
		if want := k%10 == 0; hasTmpl != want {
			t.Errorf("message %d: templates %v, want %v (first, then every 10)", k, hasTmpl, want)
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
		if len(d) != 17 {
			t.Fatalf("record %d has %d fields", i, len(d))
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
}

// TestAddAllocs: encoding a record allocates nothing.
func TestAddAllocs(t *testing.T) {
	e, _ := NewEncoder(Config{}, func([]byte) error { return nil })
	rec := randRecord(rand.New(rand.NewPCG(7, 8)), 1)
	if a := testing.AllocsPerRun(10000, func() { e.Add(&rec) }); a != 0 {
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
