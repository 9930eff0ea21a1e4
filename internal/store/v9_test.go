package store

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// readSpan decodes the want columns of block b from the bytes of its
// span alone (the rest zeroed): what a reader fetches must hold every
// column the wanted ones are coded against.
func readSpan(t *testing.T, b []byte, want Column) *Columns {
	t.Helper()
	h, err := parseHeader(b, true)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := h.span(want)
	blk := make([]byte, len(b))
	copy(blk[lo:hi], b[lo:hi])
	var c Columns
	if err := new(decoder).decodeCols(h, blk, 0, want, &c, true); err != nil {
		t.Fatalf("columns %#x: %v", want, err)
	}
	return &c
}

// TestRatioRoundTrip: RevPackets is stored as a ratio of Packets exactly
// when the ratio explains the rows (or codes smaller), and reads back
// exact alone, with RevBytes alone (per packet of it) and with everything,
// also for rows the ratio cannot explain (no packets, counts past 2^40,
// a difference too wide to store, which keeps the plain counts).
func TestRatioRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	e := newTestEncoder(t)
	cases := []struct {
		name  string
		set   func(i int, rec *flow.Record)
		ratio bool
	}{
		{"half steps", func(i int, rec *flow.Record) { rec.RevPackets = rec.Packets * uint64(1+i%3) / 2 }, true},
		{"half steps, some off", func(i int, rec *flow.Record) {
			rec.RevPackets = rec.Packets * uint64(1+i%3) / 2
			if i%40 == 0 {
				rec.RevPackets += 7
			}
		}, true},
		{"no packets, reverse only", func(i int, rec *flow.Record) {
			rec.RevPackets = rec.Packets
			if i%50 == 0 {
				rec.Packets, rec.Bytes = 0, 0
			}
		}, true},
		{"past 2^40", func(i int, rec *flow.Record) {
			rec.RevPackets = rec.Packets
			if i == 7 {
				rec.Packets, rec.RevPackets = 1<<41, 1<<42+3
			}
		}, true},
		{"unrelated", func(i int, rec *flow.Record) { rec.RevPackets = uint64(r.IntN(1 << 20)) }, false},
		{"too wide", func(i int, rec *flow.Record) {
			rec.RevPackets = rec.Packets
			if i == 3 {
				rec.RevPackets = math.MaxUint64
			}
		}, false},
	}
	for _, tc := range cases {
		recs := newGen(r.Uint64()).window(nil, 600, t0, "x")
		for i := range recs {
			tc.set(i, &recs[i])
			recs[i].RevBytes = recs[i].RevPackets * 100
		}
		b, h := e.encode(nil, recs)
		if got := h.cols[cRevPackets].flags&flagRatio != 0; got != tc.ratio {
			t.Errorf("%s: ratio %v, want %v", tc.name, got, tc.ratio)
		}
		lo, hi := uint64(math.MaxUint64), uint64(0)
		for i := range recs {
			lo, hi = min(lo, recs[i].RevPackets), max(hi, recs[i].RevPackets)
		}
		if c := h.cols[cRevPackets]; c.min != lo || c.max != hi {
			t.Errorf("%s: directory range %d..%d, want %d..%d", tc.name, c.min, c.max, lo, hi)
		}
		for _, want := range []Column{ColRevPackets, ColRevBytes, ColPackets | ColRevPackets, ColAll} {
			c := readSpan(t, b, want)
			for i := range recs {
				if want&ColRevPackets != 0 && c.RevPackets[i] != recs[i].RevPackets || want&ColRevBytes != 0 && c.RevBytes[i] != recs[i].RevBytes {
					t.Fatalf("%s, columns %#x, row %d: %d/%d, want %d/%d", tc.name, want, i, c.RevPackets[i], c.RevBytes[i], recs[i].RevPackets, recs[i].RevBytes)
				}
			}
		}
	}
}

