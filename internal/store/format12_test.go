package store

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// setClasses encodes addrs (rows) as an address set dictionary and
// returns the stream's class bytes (in stored order) and the stream.
func setClasses(t *testing.T, addrs [][16]byte) ([]uint8, []byte, *bloom) {
	t.Helper()
	var at addrTable
	var bl bloom
	st, enc := at.encodeAddrs(nil, addrs, &bl)
	if enc != encADictS {
		t.Fatalf("encoding %d, want adicts", enc)
	}
	size := int(binary.LittleEndian.Uint32(st[0:4]))
	return slices.Clone(st[9 : 9+size]), st, &bl
}

// TestAddrSetClasses: the writer's classes are 2 for the 256 most used
// entries (ties in stored order, the set's ascending), 1 for the next
// 65,280 and 0 for the rest, and the rows decode back.
func TestAddrSetClasses(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		name     string
		distinct int
		want     [3]int // entries of class 0, 1, 2
	}{
		{"one group", 200, [3]int{0, 0, 200}},
		{"two groups", 3000, [3]int{0, 3000 - 256, 256}},
		{"three groups", 70_000, [3]int{70_000 - 65536, 65536 - 256, 256}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Entry k of the pool (10.x.y.z, k ascending) is used
			// 1 + (k*7919)%5 times, 600 when k%97 == 0: many ties.
			use := make([]int, tc.distinct)
			var addrs [][16]byte
			for k := range use {
				use[k] = 1 + (k*7919)%5
				if k%97 == 0 {
					use[k] = 600
				}
				for range use[k] {
					addrs = append(addrs, v4(10, byte(k>>16), byte(k>>8), byte(k)))
				}
			}
			r.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
			cls, st, bl := setClasses(t, addrs)
			if len(cls) != tc.distinct {
				t.Fatalf("%d classes for %d entries", len(cls), tc.distinct)
			}
			var got [3]int
			for _, c := range cls {
				if c > 2 {
					t.Fatalf("class %d", c)
				}
				got[c]++
			}
			if got != tc.want {
				t.Fatalf("classes 0, 1, 2: %v entries, want %v", got, tc.want)
			}
			// Every entry of a higher class is used at least as often as
			// any of a lower one, and at the boundary (equal use) the
			// stored order decides: the earlier entry is in.
			order := make([]int, len(cls))
			for k := range order {
				order[k] = k
			}
			slices.SortStableFunc(order, func(a, b int) int { return min(use[b], 255) - min(use[a], 255) })
			for p, k := range order {
				want := uint8(0)
				switch {
				case p < 256:
					want = 2
				case p < 65536:
					want = 1
				}
				if cls[k] != want {
					t.Fatalf("entry %d (used %d, %d-th most): class %d, want %d", k, use[k], p, cls[k], want)
				}
			}
			var buf, dict [][16]byte
			ix := make([]uint32, len(addrs))
			if err := decodeAddrsSet(&buf, &dict, ix, bl, st, len(addrs)); err != nil {
				t.Fatal(err)
			}
			for i, a := range addrs {
				if dict[ix[i]] != a {
					t.Fatalf("row %d: %v, want %v", i, dict[ix[i]], a)
				}
			}
		})
	}
}

