package wire

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// Rand returns a record with every field set from r (enrichment, NAT and
// drops on some), strings within their bounds.
func randRecord(r *rand.Rand) flow.Record {
	var k flow.Key
	if r.IntN(4) == 0 {
		k.SetSrc(netip.AddrFrom16([16]byte{0x20, 1, 0xd, 0xb8, 15: byte(r.IntN(256))}))
		k.SetDst(netip.AddrFrom16([16]byte{0x20, 1, 0xd, 0xb8, 14: 1, 15: byte(r.IntN(256))}))
	} else {
		k.SetSrc(netip.AddrFrom4([4]byte{10, 0, byte(r.IntN(256)), byte(r.IntN(256))}))
		k.SetDst(netip.AddrFrom4([4]byte{172, 16, 0, byte(r.IntN(256))}))
	}
	k.SrcPort, k.DstPort, k.Proto = uint16(r.Uint32()), uint16(r.Uint32()), uint8(r.Uint32())
	if k.Proto == flow.ProtoICMP {
		k.ICMPType, k.ICMPCode = 8, uint8(r.IntN(3))
	}
	rec := flow.Record{Key: k, Packets: r.Uint64(), Bytes: r.Uint64(), RevPackets: r.Uint64(), RevBytes: r.Uint64(),
		TCPFlags: uint8(r.Uint32()), RevTCPFlags: uint8(r.Uint32()), EndReason: flow.EndReason(r.IntN(flow.NumReasons)),
		VLAN: uint16(r.IntN(4096)), Start: r.Int64(), End: r.Int64(), Iface: "eth" + string(rune('0'+r.IntN(10))),
		Node: []string{"", "node-1", "ノード"}[r.IntN(3)], Sampling: uint32(r.IntN(3) * 100)}
	if r.IntN(3) == 0 {
		rec.DropPackets, rec.DropBytes, rec.DropReason = r.Uint64(), r.Uint64(), "NO_SOCKET"
	}
	if r.IntN(3) == 0 {
		n := k
		n.SrcAddr[15]++
		n.DstPort++
		rec.PostNAT = n
		rec.Mark, rec.Zone = r.Uint32(), uint16(r.Uint32())
	}
	if r.IntN(3) == 0 {
		rec.Verdict, rec.Rule = flow.VerdictDeny, "weir-deny"
	}
	if r.IntN(2) == 0 {
		rec.SrcWorkload = &flow.Workload{Name: "web-1", Namespace: "prod", Node: "n1"}
		rec.Service = &flow.Service{Name: "prod/web", Backends: "10.0.0.5:8080", Group: ""}
		rec.ServiceMatch = flow.ServiceMatch(1 + r.IntN(4))
	}
	if r.IntN(2) == 0 {
		rec.DstWorkload = &flow.Workload{Name: "db", Node: "n2"}
	}
	return rec
}

// TestRoundTrip: every field of many records comes back from Decode as
// Append wrote it, rows back to back.
func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var buf []byte
	var want []flow.Record
	for range 2000 {
		rec := randRecord(r)
		want = append(want, rec)
		buf = Append(buf, &rec)
	}
	rest := buf
	for i := range want {
		var got flow.Record
		var err error
		if rest, err = Decode(rest, &got); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, want[i]) {
			t.Fatalf("row %d:\n got %+v\nwant %+v", i, got, want[i])
		}
	}
	if len(rest) != 0 {
		t.Errorf("%d bytes left over", len(rest))
	}
}

// TestReusedBuffer: a row written into a reused buffer whose spare
// capacity holds stale bytes is the row written into a fresh one (Append
// fills fixed-width runs in place, so a byte it forgot would show here),
// translated or not.
func TestReusedBuffer(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	dirty := make([]byte, MaxRow)
	for range 500 {
		rec := randRecord(r)
		if r.IntN(2) == 0 {
			rec.PostNAT = flow.Key{}
		}
		for i := range dirty {
			dirty[i] = 0xa5
		}
		if got, want := Append(dirty[:3], &rec)[3:], Append(nil, &rec); !bytes.Equal(got, want) {
			t.Fatalf("into a reused buffer:\n got %x\nwant %x", got, want)
		}
	}
}

