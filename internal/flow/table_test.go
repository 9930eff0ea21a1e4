package flow

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
	"unsafe"
)

const sec = int64(time.Second)

// sink collects copies of emitted records.
type sink struct{ recs []Record }

func (s *sink) emit(r *Record) { s.recs = append(s.recs, *r) }

func newTable(t testing.TB, cfg Config) (*Table, *sink) {
	t.Helper()
	cfg.HashSeed = 42
	s := &sink{}
	tb, err := NewTable(cfg, s.emit)
	if err != nil {
		t.Fatal(err)
	}
	return tb, s
}

// pk builds a packet src:sport → dst:dport.
func pk(src string, sport uint16, dst string, dport uint16, proto uint8, at int64, length uint32, flags uint8, role Role) Packet {
	var p Packet
	p.Key.SetSrc(netip.MustParseAddr(src))
	p.Key.SetDst(netip.MustParseAddr(dst))
	p.Key.SrcPort, p.Key.DstPort, p.Key.Proto = sport, dport, proto
	p.Time, p.Length, p.TCPFlags, p.Role = at, length, flags, role
	return p
}

func mkKey(src string, sport uint16, dst string, dport uint16, proto uint8) Key {
	return pk(src, sport, dst, dport, proto, 0, 0, 0, 0).Key
}

func one(t *testing.T, s *sink) Record {
	t.Helper()
	if len(s.recs) != 1 {
		t.Fatalf("got %d records, want 1: %+v", len(s.recs), s.recs)
	}
	return s.recs[0]
}

func checkRec(t *testing.T, got Record, want Record) {
	t.Helper()
	if got != want {
		t.Errorf("record\n got %+v\nwant %+v", got, want)
	}
}

func TestSlotLayout(t *testing.T) {
	// A 96-byte slot and its 4-byte tag in Table.tags.
	if unsafe.Sizeof(slot{}) != 96 || SlotSize() != 100 {
		t.Fatalf("slot %d B, SlotSize = %d; want 96, 100", unsafe.Sizeof(slot{}), SlotSize())
	}
	// Slots per MaxFlows: 2·MaxFlows+1 (load ≤ 0.5) for small tables, then
	// at least smallTable, then MaxFlows·4/3+1 (load ≤ 0.75): linear, and
	// never fewer slots for more flows.
	for _, c := range []struct{ flows, slots int }{
		{1, 3}, {3000, 6001}, {16383, 32767}, {16384, 32768}, {20000, 32768},
		{24575, 32768}, {24576, 32769}, {30000, 40001}, {300000, 400001},
	} {
		tb, _ := newTable(t, Config{MaxFlows: c.flows})
		if got := tb.MemoryBytes(); got != c.slots*100 || len(tb.tags) != c.slots || len(tb.slots) != c.slots {
			t.Errorf("MaxFlows %d: MemoryBytes = %d, want %d (%d slots, %d tags)", c.flows, got, c.slots*100, len(tb.slots), len(tb.tags))
		}
		if float64(c.flows)/float64(c.slots) > 0.75 {
			t.Errorf("MaxFlows %d: %d slots, load above 0.75", c.flows, c.slots)
		}
	}
	for m := 1; m < 40000; m += 97 {
		if slotsFor(m+1) < slotsFor(m) || slotsFor(m) <= m {
			t.Fatalf("slotsFor(%d) = %d, slotsFor(%d) = %d: want more slots than flows, never fewer for more", m, slotsFor(m), m+1, slotsFor(m+1))
		}
	}
}

func TestNewTableErrors(t *testing.T) {
	emit := func(*Record) {}
	for _, c := range []Config{
		{MaxFlows: 0},
		{MaxFlows: MaxMaxFlows + 1},
		{MaxFlows: 10, IdleTimeout: -1},
		{MaxFlows: 10, ActiveTimeout: -1},
		{MaxFlows: 10, EndLinger: -1},
	} {
		if _, err := NewTable(c, emit); err == nil {
			t.Errorf("NewTable(%+v) succeeded", c)
		}
	}
	if _, err := NewTable(Config{MaxFlows: 1}, nil); err == nil {
		t.Error("NewTable with nil emit succeeded")
	}
}