// TestRatioMalformed: a stored ratio whose count overflows or goes under
// zero is a malformed stream, never a wrong number or a panic.
func TestRatioMalformed(t *testing.T) {
	for _, c := range []struct{ pk, v uint64 }{
		{math.MaxUint64, 255},                    // 255 × p over 2^65
		{4, 2 | zigzag(^uint64(4))<<8},           // floor(2·4/2) − 5 < 0
		{144680345676153346, 255 | zigzag(1)<<8}, // floor(255·p/2) = 2^64-1, + 1
		{math.MaxUint64 / 2, 2 | 1<<9},           // p + 1 with p = 2^63-1: fits
	} {
		v := []uint64{c.v}
		err := unratio(v, []uint64{c.pk})
		if c.pk == math.MaxUint64/2 {
			if err != nil || v[0] != c.pk+1 {
				t.Errorf("p %d: %d, %v", c.pk, v[0], err)
			}
			continue
		}
		if !errors.Is(err, errBadStream) {
			t.Errorf("packets %d, value %#x: %v (decoded %d), want malformed", c.pk, c.v, err, v[0])
		}
	}
	if err := unratio([]uint64{1, 2}, []uint64{1}); !errors.Is(err, errBadStream) {
		t.Errorf("rows and packets of different lengths: %v", err)
	}
}

// TestTupleRoundTrip: a block of few services codes DstPort, Proto, the
// ICMP fields and the TCP flags as one tuple dictionary whose columns
// read back exact one at a time, with their own ranges; a block of more
// tuples than it can repay keeps the columns apart.
func TestTupleRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	e := newTestEncoder(t)
	for _, few := range []bool{true, false} {
		recs := newGen(r.Uint64()).window(nil, 700, t0, "x")
		if few {
			for i := range recs {
				if recs[i].Key.Proto != flow.ProtoICMP {
					recs[i].Key.DstPort = commonPorts[i%7]
				}
			}
		} else {
			for i := range recs {
				recs[i].Key.DstPort = uint16(r.IntN(1 << 16))
			}
		}
		b, h := e.encode(nil, recs)
		if got := h.cols[cDstPort].enc == encTuple; got != few {
			t.Fatalf("few services %v: tuple %v", few, got)
		}
		for _, id := range tupleCols {
			if got := h.cols[id].flags&flagTuple != 0; got != few {
				t.Errorf("few services %v: column %d in the tuple %v", few, id, got)
			}
		}
		var plo, phi uint64 = 255, 0
		for i := range recs {
			plo, phi = min(plo, uint64(recs[i].Key.Proto)), max(phi, uint64(recs[i].Key.Proto))
		}
		if c := h.cols[cProto]; c.min != plo || c.max != phi {
			t.Errorf("Proto range %d..%d, want %d..%d", c.min, c.max, plo, phi)
		}
		for _, want := range []Column{ColDstPort, ColProto, ColICMP, ColFlags, ColAll} {
			c := readSpan(t, b, want)
			for i := range recs {
				k := &recs[i].Key
				if want&ColDstPort != 0 && c.DstPort[i] != k.DstPort || want&ColProto != 0 && c.Proto[i] != k.Proto ||
					want&ColICMP != 0 && (c.ICMPType[i] != k.ICMPType || c.ICMPCode[i] != k.ICMPCode) ||
					want&ColFlags != 0 && (c.TCPFlags[i] != recs[i].TCPFlags || c.RevTCPFlags[i] != recs[i].RevTCPFlags) {
					t.Fatalf("columns %#x, row %d differs", want, i)
				}
			}
		}
	}
}