// TestAddrSetClassesLie: the classes only order the dictionary, so any
// class bytes decode (to the same addresses, in another order: no row
// reads past the dictionary); a changed class byte in a block is damage
// its column CRC catches.
func TestAddrSetClassesLie(t *testing.T) {
	var addrs [][16]byte
	for k := range 2000 {
		for range 1 + k%3 {
			addrs = append(addrs, v4(10, 1, byte(k>>8), byte(k)))
		}
	}
	cls, st, bl := setClasses(t, addrs)
	r := rand.New(rand.NewPCG(5, 6))
	for range 20 {
		lie := slices.Clone(st)
		for j := range cls {
			lie[9+j] = byte(r.IntN(256))
		}
		var buf, dict [][16]byte
		ix := make([]uint32, len(addrs))
		if err := decodeAddrsSet(&buf, &dict, ix, bl, lie, len(addrs)); err != nil {
			t.Fatal(err)
		}
		seen := map[[16]byte]bool{}
		for _, a := range dict {
			seen[a] = true
		}
		for i := range addrs {
			if !bl.hasAddr(&dict[ix[i]]) {
				t.Fatalf("row %d decodes to %v, not in the block's set", i, dict[ix[i]])
			}
		}
		if len(seen) != len(cls) {
			t.Fatalf("%d distinct entries, want %d", len(seen), len(cls))
		}
	}
	// In a block: a class byte flipped is caught.
	recs := baseRecs(len(addrs))
	for i := range recs {
		recs[i].Key.SrcAddr = addrs[i]
	}
	b, h := newTestEncoder(t).encode(nil, recs)
	c := h.cols[cSrcAddr]
	if c.enc != encADictS || c.comp != compRaw && c.comp != compSeg {
		t.Fatalf("SrcAddr encoding %d, compression %d", c.enc, c.comp)
	}
	b[c.off+c.slen/2] ^= 0x10
	var cols Columns
	if err := decodeBlock(b, true, &cols); !errors.Is(err, errCorruptBlock) && !errors.Is(err, errBadStream) {
		t.Fatalf("a changed SrcAddr byte: %v", err)
	}
}

// portsBitmap is the bucket bitmap of ports.
func portsBitmap(ports []uint16) bloom {
	var b bloom
	b.initPorts(maxPortBloom + 1)
	for _, p := range ports {
		b.addPort(p)
	}
	return b
}

// TestPortRuns: a bucket bitmap of few runs is stored as its runs, which
// answer every port as the bitmap does, in a block too; one of many runs
// stays a bitmap.
func TestPortRuns(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ports func(i int) uint16
		runs  bool
	}{
		{"icmp and ephemeral", func(i int) uint16 {
			if i%50 == 0 {
				return 0
			}
			return uint16(32768 + i*7%28232)
		}, true},
		{"whole range", func(i int) uint16 { return uint16(i * 31) }, true},
		{"30 runs", func(i int) uint16 { return uint16(i%30*2048 + i/30) }, true},
		{"31 runs: bitmap", func(i int) uint16 { return uint16(i%31*2048 + i/31) }, false},
		{"every other bucket", func(i int) uint16 { return uint16(i%512*128 + i/512) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := baseRecs(maxPortBloom * 2)
			ports := make([]uint16, len(recs))
			for i := range recs {
				ports[i] = tc.ports(i)
				recs[i].Key.SrcPort = ports[i]
				recs[i].Key.DstPort = ports[i]
				recs[i].Key.Proto = 17
			}
			want := portsBitmap(ports)
			var got bloom
			got.initPorts(maxPortBloom + 1)
			for _, p := range ports {
				got.addPort(p)
			}
			got.runPorts()
			if (got.k == portRunsKind) != tc.runs {
				t.Fatalf("kind %d, %d words", got.k, len(got.words))
			}
			roundTrip(t, newTestEncoder(t), recs)
			blk, _ := newTestEncoder(t).encode(nil, recs)
			h, err := parseHeader(blk, true)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []int{bloomSrcPort, bloomDstPort} {
				if hb := h.blooms[id]; hb.k != got.k || !slices.Equal(hb.words, got.words) {
					t.Fatalf("filter %d: kind %d, %d words; want kind %d, %d words", id, hb.k, len(hb.words), got.k, len(got.words))
				}
			}
			bi := BlockInfo{h: h}
			lo, hi := slices.Min(ports), slices.Max(ports)
			for p := range 65536 {
				w := uint16(p) >= lo && uint16(p) <= hi && want.hasPort(uint16(p))
				if got.hasPort(uint16(p)) != want.hasPort(uint16(p)) || bi.MayContainSrcPort(uint16(p)) != w || bi.MayContainDstPort(uint16(p)) != w {
					t.Fatalf("port %d: runs %v, block %v/%v, bitmap %v", p, got.hasPort(uint16(p)),
						bi.MayContainSrcPort(uint16(p)), bi.MayContainDstPort(uint16(p)), w)
				}
			}
		})
	}
}

// appendFilter is a filter's header bytes and words.
func appendFilter(k uint8, w []uint64) []byte {
	return (&bloom{k: k, words: w}).appendTo(nil)
}

