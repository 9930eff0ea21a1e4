package store

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// TestGroupCodesRoundTrip: putGroups and getGroups agree on random
// dictionaries (classes 1 to 255, so groups of one entry, of powers of
// two and of many) and random rows, and the bit stream is the sum of the
// rows' truncated binary code lengths, padded to a byte.
func TestGroupCodesRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	var tab addrTable
	for round := range 300 {
		d := 1 + r.IntN(600)
		cls := make([]byte, d)
		for i := range cls {
			switch round % 3 {
			case 0:
				cls[i] = byte(1 + r.IntN(255))
			case 1:
				cls[i] = byte(1 + r.IntN(3))
			default:
				cls[i] = 1
			}
		}
		var g groupCodes
		g.setGroups(cls)
		n := r.IntN(3000)
		tab.idx = tab.idx[:0]
		want := make([]uint32, n)
		bitsWant := 0
		for i := range want {
			rk := uint32(r.IntN(d))
			want[i] = rk
			tab.idx = append(tab.idx, uint64(rk))
			for _, c := range g.c {
				if c.m > 0 && rk >= c.start && rk < c.start+c.m {
					bitsWant += int(c.k)
					if rk-c.start >= c.u {
						bitsWant++
					}
					break
				}
			}
		}
		st := tab.putGroups([]byte{7}, cls)
		if st[0] != 7 || len(st) != 1+n+(bitsWant+7)/8 {
			t.Fatalf("round %d: %d bytes for %d rows and %d bits", round, len(st), n, bitsWant)
		}
		got := make([]uint32, n)
		if err := getGroups(st[1:], cls, got); err != nil {
			t.Fatalf("round %d (%d entries, %d rows): %v", round, d, n, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: indexes differ", round)
		}
	}
}

// TestGroupCodesMalformed: a class plane naming a class without entries,
// a bit stream cut short, with a byte left over or with padding bits set,
// and a plane shorter than the rows are malformed streams, not panics.
func TestGroupCodesMalformed(t *testing.T) {
	cls := []byte{1, 1, 1} // one class (slot 254) of 3 entries: codes 0, 10, 11
	ok := []byte{254, 254, 254, 0b01011_000}
	ix := make([]uint32, 3)
	if err := getGroups(ok, cls, ix); err != nil || !slices.Equal(ix, []uint32{0, 1, 2}) {
		t.Fatalf("valid stream: %v, %v", ix, err)
	}
	for name, src := range map[string][]byte{
		"empty class":     {254, 3, 254, 0b01011_000},
		"cut short":       {254, 254, 254},
		"a byte over":     {254, 254, 254, 0b01011_000, 0},
		"padding set":     {254, 254, 254, 0b01011_001},
		"plane too short": {254, 254},
	} {
		if err := getGroups(src, cls, make([]uint32, 3)); !errors.Is(err, errBadStream) {
			t.Errorf("%s: %v, want malformed", name, err)
		}
	}
	if err := getGroups([]byte{254, 0b1000_0000}, []byte{1, 1, 1}, make([]uint32, 1)); err != nil {
		t.Fatalf("10 is a whole code: %v", err)
	}
	if err := getGroups([]byte{254, 254, 254, 254, 254, 254, 254, 254, 254, 0xff}, cls, make([]uint32, 9)); !errors.Is(err, errBadStream) {
		t.Errorf("eight 1 bits for nine rows of 2-bit codes: %v", err)
	}
}

// zipfSources gives recs IPv4 sources drawn from a Zipf law over hosts of
// 10.1.0.0/16 (one hot host in most blocks' hundreds of rows, many seen
// once), every 25th row an IPv6 source, as gendb's clients are.
func zipfSources(recs []flow.Record, hosts uint64, r *rand.Rand) []flow.Record {
	z := rand.NewZipf(r, 1.1, 8, hosts-1)
	for i := range recs {
		k := &recs[i].Key
		if i%25 == 0 {
			k.SrcAddr = [16]byte{0x20, 1, 0xd, 0xb8, 15: byte(r.IntN(30))}
			k.IPVersion = 6
			continue
		}
		x := uint32(10<<24|1<<16) + uint32(z.Uint64())
		flow.SetAddr4(&k.SrcAddr, []byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)})
		k.IPVersion = 4
	}
	return recs
}