// TestTupleMalformed: a tuple stream whose size, index width or length
// does not add up, or whose index points past its dictionary, and a
// directory that puts a column in a tuple DstPort does not code, are
// refused: malformed or corrupt, never a panic or a wrong value.
func TestTupleMalformed(t *testing.T) {
	ok := binary.LittleEndian.AppendUint32(nil, 2)
	ok = append(ok, 1)
	ok = putPlanes(ok, []uint64{tupleOf(443, 6, 0, 0, 0x1b, 0x1b), tupleOf(53, 17, 0, 0, 0, 0)}, tupleEntry)
	ok = append(ok, 0, 1, 1)
	var td tupleDecoder
	if err := td.decode(ok, 3); err != nil || len(td.dict) != 2 {
		t.Fatalf("valid tuple stream: %v", err)
	}
	if got := tupleField(&td, cProto, 3, []uint8(nil)); !slices.Equal(got, []uint8{6, 17, 17}) {
		t.Fatalf("protocols %v", got)
	}
	bad := map[string][]byte{
		"short":         ok[:4],
		"more than n":   slices.Concat(binary.LittleEndian.AppendUint32(nil, 4), ok[4:]),
		"length":        ok[:len(ok)-1],
		"index past":    slices.Concat(ok[:len(ok)-1], []byte{2}),
		"index width 5": slices.Concat(ok[:4], []byte{5}, ok[5:]),
	}
	for name, st := range bad {
		if err := td.decode(st, 3); !errors.Is(err, errBadStream) {
			t.Errorf("%s: %v, want malformed", name, err)
		}
	}
	// Directories: a tuple column in a block without a tuple, one with
	// bytes, and the tuple encoding on another column.
	e := newTestEncoder(t)
	recs := newGen(9).window(nil, 300, t0, "x")
	for i := range recs {
		recs[i].Key.DstPort = 443
	}
	b, h := e.encode(nil, recs)
	if h.cols[cDstPort].enc != encTuple {
		t.Fatal("no tuple")
	}
	pos, _ := walkDirV11(t, b)
	dirOf := func(id int) int { return pos[id] } // the directory entry's offset
	tupleBytes := reheader(t, b, func(h *blockHeader) { h.cols[cProto].slen = 1 })
	if err := decodeBlock(tupleBytes, true, new(Columns)); !errors.Is(err, errCorruptBlock) {
		t.Errorf("tuple column bytes: %v, want corrupt", err)
	}
	for name, f := range map[string]func(x []byte){
		"DstPort not a tuple": func(x []byte) { x[dirOf(cDstPort)] = encDict },
		"tuple on SrcPort":    func(x []byte) { x[dirOf(cSrcPort)] = encTuple },
		"flag on VLAN":        func(x []byte) { x[dirOf(cVLAN)+2] = flagTuple },
		"ratio on Packets":    func(x []byte) { x[dirOf(cPackets)+2] = flagRatio },
	} {
		x := slices.Clone(b)
		f(x)
		binary.LittleEndian.PutUint32(x[h.headerLen-4:], crc32.Checksum(x[:h.headerLen-4], castagnoli))
		var c Columns
		if err := decodeBlock(x, true, &c); !errors.Is(err, errCorruptBlock) {
			t.Errorf("%s: %v, want corrupt", name, err)
		}
	}
}

// withSources gives recs IPv4 sources drawn from n hosts spaced step
// apart from 10.1.0.0 (and every 20th row an IPv6 one).
func withSources(recs []flow.Record, n, step int, r *rand.Rand) []flow.Record {
	for i := range recs {
		k := &recs[i].Key
		if i%20 == 0 {
			k.SrcAddr = [16]byte{0x20, 1, 0xd, 0xb8, 15: byte(r.IntN(9))}
			k.IPVersion = 6
			continue
		}
		x := uint32(10<<24|1<<16) + uint32(r.IntN(n)*step)
		flow.SetAddr4(&k.SrcAddr, []byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)})
		k.IPVersion = 4
	}
	return recs
}

