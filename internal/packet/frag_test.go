package packet

import (
	"testing"
	"time"
	"unsafe"

	"github.com/weir-dev/weir/internal/flow"
)

// step is one frame of a sequence fed to a single Decoder.
type step struct {
	f    *fb
	time int64
	want flow.Packet // Time is filled in from time
	fail bool        // Decode must return false
	wire int         // 0: len(frame)
}

func runSteps(t *testing.T, d *Decoder, steps []step) {
	t.Helper()
	for i, s := range steps {
		p := flow.Packet{Time: s.time}
		wire := s.wire
		if wire == 0 {
			wire = len(s.f.b)
		}
		ok := d.Decode(s.f.link, s.f.b, wire, &p)
		if s.fail {
			if ok {
				t.Fatalf("step %d: Decode = true", i)
			}
			continue
		}
		want := s.want
		want.Time = s.time
		if !ok || p != want {
			t.Fatalf("step %d: ok=%v\ngot  %+v\nwant %+v", i, ok, p, want)
		}
	}
}

// frag4 builds an IPv4 fragment: offset in 8-octet units, mf = more fragments.
func frag4(src, dst string, proto uint8, id, offset uint16, mf bool) *fb {
	fo := offset
	if mf {
		fo |= 0x2000
	}
	return eth().eth(0x0800).ipv4(v4{src: src, dst: dst, proto: proto, id: id, frag: fo})
}

// frag6later builds a later IPv6 fragment carrying n bytes.
func frag6later(nh uint8, id uint32, offset uint16, mf bool, n int) *fb {
	return eth().eth(0x86dd).ipv6(a6, b6, 44).frag6(nh, offset, mf, id).payload(n).done()
}

func wantFrags(t *testing.T, d *Decoder, want FragmentStats, decoded uint64) {
	t.Helper()
	s := d.Stats()
	if s.Fragments != want || s.Decoded != decoded || s.Frames != s.Decoded+s.NonIP+s.TotalErrors() {
		t.Fatalf("fragments %+v decoded %d, want %+v decoded %d (stats %+v)", s.Fragments, s.Decoded, want, decoded, *s)
	}
}

func TestFragmentsIPv4InOrder(t *testing.T) {
	udp := key(a4, b4, 17, 5000, 53)
	d := NewDecoder(Config{})
	runSteps(t, d, []step{
		{f: frag4(a4, b4, 17, 0x1234, 0, true).udp(5000, 53).payload(1472).done(), time: 1, want: pk(udp, 1500, 0, unk)},
		{f: frag4(a4, b4, 17, 0x1234, 185, true).payload(1480).done(), time: 2, want: pk(udp, 1500, 0, unk)},
		{f: frag4(a4, b4, 17, 0x1234, 370, false).payload(100).done(), time: 3, want: pk(udp, 120, 0, unk)},
		// Near misses of the table key are not attributed: other ID, source, protocol.
		{f: frag4(a4, b4, 17, 0x1235, 185, false).payload(8).done(), time: 4, want: pk(key(a4, b4, 17, 0, 0), 28, 0, unk)},
		{f: frag4(b4, b4, 17, 0x1234, 185, false).payload(8).done(), time: 4, want: pk(key(b4, b4, 17, 0, 0), 28, 0, unk)},
		{f: frag4(a4, b4, 6, 0x1234, 185, false).payload(8).done(), time: 4, want: pk(key(a4, b4, 6, 0, 0), 28, 0, unk)},
	})
	wantFrags(t, d, FragmentStats{First: 1, Attributed: 2, Unattributed: 3}, 6)
}

func TestFragmentsIPv4OutOfOrder(t *testing.T) {
	tcp := key(a4, b4, 6, 40000, 80)
	d := NewDecoder(Config{})
	runSteps(t, d, []step{
		{f: frag4(a4, b4, 6, 7, 100, false).payload(200).done(), time: 1, want: pk(key(a4, b4, 6, 0, 0), 220, 0, unk)},
		{f: frag4(a4, b4, 6, 7, 0, true).tcp(40000, 80, 0x18).payload(780).done(), time: 2, want: pk(tcp, 820, 0x18, unk)},
		{f: frag4(a4, b4, 6, 7, 50, true).payload(400).done(), time: 3, want: pk(tcp, 420, 0, unk)},
	})
	wantFrags(t, d, FragmentStats{First: 1, Attributed: 1, Unattributed: 1}, 3)
}