// TestLayout pins the first bytes and the size of a plain row: a change
// of the layout without a new Version fails here.
func TestLayout(t *testing.T) {
	var rec flow.Record
	rec.Key.SetSrc(netip.MustParseAddr("10.0.0.1"))
	rec.Key.SetDst(netip.MustParseAddr("10.0.0.2"))
	rec.Node, rec.Iface, rec.Start, rec.Packets = "n", "eth0", 1, 7
	b := Append(nil, &rec)
	if !bytes.HasPrefix(b, []byte{1, 1, 'n', 4, 'e', 't', 'h', '0', 1, 0, 0, 0, 0, 0, 0, 0}) {
		t.Errorf("row starts % x", b[:16])
	}
	// fixed fields: 1+8+8+1+16+16+2+2+3+32+3+2+4+16+37+1+4+2+1 = 159,
	// strings: node 2, iface 5, drop_reason 1, rule 1, nine enrichment 9
	if len(b) != 159+2+5+1+1+9 {
		t.Errorf("plain row is %d bytes", len(b))
	}
	if len(Columns) != 44 || Columns[0].Name != "schema" {
		t.Errorf("%d columns", len(Columns))
	}
}

// TestNotTranslated: a PostNAT without an IP version is written as
// version 0, :: and port 0, whatever else it holds.
func TestNotTranslated(t *testing.T) {
	var rec flow.Record
	rec.PostNAT.SrcPort, rec.PostNAT.SrcAddr[3] = 9, 1
	var got flow.Record
	if _, err := Decode(Append(nil, &rec), &got); err != nil || got.PostNAT != (flow.Key{}) {
		t.Errorf("not translated came back as %+v (%v)", got.PostNAT, err)
	}
}

// TestClip: strings over their bound are cut at a rune start, as the
// store cuts them.
func TestClip(t *testing.T) {
	rec := flow.Record{Rule: strings.Repeat("é", 40), Iface: strings.Repeat("x", 5000)} // 80 bytes
	var got flow.Record
	if _, err := Decode(Append(nil, &rec), &got); err != nil {
		t.Fatal(err)
	}
	if got.Rule != strings.Repeat("é", 32) || len(got.Iface) != MaxString {
		t.Errorf("rule %q (%d bytes), iface %d bytes", got.Rule, len(got.Rule), len(got.Iface))
	}
}

// TestDecodeErrors: cut rows, a foreign version and an overlong string are
// errors, never a panic or a misread.
func TestDecodeErrors(t *testing.T) {
	rec := randRecord(rand.New(rand.NewPCG(3, 4)))
	b := Append(nil, &rec)
	var r flow.Record
	for n := range len(b) {
		if _, err := Decode(b[:n], &r); !errors.Is(err, ErrShort) {
			t.Fatalf("row cut at %d of %d: %v", n, len(b), err)
		}
	}
	v2 := append([]byte{2}, b[1:]...)
	if _, err := Decode(v2, &r); !errors.Is(err, ErrVersion) {
		t.Errorf("version 2: %v", err)
	}
	long := []byte{1, 0x81, 0x40} // node of 8193 bytes
	if _, err := Decode(long, &r); !errors.Is(err, ErrString) {
		t.Errorf("long node: %v", err)
	}
}

// TestAppendAllocs: encoding into a reused buffer allocates nothing.
func TestAppendAllocs(t *testing.T) {
	rec := randRecord(rand.New(rand.NewPCG(5, 6)))
	buf := make([]byte, 0, MaxRow)
	if n := testing.AllocsPerRun(100, func() { buf = Append(buf[:0], &rec) }); n != 0 {
		t.Errorf("%v allocations per row", n)
	}
}

func BenchmarkAppend(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	recs := make([]flow.Record, 256)
	for i := range recs {
		recs[i] = randRecord(r)
	}
	buf := make([]byte, 0, MaxRow)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf = Append(buf[:0], &recs[i%len(recs)])
	}
	b.SetBytes(int64(len(buf)))
}

// FuzzDecode: any bytes decode to an error or to a record that encodes
// and decodes to itself.
func FuzzDecode(f *testing.F) {
	r := rand.New(rand.NewPCG(9, 10))
	for range 4 {
		rec := randRecord(r)
		f.Add(Append(nil, &rec))
	}
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		var rec flow.Record
		rest, err := Decode(b, &rec)
		if err != nil {
			return
		}
		if len(rest) > len(b) {
			t.Fatal("rest grew")
		}
		again := Append(nil, &rec)
		var rec2 flow.Record
		if _, err := Decode(again, &rec2); err != nil || !reflect.DeepEqual(Append(nil, &rec2), again) {
			t.Fatalf("re-encoding is not stable: %v", err)
		}
	})
}

// TestDocumented: docs/fleet.md lists every column with its type, in order.
func TestDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/fleet.md")
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range Columns {
		if row := fmt.Sprintf("| %d | `%s` | %s |", i, c.Name, c.Type); !strings.Contains(string(b), row) {
			t.Errorf("docs/fleet.md lacks %q", row)
		}
	}
}
