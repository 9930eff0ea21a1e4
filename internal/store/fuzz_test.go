package store

import (
	"bytes"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// maxFuzzInput bounds the inputs the fuzz targets look at. Go's
// minimizer tries every pair of cut points of a new input (quadratic in
// its length) until -fuzzminimizetime (60 s): with the multi-KB blocks
// this target used to start from, nearly every mutation of a fresh seed
// was new coverage that no cut preserves (a checksummed, offset-addressed
// format), so each one cost the whole minute and the fuzzer sat at 0
// execs/s. Seeds are now small blocks (under 1.5 KB) and larger inputs
// are passed over; large blocks are the unit tests' (golden blocks, the
// round trips).
const maxFuzzInput = 4 << 10

// fuzzSeeds are small blocks of every kind: 1 to 40 rows, every
// encoding and compression, drops, NAT, enrichment, a block storing only
// some sparse columns.
func fuzzSeeds(f testing.TB) [][]byte {
	e := newTestEncoder(f)
	g := newGen(1)
	var out [][]byte
	add := func(recs []flow.Record) {
		b, _ := e.encode(nil, recs)
		if len(b) > maxFuzzInput {
			f.Fatalf("seed of %d bytes", len(b))
		}
		out = append(out, b)
	}
	add(nil)
	for _, n := range []int{1, 7, 40} {
		add(g.window(nil, n, t0, "x"))
	}
	add(baseRecs(40)) // low entropy: compressed columns
	add(withDrops(g.window(nil, 30, t0, "x"), 7, 100))
	many := withDrops(baseRecs(30), 1, 0)
	for i := range many {
		many[i].DropReason = dropReasons[i%len(dropReasons)] + strings.Repeat("_", i)
	}
	add(many)
	add(withNAT(g.window(nil, 20, t0, "x"), 3))
	few := baseRecs(20)
	for i := range few {
		few[i].Zone, few[i].Rule = uint16(i), "r"
	}
	add(few)
	add(withEnrich(g.window(nil, 20, t0, "x"), 4))
	one := baseRecs(10)
	for i := range one {
		one[i].Service = &flow.Service{Group: strings.Repeat("g", 100+i)}
	}
	add(one)
	add(withNodes(g.window(nil, 20, t0, "x"), 3, 4)) // nodes: a dictionary with index planes
	// Version 9's codings: dense IPv4 sources (an address set and adicts),
	// a few services (a tuple), reverse packets a ratio of packets, and
	// sorted starts (deltau).
	v9 := baseRecs(40)
	for i := range v9 {
		r := &v9[i]
		flow.SetAddr4(&r.Key.SrcAddr, []byte{10, 0, 0, byte(i * 3 % 20)})
		r.Key.DstPort = commonPorts[i%3]
		r.Packets, r.RevPackets = uint64(1+i%7), uint64(1+i%7)*uint64(1+i%3)/2
		r.Bytes = r.Packets * 100
		r.Start += int64(i) * 1e6
		r.End = r.Start + 5
	}
	add(v9)
	// Version 11's encDictE: Packets from five common values, and 20
	// seen once (escapes).
	v11 := baseRecs(200)
	for i := range v11 {
		v11[i].Packets = uint64(2 + i%5)
		if i%10 == 0 {
			v11[i].Packets = 1000 + uint64(i)*77
		}
	}
	add(v11)
	return out
}

// FuzzReadBlock feeds arbitrary bytes to the block parser and decoders,
// with CRCs checked (the real path) and skipped (to reach the decoders).
// It must never panic; a block that passes its CRCs must decode.
func FuzzReadBlock(f *testing.F) {
	for _, b := range fuzzSeeds(f) {
		f.Add(b)
	}
	f.Add([]byte("WBK1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		var c Columns
		if err := decodeBlock(data, true, &c); err == nil {
			h, _ := parseHeader(data, true)
			if c.N != h.rows || len(c.SrcAddr) != h.rows || len(c.End) != h.rows || len(c.DropReason) != h.rows || len(c.Sampling) != h.rows ||
				len(c.NATSrcAddr) != h.rows || len(c.NATDstPort) != h.rows || len(c.Rule) != h.rows || len(c.Zone) != h.rows ||
				len(c.SrcWorkload) != h.rows || len(c.DstWorkload) != h.rows || len(c.Service) != h.rows || len(c.ServiceMatch) != h.rows {
				t.Fatalf("decoded %d rows, header says %d", c.N, h.rows)
			}
		}
		_ = decodeBlock(data, false, &c)
		// Split as a query's lazy read is (ReadFirst, then ReadMore): the
		// condition's columns, then the rest into the same Columns.
		if h, err := parseHeader(data, false); err == nil && h.blockLen <= len(data) {
			d := new(decoder)
			c.reset()
			first := ColDstPort | ColProto | ColStart
			if d.decodeCols(h, data[:h.blockLen], 0, first, &c, false) == nil {
				_ = d.decodeCols(h, data[:h.blockLen], 0, ColAll&^first, &c, false)
			}
		}
	})
}

// FuzzIndex feeds arbitrary bytes to the index parser: never a panic, and
// an index that parses writes back to one that parses the same.
func FuzzIndex(f *testing.F) {
	x := &index{epoch: 7, gen: 3, iface: "eth0"}
	f.Add(x.marshal())
	for _, e := range []indexEntryT{{0, 900, 700, 5, 1, 9}, {900, 1000, 800, 7, 2, 10}, {4096, 1000, 800, 7, 3, 11}} {
		x.entries = append(x.entries, e)
		x.dataLen = e.off + int64(e.blockLen)
		f.Add(x.marshal()) // versions 1, then 2 (a gap)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		x, err := parseIndex(data)
		if err != nil {
			return
		}
		y, err := parseIndex(x.marshal())
		if err != nil || y.epoch != x.epoch || y.gen != x.gen || y.dataLen != x.dataLen || y.iface != x.iface || len(y.entries) != len(x.entries) {
			t.Fatalf("index does not survive a round trip: %v", err)
		}
		for i := range x.entries {
			if x.entries[i] != y.entries[i] {
				t.Fatalf("entry %d: %+v, then %+v", i, x.entries[i], y.entries[i])
			}
		}
	})
}