// TestAddrSetRoundTrip: sources dense enough are kept as an exact set
// (a bitmap or Elias-Fano) that the dictionary refers to (adicts), and
// read back exact; the set answers MayContainSrc exactly for IPv4 (every
// written host yes, every other no) and without a false negative for
// IPv6; sources spread too thin keep adictd and a bloom filter.
func TestAddrSetRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	e := newTestEncoder(t)
	for _, tc := range []struct {
		name      string
		hosts     int
		step      int
		set       bool
		bitmap    bool
		rows      int
		wantWords int
	}{
		{"dense", 300, 1, true, true, 2000, 0},
		{"every 8th", 600, 8, true, false, 3000, 0},
		{"spread", 500, 1 << 14, false, false, 3000, 0},
	} {
		recs := withSources(newGen(r.Uint64()).window(nil, tc.rows, t0, "x"), tc.hosts, tc.step, r)
		b, _ := e.encode(nil, recs)
		h, err := parseHeader(b, true)
		if err != nil {
			t.Fatal(err)
		}
		enc, f := h.cols[cSrcAddr].enc, &h.blooms[bloomSrcAddr]
		if got := enc == encADictS && f.k == asetKind; got != tc.set {
			t.Fatalf("%s: encoding %d, filter kind %d; want a set %v", tc.name, enc, f.k, tc.set)
		}
		if tc.set {
			_, _, _, l, _, m6, _ := asetWords(f.words)
			if (l == asetBitmap) != tc.bitmap || m6 == 0 {
				t.Errorf("%s: L %d (bitmap %v), IPv6 filter words %d", tc.name, l, tc.bitmap, m6)
			}
		}
		c := readSpan(t, b, ColSrcAddr)
		in := map[[16]byte]bool{}
		for i := range recs {
			if c.SrcAddr[i] != recs[i].Key.SrcAddr {
				t.Fatalf("%s row %d: %v, want %v", tc.name, i, c.SrcAddr[i], recs[i].Key.SrcAddr)
			}
			in[recs[i].Key.SrcAddr] = true
		}
		c = readSpan(t, b, ColSrcAddrIdx)
		for i := range recs {
			if c.SrcDict[c.SrcIdx[i]] != recs[i].Key.SrcAddr {
				t.Fatalf("%s row %d: dictionary form differs", tc.name, i)
			}
		}
		bi := BlockInfo{h: h}
		for a := range in {
			if !bi.MayContainSrc(a) || !bi.MayContainAddr(a) {
				t.Fatalf("%s: %v written, MayContainSrc false", tc.name, a)
			}
		}
		if !tc.set {
			continue
		}
		falsePos := 0
		for x := uint32(10<<24 | 1<<16 - 100); x < 10<<24|1<<16+uint32(tc.hosts*tc.step)+100; x++ {
			var a [16]byte
			flow.SetAddr4(&a, []byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)})
			if !in[a] && bi.MayContainSrc(a) {
				falsePos++
			}
		}
		if falsePos != 0 {
			t.Errorf("%s: %d IPv4 hosts not written answered yes: the set is not exact", tc.name, falsePos)
		}
	}
}

// TestAddrSetMalformed: set filters whose fields do not add up are
// refused when the header is parsed (so lookups never index past them),
// sets are refused where the version has none, and a dictionary whose
// entries disagree with its set is a malformed stream.
func TestAddrSetMalformed(t *testing.T) {
	e := newTestEncoder(t)
	r := rand.New(rand.NewPCG(13, 14))
	recs := withSources(newGen(1).window(nil, 2000, t0, "x"), 400, 2, r)
	b, _ := e.encode(nil, recs)
	h, err := parseHeader(b, true)
	if err != nil {
		t.Fatal(err)
	}
	f := &h.blooms[bloomSrcAddr]
	if f.k != asetKind {
		t.Fatal("no set")
	}
	enc := func(w []uint64) []byte {
		p := []byte{asetKind, 0, 0, 0}
		p = binary.LittleEndian.AppendUint32(p, uint32(len(w)))
		for _, x := range w {
			p = binary.LittleEndian.AppendUint64(p, x)
		}
		return p
	}
	var got bloom
	if n, ok := parseBloom(enc(f.words), &got, true, false); !ok || n != 8+8*len(f.words) {
		t.Fatal("the encoder's set does not parse")
	}
	if _, ok := parseBloom(enc(f.words), &got, false, false); ok {
		t.Error("a set parsed where the version has none")
	}
	for name, mod := range map[string]func(w []uint64){
		"one value more": func(w []uint64) { w[0]++ },
		"a bit cleared": func(w []uint64) {
			_, _, _, _, setW, _, _ := asetWords(w)
			w[asetHead+setW-1] &= w[asetHead+setW-1] - 1 // the set's last word holds its largest value
		},
		"hi under lo":  func(w []uint64) { w[2] = 0 },
		"L of 40":      func(w []uint64) { w[1] = w[1]&^0xff | 40 },
		"bloom words":  func(w []uint64) { w[1] += 1 << 32 },
		"no hash":      func(w []uint64) { w[1] &^= 0xff00 },
		"empty":        func(w []uint64) { w[0] &^= 0xffffffff },
		"span of 2^32": func(w []uint64) { w[0] &^= 0xffffffff << 32; w[2] = math.MaxUint32 },
	} {
		w := slices.Clone(f.words)
		mod(w)
		if _, ok := parseBloom(enc(w), &got, true, false); ok {
			t.Errorf("%s: parsed", name)
		}
	}
	st := b[h.cols[cSrcAddr].off : h.cols[cSrcAddr].off+h.cols[cSrcAddr].slen]
	var sd segDecoder
	raw, err := sd.decode(nil, st, int(h.cols[cSrcAddr].rlen))
	if h.cols[cSrcAddr].comp != compSeg || err != nil {
		t.Fatalf("comp %d: %v", h.cols[cSrcAddr].comp, err)
	}
	var buf, dict [][16]byte
	ix := make([]uint32, h.rows)
	if err := decodeAddrsSet(&buf, &dict, ix, f, raw, h.rows); err != nil {
		t.Fatal(err)
	}
	other := &h.blooms[bloomDstAddr]
	for name, x := range map[string]struct {
		st  []byte
		set *bloom
	}{
		"no set":         {raw, nil},
		"a bloom filter": {raw, &bloom{k: 5, words: make([]uint64, 4)}},
		"another set":    {raw, other},
		"short":          {raw[:len(raw)-1], f},
		"n6 past size":   {slices.Concat(raw[:5], []byte{255, 255, 0, 0}, raw[9:]), f},
	} {
		if err := decodeAddrsSet(&buf, &dict, ix, x.set, x.st, h.rows); !errors.Is(err, errBadStream) {
			t.Errorf("%s: %v, want malformed", name, err)
		}
	}
}