// TestOrientationFirstPacket: without hints the first packet's sender is the
// initiator, whichever endpoint orders lower, for IPv4 and IPv6.
func TestOrientationFirstPacket(t *testing.T) {
	for _, c := range []struct{ name, a, b string }{
		{"v4/initiator-low", "10.0.0.1", "10.0.0.9"},
		{"v4/initiator-high", "10.0.0.9", "10.0.0.1"},
		{"v6/initiator-low", "2001:db8::1", "2001:db8::9"},
		{"v6/initiator-high", "2001:db8::9", "2001:db8::1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tb, s := newTable(t, Config{MaxFlows: 8})
			for _, p := range []Packet{
				pk(c.a, 40000, c.b, 53, ProtoUDP, 10*sec, 100, 0, 0),
				pk(c.b, 53, c.a, 40000, ProtoUDP, 11*sec, 50, 0, 0),
				pk(c.a, 40000, c.b, 53, ProtoUDP, 12*sec, 200, 0, 0),
				pk(c.b, 53, c.a, 40000, ProtoUDP, 9*sec, 60, 0, 0), // time went backwards
				pk(c.a, 40000, c.b, 53, ProtoUDP, 13*sec, 300, 0, 0),
			} {
				tb.Update(&p)
			}
			if tb.Len() != 1 {
				t.Fatalf("Len = %d, want 1 (one slot per conversation)", tb.Len())
			}
			tb.Flush(ReasonEOF)
			checkRec(t, one(t, s), Record{
				Key:     mkKey(c.a, 40000, c.b, 53, ProtoUDP),
				Packets: 3, Bytes: 600, RevPackets: 2, RevBytes: 110,
				EndReason: ReasonEOF, Start: 9 * sec, End: 13 * sec,
			})
			if k := one(t, s).Key; k.Src() != netip.MustParseAddr(c.a) || k.IPVersion != map[bool]uint8{true: 4, false: 6}[netip.MustParseAddr(c.a).Is4()] {
				t.Errorf("key %v → %v version %d", k.Src(), k.Dst(), k.IPVersion)
			}
		})
	}
}

// TestOrientationSynAckFirst: the SYN-ACK (RoleResponder) is captured before
// the SYN; its receiver is the initiator.
func TestOrientationSynAckFirst(t *testing.T) {
	for _, c := range []struct{ name, cli, srv string }{
		{"v4/client-low", "192.0.2.1", "198.51.100.7"},
		{"v4/client-high", "198.51.100.7", "192.0.2.1"},
		{"v6", "2001:db8::77", "2001:db8::5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tb, s := newTable(t, Config{MaxFlows: 8})
			for _, p := range []Packet{
				pk(c.srv, 443, c.cli, 51000, ProtoTCP, 100, 60, TCPSyn|TCPAck, RoleResponder),
				pk(c.cli, 51000, c.srv, 443, ProtoTCP, 90, 60, TCPSyn, RoleInitiator),
				pk(c.cli, 51000, c.srv, 443, ProtoTCP, 110, 52, TCPAck, 0),
				pk(c.cli, 51000, c.srv, 443, ProtoTCP, 120, 552, TCPAck|TCPPsh, 0),
				pk(c.srv, 443, c.cli, 51000, ProtoTCP, 130, 1052, TCPAck|TCPPsh, 0),
			} {
				tb.Update(&p)
			}
			tb.Flush(ReasonShutdown)
			checkRec(t, one(t, s), Record{
				Key:     mkKey(c.cli, 51000, c.srv, 443, ProtoTCP),
				Packets: 3, Bytes: 664, TCPFlags: TCPSyn | TCPAck | TCPPsh,
				RevPackets: 2, RevBytes: 1112, RevTCPFlags: TCPSyn | TCPAck | TCPPsh,
				EndReason: ReasonShutdown, Start: 90, End: 130,
			})
			if st := tb.Stats(); st.RoleFlips != 1 || st.FlowsCreated != 1 {
				t.Errorf("RoleFlips = %d FlowsCreated = %d, want 1, 1", st.RoleFlips, st.FlowsCreated)
			}
		})
	}
}

// TestOrientationLateHint: counts accumulated under the first-packet
// orientation stay with the right side after a hint flips it, and only the
// first hint counts.
func TestOrientationLateHint(t *testing.T) {
	tb, s := newTable(t, Config{MaxFlows: 8})
	a, b := "10.1.1.1", "10.2.2.2"
	for _, p := range []Packet{
		pk(b, 80, a, 5555, ProtoTCP, 1, 1500, TCPAck, 0), // mid-flow capture: b looks like the initiator
		pk(b, 80, a, 5555, ProtoTCP, 2, 1500, TCPAck, 0),
		pk(a, 5555, b, 80, ProtoTCP, 3, 40, TCPAck, 0),
		pk(a, 5555, b, 80, ProtoTCP, 4, 60, TCPSyn, RoleInitiator),        // first hint: a opened it
		pk(a, 5555, b, 80, ProtoTCP, 5, 60, TCPSyn|TCPAck, RoleResponder), // later hint: ignored
	} {
		tb.Update(&p)
	}
	tb.Flush(ReasonEOF)
	checkRec(t, one(t, s), Record{
		Key:     mkKey(a, 5555, b, 80, ProtoTCP),
		Packets: 3, Bytes: 160, TCPFlags: TCPAck | TCPSyn,
		RevPackets: 2, RevBytes: 3000, RevTCPFlags: TCPAck,
		EndReason: ReasonEOF, Start: 1, End: 5,
	})
	if st := tb.Stats(); st.RoleFlips != 1 {
		t.Errorf("RoleFlips = %d, want 1", st.RoleFlips)
	}
}

