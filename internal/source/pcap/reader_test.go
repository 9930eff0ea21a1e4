package pcap

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/source"
)

// t0 is 2023-11-14T22:13:20Z plus 123456789 ns: every digit of the
// fraction is significant, so a resolution bug shows.
const t0 = int64(1_700_000_000_123_456_789)

func TestPcapRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, packet.LinkSLL2, 65535)
	if err != nil {
		t.Fatal(err)
	}
	want := []rec{
		{payload(0, 60), 60, t0, packet.LinkSLL2, "sample"},
		{payload(1, 0), 0, 0, packet.LinkSLL2, "sample"},                       // empty frame at the epoch
		{payload(2, 96), 1514, t0 + 999_999_999, packet.LinkSLL2, "sample"},    // truncated capture, fraction at its maximum
		{payload(3, 1500), 1500, 4_294_967_295e9, packet.LinkSLL2, "sample"},   // last second a uint32 holds
		{payload(4, MaxPacketLen), MaxPacketLen, 1, packet.LinkSLL2, "sample"}, // largest packet accepted
		{payload(5, 3), 9000, t0 + 1, packet.LinkSLL2, "sample"},               // 1 ns later than the first
		{payload(6, 1), 1, 1_000_000_000, packet.LinkSLL2, "sample"},           // exactly one second
		{payload(7, 61), 61, 1_000_000_000 - 1, packet.LinkSLL2, "sample"},     // one ns short of it
		{payload(8, 62), 1 << 20, 2_000_000_000_000_000_000, packet.LinkSLL2, "sample"},
	}
	for _, p := range want {
		if err := w.WritePacket(p.time, p.wire, p.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	r := openFile(t, "sample.pcap", buf.Bytes())
	if r.Format() != FormatPcap {
		t.Fatalf("format %v", r.Format())
	}
	got, err := readAll(r)
	wantEOF(t, err)
	checkRecs(t, got, want)

	s := r.Stats()
	var capBytes, wireBytes uint64
	for _, p := range want {
		capBytes += uint64(len(p.data))
		wireBytes += uint64(p.wire)
	}
	// Header 24 bytes, 16 per record.
	if s.Packets != uint64(len(want)) || s.CapturedBytes != capBytes || s.WireBytes != wireBytes ||
		s.Bytes != uint64(24+16*len(want))+capBytes || s.Bytes != uint64(buf.Len()) {
		t.Errorf("stats %+v, want packets=%d captured=%d wire=%d bytes=%d", s, len(want), capBytes, wireBytes, buf.Len())
	}
}

func TestWriterRejects(t *testing.T) {
	w, _ := NewWriter(&bytes.Buffer{}, packet.LinkEthernet, 0)
	for _, c := range []struct {
		ts   int64
		wire int
		n    int
	}{{-1, 10, 10}, {4_294_967_296e9, 10, 10}, {0, 9, 10}, {0, MaxPacketLen + 1, MaxPacketLen + 1}} {
		if err := w.WritePacket(c.ts, c.wire, make([]byte, c.n)); err == nil {
			t.Errorf("WritePacket(%d, %d, %d bytes) accepted", c.ts, c.wire, c.n)
		}
	}
	nw, _ := NewNgWriter(&bytes.Buffer{})
	if err := nw.WritePacket(0, 0, 1, []byte{1}); err == nil {
		t.Error("NgWriter wrote a packet on an interface it never declared")
	}
}

func TestPcapngRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewNgWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	ifaces := []struct {
		name string
		link packet.LinkType
		snap int
	}{{"eth0", packet.LinkEthernet, 0}, {"", packet.LinkRaw, 1500}, {"a-very-long-interface-name", packet.LinkIPv6, 262144}}
	for i, ifc := range ifaces {
		id, err := w.AddInterface(ifc.name, ifc.link, ifc.snap)
		if err != nil || id != i {
			t.Fatalf("AddInterface = %d, %v; want %d", id, err, i)
		}
	}
	var want []rec
	times := []int64{t0, 0, t0 + 1, 1 << 32, 1<<32 - 1, 1<<62 + 12345, 1_000_000_000}
	for i := range 21 { // lengths 0..20 cover every padding remainder
		ifc := i % 3
		name := ifaces[ifc].name
		if name == "" {
			name = "trace"
		}
		p := rec{payload(i, i*7%61), i*7%61 + i%2*40, times[i%len(times)], ifaces[ifc].link, name}
		if err := w.WritePacket(ifc, p.time, p.wire, p.data); err != nil {
			t.Fatal(err)
		}
		want = append(want, p)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	r := openFile(t, "trace.v2.pcapng", buf.Bytes())
	if r.DefaultIface != "trace.v2" {
		t.Fatalf("DefaultIface %q, want %q", r.DefaultIface, "trace.v2")
	}
	r.DefaultIface = "trace"
	got, err := readAll(r)
	wantEOF(t, err)
	checkRecs(t, got, want)
	if s := r.Stats(); s.Format != FormatPcapng || s.Sections != 1 || s.Interfaces != 3 || s.Packets != 21 ||
		s.Bytes != uint64(buf.Len()) || len(s.Skipped) != 0 {
		t.Errorf("stats %+v", s)
	}
}

// Two NgWriters on one stream make two sections; the second section's
// interface 0 is a new interface.
func TestPcapngSections(t *testing.T) {
	var buf bytes.Buffer
	w1, _ := NewNgWriter(&buf)
	w1.AddInterface("eth0", packet.LinkEthernet, 0)
	w1.AddInterface("eth1", packet.LinkSLL, 0)
	w1.WritePacket(1, 10, 5, payload(1, 5))
	w1.WritePacket(0, 20, 6, payload(2, 6))
	w1.Flush()
	w2, _ := NewNgWriter(&buf)
	w2.AddInterface("wg0", packet.LinkRaw, 0)
	w2.WritePacket(0, 30, 7, payload(3, 7))
	if err := w2.Flush(); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(r)
	wantEOF(t, err)
	checkRecs(t, got, []rec{
		{payload(1, 5), 5, 10, packet.LinkSLL, "eth1"},
		{payload(2, 6), 6, 20, packet.LinkEthernet, "eth0"},
		{payload(3, 7), 7, 30, packet.LinkRaw, "wg0"},
	})
	if s := r.Stats(); s.Sections != 2 || s.Interfaces != 3 {
		t.Errorf("sections %d interfaces %d, want 2 and 3", s.Sections, s.Interfaces)
	}
}

// Classic pcap written by hand: both byte orders, both resolutions, and
// FCS bits above the link type.
func TestPcapHandBuilt(t *testing.T) {
	// 1700000000 s + 123456 µs, and + 123456789 ns.
	const us, ns = int64(1_700_000_000_123_456_000), int64(1_700_000_000_123_456_789)
	for _, c := range []struct {
		name  string
		order byteOrder
		magic uint32
		frac  uint32
		want  int64
	}{
		{"le-micro", binary.LittleEndian, 0xa1b2c3d4, 123456, us},
		{"be-micro", binary.BigEndian, 0xa1b2c3d4, 123456, us},
		{"le-nano", binary.LittleEndian, 0xa1b23c4d, 123456789, ns},
		{"be-nano", binary.BigEndian, 0xa1b23c4d, 123456789, ns},
	} {
		t.Run(c.name, func(t *testing.T) {
			// FCS present (bit 28) with a 4-byte FCS length code (bits 29-31): link type is still 113.
			p := newPcapFile(c.order, c.magic, 0xF000_0000|113)
			p.rec(1_700_000_000, c.frac, 70, payload(1, 42))
			p.rec(0, 1, 3, payload(2, 3))
			got, err := readBytes(p.buf)
			wantEOF(t, err)
			one := int64(1000) // 1 µs
			if c.want == ns {
				one = 1
			}
			checkRecs(t, got, []rec{
				{payload(1, 42), 70, c.want, packet.LinkSLL, ""},
				{payload(2, 3), 3, one, packet.LinkSLL, ""},
			})
		})
	}
}

// pcapng written by hand, with resolutions and block types the writer
// never produces.
func TestPcapngHandBuilt(t *testing.T) {
	for _, order := range []byteOrder{binary.LittleEndian, binary.BigEndian} {
		t.Run(order.String(), func(t *testing.T) {
			n, want := handNg(order)
			r, err := NewReader(bytes.NewReader(n.buf))
			if err != nil {
				t.Fatal(err)
			}
			r.DefaultIface = "dflt"
			got, err := readAll(r)
			wantEOF(t, err)
			checkRecs(t, got, want)
			s := r.Stats()
			if s.Skipped[4] != 1 || s.Skipped[0x7A7A7A7A] != 2 || len(s.Skipped) != 2 || s.SkippedOther != 0 {
				t.Errorf("skipped %v other %d, want map[4:1 0x7A7A7A7A:2]", s.Skipped, s.SkippedOther)
			}
			if s.Interfaces != 3 || s.Packets != 6 || s.Bytes != uint64(len(n.buf)) {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

// Timestamp conversion for resolutions at the edges.
func TestTsresol(t *testing.T) {
	for _, c := range []struct {
		resol uint8
		ts    uint64
		want  int64
	}{
		{0, 3, 3_000_000_000},                     // seconds
		{9, 3, 3},                                 // nanoseconds
		{12, 123_456, 123},                        // picoseconds, floored
		{28, 1 << 63, 0},                          // 2^63 × 10^-28 s < 1 ns
		{127, 1 << 63, 0},                         // 10^-127: rounds to nothing
		{0xC8, 1 << 63, 1_953_125},                // 0xC8 has the high bit: 2^-72 s; 2^63 units = 2^-9 s
		{0x80, 2, 2_000_000_000},                  // 2^0 s
		{0x80 | 30, 3 << 30, 3_000_000_000},       // 2^-30
		{0x80 | 64, 1 << 63, 500_000_000},         // 2^-64: half a second
		{0x80 | 127, ^uint64(0), 0},               // far below a nanosecond
		{0x80 | 32, 1<<32 + 1<<31, 1_500_000_000}, // 1.5 s
	} {
		var ifc iface
		ifc.setResol(c.resol)
		if got := ifc.nanos(c.ts); got != c.want {
			t.Errorf("resol %#x ts %d: %d ns, want %d", c.resol, c.ts, got, c.want)
		}
	}
}

// Steady-state Next allocates nothing.
func TestNextAllocs(t *testing.T) {
	for name, file := range map[string][]byte{"pcap": benchPcap(t, 3000), "pcapng": benchPcapng(t, 3000)} {
		t.Run(name, func(t *testing.T) {
			r, err := NewReader(bytes.NewReader(file))
			if err != nil {
				t.Fatal(err)
			}
			r.DefaultIface = "x"
			var f source.Frame
			for range 200 { // grow the buffer to the largest packet
				if err := r.Next(&f); err != nil {
					t.Fatal(err)
				}
			}
			allocs := testing.AllocsPerRun(2000, func() {
				if err := r.Next(&f); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("%v allocations per Next, want 0", allocs)
			}
		})
	}
}

// openFile writes b to a temporary file called name and opens it with Open
// (so DefaultIface comes from the name); the reader closes with the test.
func openFile(t *testing.T, name string, b []byte) *Reader {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