// FuzzAddrSet feeds arbitrary filter words and dictionary streams to the
// set parser, lookup and dictionary decoder: never a panic, and a lookup
// only on a set that parsed.
func FuzzAddrSet(f *testing.F) {
	e := newTestEncoder(f)
	r := rand.New(rand.NewPCG(15, 16))
	for _, step := range []int{1, 5} {
		recs := withSources(newGen(2).window(nil, 200, t0, "x"), 60, step, r)
		b, _ := e.encode(nil, recs)
		h, err := parseHeader(b, true)
		if err != nil {
			f.Fatal(err)
		}
		fl := &h.blooms[bloomSrcAddr]
		if fl.k != asetKind {
			f.Fatalf("step %d: no set", step)
		}
		p := fl.appendTo(nil)
		c := h.cols[cSrcAddr]
		raw, err := new(segDecoder).decode(nil, b[c.off:c.off+c.slen], int(c.rlen))
		if c.comp == compRaw {
			raw, err = b[c.off:c.off+c.slen], nil
		}
		if err != nil {
			f.Fatal(err)
		}
		f.Add(p, raw, uint16(h.rows), uint32(0x0a010005))
	}
	// Format 12's classes past one index byte (2 for the 256 most used
	// entries, 0 for the rest), and format 11's (the entries' rows, the
	// golden block's source set).
	var at addrTable
	var fl bloom
	var addrs [][16]byte
	for k := range 300 {
		for range 1 + k%3 {
			addrs = append(addrs, v4(10, 1, byte(k>>8), byte(k)))
		}
	}
	if st, enc := at.encodeAddrs(nil, addrs, &fl); enc == encADictS {
		f.Add(fl.appendTo(nil), st, uint16(len(addrs)), uint32(0x0a010105))
	} else {
		f.Fatalf("300 sources: encoding %d", enc)
	}
	gb := readGolden(f, "block-v11.bin")
	if h, err := parseHeader(gb, true); err == nil && h.cols[cSrcAddr].enc == encADictS {
		c := h.cols[cSrcAddr]
		raw, err := new(segDecoder).decode(nil, gb[c.off:c.off+c.slen], int(c.rlen))
		if c.comp == compRaw {
			raw, err = gb[c.off:c.off+c.slen], nil
		}
		if err != nil {
			f.Fatal(err)
		}
		f.Add(h.blooms[bloomSrcAddr].appendTo(nil), raw, uint16(h.rows), uint32(0x0a000001))
	} else {
		f.Fatalf("block-v11.bin: %v, no source set", err)
	}
	f.Fuzz(func(t *testing.T, p, st []byte, rows uint16, x uint32) {
		if len(p)+len(st) > maxFuzzInput {
			return
		}
		var fl bloom
		if _, ok := parseBloom(p, &fl, true, false); !ok {
			return
		}
		var a [16]byte
		flow.SetAddr4(&a, []byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)})
		fl.hasAddr(&a)
		fl.hasAddr(&[16]byte{0x20, 1})
		var buf, dict [][16]byte
		n := int(rows)
		ix := make([]uint32, n)
		if err := decodeAddrsSet(&buf, &dict, ix, &fl, st, n); err == nil {
			for _, i := range ix {
				if int(i) >= len(dict) {
					t.Fatalf("index %d of %d entries", i, len(dict))
				}
			}
		}
	})
}