func TestFragmentsFirstTruncated(t *testing.T) {
	// The first fragment's TCP header is cut by the snap length: it is
	// rejected and remembered by nobody, so the later fragment has no ports.
	first := frag4(a4, b4, 6, 9, 0, true).tcp(1, 2, 0x18).payload(100).done()
	d := NewDecoder(Config{})
	runSteps(t, d, []step{
		{f: &fb{link: LinkEthernet, b: first.b[:14+20+2]}, wire: len(first.b), time: 1, fail: true},
		{f: frag4(a4, b4, 6, 9, 15, false).payload(8).done(), time: 2, want: pk(key(a4, b4, 6, 0, 0), 28, 0, unk)},
	})
	wantFrags(t, d, FragmentStats{Unattributed: 1}, 1)
	if d.Stats().Errors[ReasonTruncatedTransport] != 1 {
		t.Fatalf("errors %v", d.Stats().Errors)
	}
}

func TestFragmentsExpiry(t *testing.T) {
	udp := key(a4, b4, 17, 1, 2)
	noPorts := key(a4, b4, 17, 0, 0)
	first := frag4(a4, b4, 17, 3, 0, true).udp(1, 2).payload(8).done()
	later := frag4(a4, b4, 17, 3, 2, false).payload(8).done()
	d := NewDecoder(Config{FragmentTimeout: time.Second})
	const t0 = int64(1_700_000_000_000_000_000)
	runSteps(t, d, []step{
		{f: first, time: t0, want: pk(udp, 36, 0, unk)},
		{f: later, time: t0 + 1e9, want: pk(udp, 28, 0, unk)}, // exactly the timeout: still known
		{f: later, time: t0 + 1e9 + 1, want: pk(noPorts, 28, 0, unk)},
	})
	wantFrags(t, d, FragmentStats{First: 1, Attributed: 1, Unattributed: 1}, 3)

	d = NewDecoder(Config{}) // default: 30 s
	runSteps(t, d, []step{
		{f: first, time: t0, want: pk(udp, 36, 0, unk)},
		{f: later, time: t0 + 30e9, want: pk(udp, 28, 0, unk)},
		{f: later, time: t0 + 30e9 + 1, want: pk(noPorts, 28, 0, unk)},
	})
	wantFrags(t, d, FragmentStats{First: 1, Attributed: 1, Unattributed: 1}, 3)
}

func TestFragmentsIPv6(t *testing.T) {
	tcp := key(a6, b6, 6, 1234, 80)
	udp := key(a6, b6, 17, 7, 8)
	d := NewDecoder(Config{})
	runSteps(t, d, []step{
		// Later fragment first: not attributed, keyed by the Fragment header's next header.
		{f: frag6later(6, 0xdeadbeef, 129, false, 500), time: 1, want: pk(key(a6, b6, 6, 0, 0), 40+8+500, 0, unk)},
		{f: eth().eth(0x86dd).ipv6(a6, b6, 44).frag6(6, 0, true, 0xdeadbeef).tcp(1234, 80, 0x18).payload(1012).done(),
			time: 2, want: pk(tcp, 40+8+20+1012, 0x18, unk)},
		{f: frag6later(6, 0xdeadbeef, 129, false, 500), time: 3, want: pk(tcp, 40+8+500, 0, unk)},
		// A later fragment behind a hop-by-hop header is found as well.
		{f: eth().eth(0x86dd).ipv6(a6, b6, 0).ext(44, 8).frag6(6, 129, false, 0xdeadbeef).payload(16).done(),
			time: 4, want: pk(tcp, 40+8+8+16, 0, unk)},
		// All 32 bits of the ID count.
		{f: frag6later(6, 0x0eadbeef, 129, false, 8), time: 5, want: pk(key(a6, b6, 6, 0, 0), 40+8+8, 0, unk)},
		// Destination options after the Fragment header: the table keeps the
		// real transport protocol.
		{f: eth().eth(0x86dd).ipv6(a6, b6, 44).frag6(60, 0, true, 5).ext(17, 8).udp(7, 8).payload(8).done(),
			time: 6, want: pk(udp, 40+8+8+8+8, 0, unk)},
		{f: frag6later(60, 5, 3, false, 24), time: 7, want: pk(udp, 40+8+24, 0, unk)},
		{f: frag6later(60, 6, 3, false, 24), time: 7, want: pk(key(a6, b6, 60, 0, 0), 40+8+24, 0, unk)},
	})
	wantFrags(t, d, FragmentStats{First: 2, Attributed: 3, Unattributed: 3}, 8)
}