// TestOrientationICMP: an echo reply (RoleResponder) seen first makes the
// other side the initiator; ICMP type and code are part of the key and kept.
// (Keying a reply together with its request is the decoder's job; here both
// directions carry the same type/code.)
func TestOrientationICMP(t *testing.T) {
	for _, c := range []struct {
		name, pinger, target string
		proto, typ           uint8
	}{
		{"v4", "10.0.0.200", "10.0.0.1", ProtoICMP, 8},
		{"v6", "fe80::2", "fe80::1", ProtoICMPv6, 128},
	} {
		t.Run(c.name, func(t *testing.T) {
			tb, s := newTable(t, Config{MaxFlows: 8})
			reply := pk(c.target, 0, c.pinger, 0, c.proto, 5, 84, 0, RoleResponder)
			reply.Key.ICMPType = c.typ
			req := pk(c.pinger, 0, c.target, 0, c.proto, 6, 84, 0, RoleInitiator)
			req.Key.ICMPType = c.typ
			unreach := pk(c.target, 0, c.pinger, 0, c.proto, 7, 56, 0, 0)
			unreach.Key.ICMPType, unreach.Key.ICMPCode = 3, 3
			for _, p := range []*Packet{&reply, &req, &req, &unreach} {
				tb.Update(p)
			}
			if tb.Len() != 2 {
				t.Fatalf("Len = %d, want 2 (type/code distinguish flows)", tb.Len())
			}
			tb.Flush(ReasonEOF)
			want := map[uint8]Record{
				c.typ: {Key: req.Key, Packets: 2, Bytes: 168, RevPackets: 1, RevBytes: 84, EndReason: ReasonEOF, Start: 5, End: 6},
				3:     {Key: unreach.Key, Packets: 1, Bytes: 56, EndReason: ReasonEOF, Start: 7, End: 7},
			}
			if len(s.recs) != 2 {
				t.Fatalf("%d records", len(s.recs))
			}
			for _, r := range s.recs {
				checkRec(t, r, want[r.Key.ICMPType])
			}
			if want[3].Key.ICMPCode != 3 {
				t.Fatal("test setup")
			}
		})
	}
}

func TestIfaceOfFirstPacket(t *testing.T) {
	var ifs Ifaces
	eth0, eth1 := ifs.Index("eth0"), ifs.Index("eth1")
	s := &sink{}
	tb, err := NewTable(Config{MaxFlows: 4, Ifaces: &ifs}, s.emit)
	if err != nil {
		t.Fatal(err)
	}
	p := pk("10.0.0.1", 1, "10.0.0.2", 2, ProtoUDP, 1, 10, 0, 0)
	p.Iface = eth1
	tb.Update(&p)
	p.Iface = eth0
	tb.Update(&p)
	tb.Flush(ReasonEOF)
	if r := one(t, s); r.Iface != "eth1" || r.Packets != 2 {
		t.Errorf("Iface = %q Packets = %d, want eth1, 2", r.Iface, r.Packets)
	}
}

// TestVLANOfFirstPacket: a record carries the VLAN of its flow's first
// packet; VLAN is not part of the key.
func TestVLANOfFirstPacket(t *testing.T) {
	tb, s := newTable(t, Config{MaxFlows: 4})
	p := pk("10.0.0.1", 1, "10.0.0.2", 2, ProtoUDP, 1, 10, 0, 0)
	p.VLAN = 42
	tb.Update(&p)
	p.VLAN = 7
	tb.Update(&p)
	tb.Flush(ReasonEOF)
	if r := one(t, s); r.VLAN != 42 || r.Packets != 2 {
		t.Errorf("VLAN = %d Packets = %d, want 42, 2", r.VLAN, r.Packets)
	}
}