// TestFuzzSeedsV9: the fuzz targets start from blocks that use every
// coding versions 9 and 10 added (so fuzzing reaches their decoders).
func TestFuzzSeedsV9(t *testing.T) {
	var set, adicts, tuple, ratio, deltau, nopkt bool
	for _, b := range fuzzSeeds(t) {
		h, err := parseHeader(b, true)
		if err != nil {
			t.Fatal(err)
		}
		set = set || h.blooms[bloomSrcAddr].k == asetKind
		adicts = adicts || h.cols[cSrcAddr].enc == encADictS
		nopkt = nopkt || h.cols[cRevBytes].flags&flagNoPkt != 0
		tuple = tuple || h.cols[cDstPort].enc == encTuple
		ratio = ratio || h.cols[cRevPackets].flags&flagRatio != 0
		deltau = deltau || h.cols[cStart].enc == encDeltaU
	}
	if !set || !adicts || !tuple || !ratio || !deltau || !nopkt {
		t.Fatalf("set %v, adicts %v, tuple %v, ratio %v, deltau %v, nopkt %v: a version 9 or 10 coding has no seed",
			set, adicts, tuple, ratio, deltau, nopkt)
	}
}

// TestRatioOnePacket: a row of one packet and no answer is stored with
// ratio 1 (floor(1/2) = 0 too) when the block's other rows use 1 more than
// 0, so it adds no symbol; with most rows unanswered it keeps 0. Both
// read back exact.
func TestRatioOnePacket(t *testing.T) {
	e := newTestEncoder(t)
	for _, tc := range []struct {
		name     string
		silent   int    // every silent-th row of more packets has no answer
		wantZero bool   // ratio 0 stored for the one-packet rows
		ratios   string // for the error message
	}{
		{"answered", 1 << 30, false, "1, 2, 3"},
		{"half unanswered", 2, true, "0 most"},
	} {
		recs := newGen(31).window(nil, 600, t0, "x")
		for i := range recs {
			r := &recs[i]
			r.Packets = uint64(2 + i%9)
			if i%5 == 0 {
				r.Packets = 1
			}
			r.RevPackets = r.Packets * uint64(1+i%3) / 2
			if r.Packets == 1 || i%tc.silent == 0 {
				r.RevPackets = 0
			}
			r.RevBytes = r.RevPackets * 100
		}
		b, h := e.encode(nil, recs)
		if h.cols[cRevPackets].flags&flagRatio == 0 {
			t.Fatalf("%s: no ratio", tc.name)
		}
		var d decoder
		var buf []uint64
		v, err := d.plain(h, b, 0, cRevPackets, &buf, true)
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range v {
			if recs[i].Packets == 1 && (x&0xff == 0) != tc.wantZero {
				t.Fatalf("%s row %d: ratio %d stored, the others use %s", tc.name, i, x&0xff, tc.ratios)
			}
		}
		c := readSpan(t, b, ColRevPackets)
		for i := range recs {
			if c.RevPackets[i] != recs[i].RevPackets {
				t.Fatalf("%s row %d: %d reverse packets, want %d", tc.name, i, c.RevPackets[i], recs[i].RevPackets)
			}
		}
	}
}