// FuzzScan feeds arbitrary data files to the scanner that rebuilds an
// index and that 'weir store check' runs: never a panic; the blocks it
// keeps are in order, do not overlap, and each decodes; blocks and
// damaged stretches cover the file exactly once.
func FuzzScan(f *testing.F) {
	seeds := fuzzSeeds(f)
	f.Add(append(append([]byte(nil), seeds[1]...), seeds[2]...))
	f.Add(append(append(append([]byte(nil), seeds[1]...), "garbage"...), seeds[3]...))
	two := append(append([]byte(nil), seeds[2]...), seeds[1]...)
	f.Add(two[:len(two)-5])
	flipped := bytes.Clone(two)
	flipped[20] ^= 1
	f.Add(flipped)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 2*maxFuzzInput {
			return
		}
		sc := scanner{r: bytes.NewReader(data), size: int64(len(data)), decode: true}
		blocks, gaps := sc.scan()
		var at int64
		bi, gi := 0, 0
		for bi < len(blocks) || gi < len(gaps) {
			switch {
			case bi < len(blocks) && blocks[bi].off == at:
				b := blocks[bi]
				var c Columns
				if err := decodeBlock(data[b.off:b.off+int64(b.blockLen)], true, &c); err != nil || c.N != b.rows {
					t.Fatalf("kept block at %d does not decode: %v", b.off, err)
				}
				at += int64(b.blockLen)
				bi++
			case gi < len(gaps) && gaps[gi].off == at && gaps[gi].end > at:
				at = gaps[gi].end
				gi++
			default:
				t.Fatalf("offset %d: neither a block nor a gap starts here (blocks %v, gaps %v)", at, blocks, gaps)
			}
		}
		if at != int64(len(data)) {
			t.Fatalf("covered %d of %d bytes", at, len(data))
		}
	})
}