// TestCounterWrap: a per-direction packet counter about to pass the limit
// reports early (ReasonActive) instead of wrapping.
func TestCounterWrap(t *testing.T) {
	tb, s := newTable(t, Config{MaxFlows: 4})
	tb.pktLimit = 3
	for i := int64(1); i <= 7; i++ {
		p := pk("10.0.0.1", 1, "10.0.0.2", 2, ProtoUDP, i, 100, 0, 0)
		tb.Update(&p)
	}
	r := pk("10.0.0.2", 2, "10.0.0.1", 1, ProtoUDP, 8, 10, 0, 0)
	tb.Update(&r)
	tb.Flush(ReasonEOF)
	k := mkKey("10.0.0.1", 1, "10.0.0.2", 2, ProtoUDP)
	want := []Record{
		{Key: k, Packets: 3, Bytes: 300, EndReason: ReasonActive, Start: 1, End: 3},
		{Key: k, Packets: 3, Bytes: 300, EndReason: ReasonActive, Start: 4, End: 6},
		{Key: k, Packets: 1, Bytes: 100, RevPackets: 1, RevBytes: 10, EndReason: ReasonEOF, Start: 7, End: 8},
	}
	if len(s.recs) != len(want) {
		t.Fatalf("%d records: %+v", len(s.recs), s.recs)
	}
	for i := range want {
		checkRec(t, s.recs[i], want[i])
	}
	if st := tb.Stats(); st.WrapReports != 2 || st.Records[ReasonActive] != 2 {
		t.Errorf("WrapReports = %d Records[active] = %d, want 2, 2", st.WrapReports, st.Records[ReasonActive])
	}
}

// canonical is prep's canonical words and direction bit for k.
func canonical(k *Key, w *keyWords) uint8 {
	var r pending
	(&Table{}).prep(k, &r)
	*w = r.w
	return r.dir
}

// TestCanonicalKey: both directions give the same words, the direction bit
// differs, and the words convert back to the lower endpoint first.
func TestCanonicalKey(t *testing.T) {
	k := mkKey("2001:db8::2", 80, "2001:db8::1", 9000, ProtoTCP)
	var w1, w2 keyWords
	d1 := canonical(&k, &w1)
	r := k.Reverse()
	d2 := canonical(&r, &w2)
	if w1 != w2 || d1 != 1 || d2 != 0 {
		t.Fatalf("canonical: %x/%d vs %x/%d", w1, d1, w2, d2)
	}
	if got := w1.key(); got != r {
		t.Fatalf("key() = %+v, want %+v", got, r)
	}
	// Same address, ports decide; equal endpoints count as ordered.
	k = mkKey("10.0.0.1", 9, "10.0.0.1", 8, ProtoUDP)
	if d := canonical(&k, &w1); d != 1 {
		t.Fatalf("same address: dir %d, want 1", d)
	}
	k = mkKey("10.0.0.1", 9, "10.0.0.1", 9, ProtoUDP)
	if d := canonical(&k, &w1); d != 0 {
		t.Fatalf("same endpoint: dir %d, want 0", d)
	}
}

// nearKey fills k's addresses and ports with few small non-zero bytes, so
// that keys drawn this way often tie in their first bytes and every
// comparison stage of the canonical order is reached.
func nearKey(rng *rand.Rand, k *Key) {
	for j := range k.SrcAddr {
		if rng.IntN(8) == 0 {
			k.SrcAddr[j] = byte(rng.IntN(3))
		}
		if rng.IntN(8) == 0 {
			k.DstAddr[j] = byte(rng.IntN(3))
		}
	}
	k.SrcPort, k.DstPort = uint16(rng.IntN(3))<<uint(rng.IntN(16)), uint16(rng.IntN(3))<<uint(rng.IntN(16))
}

// TestCanonicalMatchesSrcLess: the branch-free order equals Key.srcLess on
// keys that differ in few bytes (so every comparison stage is reached).
func TestCanonicalMatchesSrcLess(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 100000; i++ {
		var k Key
		nearKey(rng, &k)
		var w keyWords
		d := canonical(&k, &w)
		if (d == 0) != k.srcLess() {
			t.Fatalf("%+v: dir %d, srcLess %v", k, d, k.srcLess())
		}
		want := k
		if d == 1 {
			want = k.Reverse()
		}
		if w.key() != want {
			t.Fatalf("%+v: words %x", k, w)
		}
	}
}

// TestIfacesBounded: registering more names than fit in 16 bits maps the
// rest to OtherIface instead of wrapping onto existing indexes.
func TestIfacesBounded(t *testing.T) {
	var f Ifaces
	for i := range MaxIfaces + 10 {
		f.Index(fmt.Sprintf("if%d", i))
	}
	if got := f.Name(f.Index("if0")); got != "if0" {
		t.Fatalf("if0 → %q", got)
	}
	last := f.Index(fmt.Sprintf("if%d", MaxIfaces+5))
	if f.Name(last) != OtherIface || int(last) != MaxIfaces-1 {
		t.Fatalf("overflow name → index %d %q, want %d %q", last, f.Name(last), MaxIfaces-1, OtherIface)
	}
}