// TestPortRunsMalformed: port runs parse only in a version 12 port
// filter, and only as runPorts writes them.
func TestPortRunsMalformed(t *testing.T) {
	run := func(first, last uint32) uint32 { return first | last<<16 }
	good := []uint64{uint64(run(0, 0)) | uint64(run(512, 953))<<32, uint64(run(1000, 1023)) | portRunPad<<32}
	var b bloom
	if n, ok := parseBloom(appendFilter(portRunsKind, good), &b, false, true); !ok || n != 8+16 || b.k != portRunsKind {
		t.Fatalf("good runs: %d, %v", n, ok)
	}
	if _, ok := parseBloom(appendFilter(portRunsKind, good), &b, false, false); ok {
		t.Error("runs parsed where the version or filter has none")
	}
	if _, ok := parseBloom(appendFilter(portRunsKind, good), &b, true, false); ok {
		t.Error("runs parsed as an address filter")
	}
	for name, w := range map[string][]uint64{
		"no words":       {},
		"16 words":       make([]uint64, portBucketWords),
		"overlap":        {uint64(run(0, 10)) | uint64(run(10, 20))<<32},
		"adjacent":       {uint64(run(0, 10)) | uint64(run(11, 20))<<32},
		"descending":     {uint64(run(30, 40)) | uint64(run(0, 20))<<32},
		"last past 1023": {uint64(run(0, 1024)) | portRunPad<<32},
		"first > last":   {uint64(run(9, 8)) | portRunPad<<32},
		"pad first":      {portRunPad | uint64(run(0, 1))<<32},
		"pad inside":     {uint64(run(0, 1)) | portRunPad<<32, uint64(run(5, 6)) | portRunPad<<32},
	} {
		if _, ok := parseBloom(appendFilter(portRunsKind, w), &b, false, true); ok {
			t.Errorf("%s: parsed", name)
		}
	}
	cut := appendFilter(portRunsKind, good)
	if _, ok := parseBloom(cut[:len(cut)-1], &b, false, true); ok {
		t.Error("a cut filter parsed")
	}
	// In a block header: a version 11 block with runs is corrupt.
	recs := baseRecs(maxPortBloom * 2)
	for i := range recs {
		recs[i].Key.SrcPort = uint16(40000 + i)
	}
	blk, _ := newTestEncoder(t).encode(nil, recs)
	if h, err := parseHeader(blk, true); err != nil || h.blooms[bloomSrcPort].k != portRunsKind {
		t.Fatalf("SrcPort filter: %v", err)
	}
	blk[12] = 11
	if _, err := parseHeader(blk, false); !errors.Is(err, errCorruptBlock) {
		t.Fatalf("version 11 with port runs: %v", err)
	}
}

// FuzzPortFilter: any bytes parsed as a version 12 port filter either
// fail or answer every port as the bucket bitmap of their runs would,
// without panicking.
func FuzzPortFilter(f *testing.F) {
	for _, ports := range [][]uint16{{0, 32768, 40000, 60999}, {1, 2, 3, 65535}, {64, 128, 4096}} {
		b := portsBitmap(ports)
		f.Add(b.appendTo(nil), uint16(40000))
		b.runPorts()
		f.Add(b.appendTo(nil), uint16(1))
	}
	f.Fuzz(func(t *testing.T, p []byte, port uint16) {
		if len(p) > maxFuzzInput {
			return
		}
		var b bloom
		if _, ok := parseBloom(p, &b, false, true); !ok || b.k != portRunsKind {
			return
		}
		bm := bloom{words: make([]uint64, portBucketWords)}
		for _, x := range b.words {
			for _, r := range [2]uint32{uint32(x), uint32(x >> 32)} {
				for q := r & 0xffff; r != portRunPad && q <= r>>16; q++ {
					bm.words[q/64] |= 1 << (q % 64)
				}
			}
		}
		if b.hasPort(port) != bm.hasPort(port) {
			t.Fatalf("port %d: runs say %v, their bitmap %v", port, b.hasPort(port), bm.hasPort(port))
		}
		var again bloom
		again.k, again.words = 0, slices.Clone(bm.words)
		if again.runPorts(); again.k != portRunsKind || !slices.Equal(again.words, b.words) {
			t.Fatal("runs that parse are not what the writer makes of their bitmap")
		}
	})
}