func TestFragmentsICMP(t *testing.T) {
	d := NewDecoder(Config{})
	req := icmpKey(a4, b4, 1, 8, 0)
	rep := icmpKey(b4, a4, 1, 8, 0)
	ping6 := icmpKey(a6, b6, 58, 128, 0)
	runSteps(t, d, []step{
		{f: frag4(a4, b4, 1, 77, 0, true).icmp(8, 0).payload(1472).done(), time: 1, want: pk(req, 1500, 0, ini)},
		{f: frag4(a4, b4, 1, 77, 185, false).payload(528).done(), time: 1, want: pk(req, 548, 0, unk)},
		{f: frag4(b4, a4, 1, 77, 0, true).icmp(0, 0).payload(1472).done(), time: 2, want: pk(rep, 1500, 0, resp)},
		{f: frag4(b4, a4, 1, 77, 185, false).payload(528).done(), time: 2, want: pk(rep, 548, 0, unk)},
		{f: eth().eth(0x86dd).ipv6(a6, b6, 44).frag6(58, 0, true, 1).icmp(128, 0).payload(1440).done(), time: 3, want: pk(ping6, 1496, 0, ini)},
		{f: frag6later(58, 1, 181, false, 560), time: 3, want: pk(ping6, 608, 0, unk)},
	})
	wantFrags(t, d, FragmentStats{First: 3, Attributed: 3}, 6)
}

func TestFragmentTableEviction(t *testing.T) {
	d := NewDecoder(Config{FragmentSlots: 4}) // one probe window: the whole table
	first := func(id uint16) *fb { return frag4(a4, b4, 17, id, 0, true).udp(id, 53).done() }
	later := func(id uint16) *fb { return frag4(a4, b4, 17, id, 1, false).payload(8).done() }
	var steps []step
	for id := uint16(1); id <= 5; id++ {
		steps = append(steps, step{f: first(id), time: int64(id), want: pk(key(a4, b4, 17, id, 53), 28, 0, unk)})
	}
	steps = append(steps, step{f: later(1), time: 6, want: pk(key(a4, b4, 17, 0, 0), 28, 0, unk)}) // oldest: evicted
	for id := uint16(2); id <= 5; id++ {
		steps = append(steps, step{f: later(id), time: 6, want: pk(key(a4, b4, 17, id, 53), 28, 0, unk)})
	}
	// A repeated first fragment reuses its own slot: no eviction.
	steps = append(steps, step{f: first(3), time: 7, want: pk(key(a4, b4, 17, 3, 53), 28, 0, unk)})
	runSteps(t, d, steps)
	wantFrags(t, d, FragmentStats{First: 6, Attributed: 4, Unattributed: 1, Evicted: 1}, 11)

	// Expired entries are free slots, not evictions.
	steps = steps[:0]
	for id := uint16(10); id < 14; id++ {
		steps = append(steps, step{f: first(id), time: 100e9, want: pk(key(a4, b4, 17, id, 53), 28, 0, unk)})
	}
	runSteps(t, d, steps)
	wantFrags(t, d, FragmentStats{First: 10, Attributed: 4, Unattributed: 1, Evicted: 1}, 15)
}

func TestFragmentTableSize(t *testing.T) {
	for _, c := range []struct{ slots, want int }{{0, 4096}, {-3, 4096}, {1, fragProbe}, {4, 4}, {5, 8}, {5000, 8192}} {
		if got := len(NewDecoder(Config{FragmentSlots: c.slots}).frag.slots); got != c.want {
			t.Errorf("FragmentSlots %d: %d slots, want %d", c.slots, got, c.want)
		}
	}
	if got := NewDecoder(Config{}).frag.timeout; got != int64(30*time.Second) {
		t.Errorf("default timeout %d", got)
	}
}

func TestFragEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(fragEntry{}); n != 64 {
		t.Fatalf("fragEntry is %d bytes, want 64 (one cache line)", n)
	}
}