// FuzzColumn feeds one column's stored bytes, with any encoding,
// compression and row count, straight to the column decoders (no CRC,
// no block around it): small inputs that reach every decoder, and that
// the minimizer can shrink. It must never panic.
func FuzzColumn(f *testing.F) {
	for _, b := range fuzzSeeds(f) {
		h, err := parseHeader(b, true)
		if err != nil {
			f.Fatal(err)
		}
		for id := range numCols {
			if h.omit&(1<<uint(id)) != 0 {
				continue
			}
			c := h.cols[id]
			f.Add(uint8(id), c.enc, c.comp, c.flags, uint32(h.rows), c.rlen, b[c.off:c.off+c.slen])
		}
	}
	// An adictd column (blocks of a few rows have too few addresses for
	// it): the version 7 golden block's source addresses.
	gb := readGolden(f, "block-v7.bin")
	if h, err := parseHeader(gb, true); err == nil {
		c := h.cols[cSrcAddr]
		f.Add(uint8(cSrcAddr), c.enc, c.comp, c.flags, uint32(h.rows), c.rlen, gb[c.off:c.off+c.slen])
	}
	f.Fuzz(func(t *testing.T, id, enc, comp, flags uint8, rows, rlen uint32, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		h := &blockHeader{rows: int(rows % (1<<16 + 1)), ncols: numCols, blockLen: len(data)}
		col := int(id) % numCols
		h.omit = 1<<numCols - 1
		comp %= compSeg + 1
		rl := uint32(min(int64(rlen), maxRawLen(col, h.rows)))
		if comp == compRaw {
			rl = uint32(len(data))
		}
		ids := []int{col}
		if g := groupOf(col); g >= 0 { // a workload or service: its three columns share the bytes
			ids = []int{g, g + 1, g + 2}
		}
		for _, i := range ids {
			h.omit &^= 1 << uint(i)
			h.cols[i] = colMeta{enc: enc, comp: comp, flags: flags, slen: uint32(len(data)), rlen: rl}
		}
		var c Columns
		_ = new(decoder).decodeCols(h, data, 0, ColAll, &c, false)
	})
}

// FuzzIndexFile feeds arbitrary bytes to the index file parser (a base and
// the journal records after it): never a panic, and an index that parses
// rewritten whole parses to the same entries.
func FuzzIndexFile(f *testing.F) {
	x := &index{epoch: 7, gen: 3, iface: "eth0", entries: []indexEntryT{{0, 900, 700, 5, 1, 9}}, dataLen: 900}
	b := x.marshal()
	x.fileLen, x.crc = int64(len(b)), crc32.Checksum(b, castagnoli)
	f.Add(b)
	for _, e := range []indexEntryT{{900, 1000, 800, 7, 2, 10}, {4096, 1000, 800, 7, 3, 11}} {
		from := len(x.entries)
		x.gen++
		x.entries = append(x.entries, e)
		x.dataLen = e.off + int64(e.blockLen)
		rec := journalRecord(nil, x, from)
		b = append(b, rec...)
		x.fileLen, x.crc = int64(len(b)), crc32.Update(x.crc, castagnoli, rec)
		f.Add(b)
	}
	f.Add(b[:len(b)-3])
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		x, err := parseIndexFile(data)
		if err != nil {
			return
		}
		if x.fileLen != int64(len(data)) || x.crc != crc32.Checksum(data, castagnoli) {
			t.Fatalf("file length %d CRC %x, want %d %x", x.fileLen, x.crc, len(data), crc32.Checksum(data, castagnoli))
		}
		y, err := parseIndex(x.marshal())
		if err != nil || y.gen != x.gen || y.dataLen != x.dataLen || len(y.entries) != len(x.entries) {
			t.Fatalf("index does not survive a rewrite: %v", err)
		}
		for i := range x.entries {
			if x.entries[i] != y.entries[i] {
				t.Fatalf("entry %d: %+v, then %+v", i, x.entries[i], y.entries[i])
			}
		}
	})
}