// TestAddrGroupRoundTrip: sources coded as adictg read back exact, as
// rows and as dictionary and indexes, on Zipf sources (classes up to 255
// and over), a few hosts of over 255 rows each (class 255), and each of 40 hosts twice (one class); and adictg takes fewer
// bytes than adicts' planes on the Zipf sources.
func TestAddrGroupRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	eg, ep := newTestEncoder(t), newTestEncoder(t)
	indexPlanes(ep)
	hot := newGen(3).window(nil, 1200, t0, "x")
	for i := range hot { // three hosts of ~340 rows each (class 255), five of ~34
		k := i % 3
		if i%7 == 0 {
			k = 3 + i%5
		}
		flow.SetAddr4(&hot[i].Key.SrcAddr, []byte{10, 1, 0, byte(9 + k)})
		hot[i].Key.IPVersion = 4
	}
	twice := newGen(6).window(nil, 80, t0, "x")
	for i := range twice { // one class of 40 entries
		flow.SetAddr4(&twice[i].Key.SrcAddr, []byte{10, 1, 0, byte(i * 7 % 40)})
		twice[i].Key.IPVersion = 4
	}
	for _, tc := range []struct {
		name    string
		recs    []flow.Record
		smaller bool
	}{
		{"zipf", zipfSources(newGen(4).window(nil, 5000, t0, "x"), 20000, r), true},
		{"zipf, few hosts", zipfSources(newGen(5).window(nil, 3000, t0, "x"), 300, r), true},
		{"hot hosts", hot, false},
		{"each host twice", twice, false},
	} {
		b, h := eg.encode(nil, tc.recs)
		if h.cols[cSrcAddr].enc != encADictG {
			t.Fatalf("%s: encoding %d, want adictg", tc.name, h.cols[cSrcAddr].enc)
		}
		c := readSpan(t, b, ColSrcAddr)
		for i := range tc.recs {
			if c.SrcAddr[i] != tc.recs[i].Key.SrcAddr {
				t.Fatalf("%s row %d: %v, want %v", tc.name, i, c.SrcAddr[i], tc.recs[i].Key.SrcAddr)
			}
		}
		c = readSpan(t, b, ColSrcAddrIdx)
		for i := range tc.recs {
			if c.SrcDict[c.SrcIdx[i]] != tc.recs[i].Key.SrcAddr {
				t.Fatalf("%s row %d: dictionary form differs", tc.name, i)
			}
		}
		_, hp := ep.encode(nil, tc.recs)
		if hp.cols[cSrcAddr].enc != encADictS {
			t.Fatalf("%s: planes encoder wrote encoding %d", tc.name, hp.cols[cSrcAddr].enc)
		}
		if g, p := h.cols[cSrcAddr].slen, hp.cols[cSrcAddr].slen; tc.smaller && g >= p {
			t.Errorf("%s: adictg %d bytes, adicts %d", tc.name, g, p)
		}
	}
}

// TestAddrGroupVersion: adictg is refused in a block of version 9 or 10
// (which have no such encoding) and outside the address columns.
func TestAddrGroupVersion(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	b, h := newTestEncoder(t).encode(nil, zipfSources(newGen(7).window(nil, 500, t0, "x"), 100, r))
	if h.cols[cSrcAddr].enc != encADictG {
		t.Fatal("no adictg")
	}
	if _, err := parseHeader(b, true); err != nil {
		t.Fatal(err)
	}
	for _, v := range []byte{9, 10} {
		if _, err := parseHeader(asVersion(t, b, v), true); !errors.Is(err, errCorruptBlock) {
			t.Errorf("adictg in a version %d block: %v", v, err)
		}
	}
	pk := reheader(t, b, func(h *blockHeader) { h.cols[cSrcPort].enc = encADictG })
	if _, err := parseHeader(pk, true); !errors.Is(err, errCorruptBlock) {
		t.Errorf("adictg as SrcPort's encoding: %v", err)
	}
}

// BenchmarkAddrCoding times the source address column alone on 5,000
// rows of Zipf sources (gendb's clients), adicts' index planes against
// adictg: encode (dictionary, set, index coding and entropy coding) and
// decode (ColSrcAddrIdx: the dictionary and each row's index, what a
// group-by reads; CRC checked).
func BenchmarkAddrCoding(b *testing.B) {
	recs := zipfSources(newGen(8).window(nil, 5000, t0, "x"), 20000, rand.New(rand.NewPCG(27, 28)))
	addrs := make([][16]byte, len(recs))
	for i := range recs {
		addrs[i] = recs[i].Key.SrcAddr
	}
	for _, planes := range []bool{true, false} {
		name := "adictg"
		e := newTestEncoder(b)
		if planes {
			name = "adicts"
			indexPlanes(e)
		}
		blk, _ := e.encode(nil, recs)
		h, err := parseHeader(blk, true)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/encode", func(b *testing.B) {
			var bl bloom
			for i := 0; i < b.N; i++ {
				e.payload = e.payload[:0]
				e.putAddr(cSrcAddr, addrs, &bl)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/row")
			b.ReportMetric(float64(e.cols[cSrcAddr].slen)/float64(len(recs)), "B/row")
		})
		b.Run(name+"/decode", func(b *testing.B) {
			var d decoder
			var c Columns
			for i := 0; i < b.N; i++ {
				if err := d.decodeCols(h, blk, 0, ColSrcAddrIdx, &c, true); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/row")
		})
	}
}
