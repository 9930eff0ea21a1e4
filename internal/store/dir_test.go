package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// walkDirV11 reads a version 11 block's directory byte by byte as FORMAT
// in doc.go says (apart from parseDirV11): each column's entry's offset
// in b and its fields, offsets absolute.
func walkDirV11(t *testing.T, b []byte) (pos map[int]int, ent map[int]colMeta) {
	t.Helper()
	le := binary.LittleEndian
	if b[12] < dirV11 {
		t.Fatalf("block format %d, want 11 or later (the varint directory)", b[12])
	}
	hl := int(le.Uint32(b[8:]))
	omit := uint64(le.Uint32(b[20:])) | uint64(le.Uint16(b[14:]))<<32
	minStart := le.Uint64(b[24:])
	pos, ent = map[int]int{}, map[int]colMeta{}
	i := 40
	uv := func() uint64 {
		x, n := binary.Uvarint(b[i:])
		if n <= 0 {
			t.Fatalf("bad uvarint at %d", i)
		}
		i += n
		return x
	}
	for id := range int(b[13]) {
		if omit&(1<<id) != 0 {
			continue
		}
		pos[id] = i
		c := colMeta{enc: b[i], comp: b[i+1], flags: b[i+2]}
		i += 3
		c.off = uint32(uv()) + uint32(hl)
		c.slen = uint32(uv())
		c.rlen = c.slen
		if c.comp != 0 {
			c.rlen = uint32(uv())
		}
		if c.slen != 0 {
			c.ck = le.Uint32(b[i:])
			i += 4
		}
		var base uint64
		if id == cStart || id == cEnd {
			base = minStart
		}
		c.min = unzigzag(uv()) + base
		c.max = c.min + unzigzag(uv())
		ent[id] = c
	}
	return pos, ent
}

// reheader rewrites block b's header after mod changed its parsed fields
// (offsets as the parse left them: absolute), the payload unchanged.
func reheader(t *testing.T, b []byte, mod func(h *blockHeader)) []byte {
	t.Helper()
	h, err := parseHeader(b, true)
	if err != nil {
		t.Fatal(err)
	}
	payload := b[h.headerLen:h.blockLen]
	for i := range h.cols {
		h.cols[i].off -= uint32(h.headerLen)
	}
	mod(h)
	return append(appendHeader(nil, h, &h.blooms, len(payload)), payload...)
}

// TestDirV11: the directory of a fresh block reads back as its encoder
// wrote it, byte by byte as FORMAT says, smaller than version 10's; every
// column's CRC covers its stored bytes.
func TestDirV11(t *testing.T) {
	recs := newGen(21).window(nil, 2000, t0, "x")
	b, h := newTestEncoder(t).encode(nil, recs)
	_, ent := walkDirV11(t, b)
	if len(ent) != 18 {
		t.Fatalf("%d directory entries, want 18", len(ent))
	}
	h2, err := parseHeader(b, true)
	if err != nil {
		t.Fatal(err)
	}
	for id, c := range ent {
		if c != h.cols[id] || c != h2.cols[id] {
			t.Errorf("column %d: walked %+v, encoder %+v, parsed %+v", id, c, h.cols[id], h2.cols[id])
		}
		if crc32.Checksum(b[c.off:c.off+c.slen], castagnoli) != c.ck {
			t.Errorf("column %d: CRC", id)
		}
	}
	if h.cols[cStart].min != uint64(h.minStart) || h.cols[cEnd].max != uint64(h.maxEnd) {
		t.Errorf("Start min %d End max %d, header %d %d", h.cols[cStart].min, h.cols[cEnd].max, h.minStart, h.maxEnd)
	}
	old := 40 + 18*36 + 4
	for _, f := range h2.blooms {
		old += 8 + 8*len(f.words)
	}
	if h.headerLen > old-18*36/2 {
		t.Errorf("header %d bytes, version 10's %d", h.headerLen, old)
	}
	// Signed and wrapping min and max survive: negative Starts, a column
	// whose min is past its max as uint64.
	x := reheader(t, b, func(h *blockHeader) {
		h.minStart = -5
		h.cols[cStart].min, h.cols[cStart].max = 1<<63+3, 7
		h.cols[cVLAN].min, h.cols[cVLAN].max = 1<<64-1, 0
	})
	h3, err := parseHeader(x, true)
	if err != nil || h3.minStart != -5 || h3.cols[cStart].min != 1<<63+3 || h3.cols[cStart].max != 7 || h3.cols[cVLAN].min != 1<<64-1 || h3.cols[cVLAN].max != 0 {
		t.Fatalf("%v: %+v %+v", err, h3.cols[cStart], h3.cols[cVLAN])
	}
}

// TestDirV11Malformed: a version 11 directory cut anywhere, with a
// varint too long, an offset or length past the block, or an offset over
// 32 bits is a damaged header (never a panic or a misread).
func TestDirV11Malformed(t *testing.T) {
	recs := newGen(22).window(nil, 700, t0, "x")
	b, h := newTestEncoder(t).encode(nil, recs)
	pos, _ := walkDirV11(t, b)
	seal := func(x []byte, hl int) []byte {
		binary.LittleEndian.PutUint32(x[8:], uint32(hl))
		binary.LittleEndian.PutUint32(x[hl-4:], crc32.Checksum(x[:hl-4], castagnoli))
		return x
	}
	bad := map[string][]byte{}
	// The header cut inside the directory (the header's CRC right after).
	end := pos[cEnd] + 3
	for cut := 41; cut < end; cut += 3 {
		x := slices.Clone(b[:cut])
		x = append(x, b[h.headerLen-4:]...)
		bad[fmt.Sprint("cut at ", cut)] = seal(x, cut+4)
	}
	mk := func(name string, f func(h *blockHeader)) {
		bad[name] = reheader(t, b, f)
	}
	mk("offset past the block", func(h *blockHeader) { h.cols[cPackets].off = uint32(h.blockLen) })
	mk("length past the block", func(h *blockHeader) { h.cols[cBytes].slen += 1 << 20 })
	mk("compression 3", func(h *blockHeader) { h.cols[cVLAN].comp = 3 })
	mk("offset over 32 bits", func(h *blockHeader) {})
	{
		x := bad["offset over 32 bits"]
		p, _ := walkDirV11(t, x)
		i := p[cSrcAddr] + 3
		// Replace the offset's uvarint with one of 2^32 + its value.
		_, n := binary.Uvarint(x[i:])
		y := slices.Concat(x[:i], binary.AppendUvarint(nil, 1<<32), x[i+n:])
		hl := int(binary.LittleEndian.Uint32(y[8:])) + 5 - n
		bad["offset over 32 bits"] = seal(y, hl)
	}
	{
		x := slices.Clone(b)
		i := pos[cSrcPort] + 3
		for j := range 10 { // an 11-byte varint: too long
			x[i+j] = 0x80
		}
		bad["varint too long"] = seal(x, h.headerLen)
	}
	for name, x := range bad {
		if _, err := parseHeader(x, true); !errors.Is(err, errCorruptBlock) {
			t.Errorf("%s: %v, want a damaged header", name, err)
		}
		var c Columns
		if err := decodeBlock(x, true, &c); !errors.Is(err, errCorruptBlock) {
			t.Errorf("%s: decode %v, want corrupt", name, err)
		}
	}
}

// asVersion rewrites block b (version 11 or later) with version ver's
// fixed header and 36-byte directory (versions 6 to 10), the payload
// unchanged and port runs (version 12) as the bucket bitmap they stand
// for: what a weir of that version would have written for the same
// streams, for tests of what an older format may not hold.
func asVersion(t *testing.T, b []byte, ver byte) []byte {
	t.Helper()
	h, err := parseHeader(b, true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range h.blooms {
		if f := &h.blooms[i]; f.k == portRunsKind {
			bm := make([]uint64, portBucketWords)
			for q := range portBucketWords * 64 {
				if f.hasPort(uint16(q << 6)) {
					bm[q/64] |= 1 << (q % 64)
				}
			}
			f.k, f.words = 0, bm
		}
	}
	le := binary.LittleEndian
	payload := b[h.headerLen:h.blockLen]
	hl := 40 + 4
	for i := range h.ncols {
		if h.omit&(1<<i) == 0 {
			hl += dirEntry
		}
	}
	for _, f := range h.blooms {
		hl += 8 + 8*len(f.words)
	}
	x := slices.Clone(b[:40])
	x[12] = ver
	le.PutUint32(x[4:], uint32(hl+len(payload)))
	le.PutUint32(x[8:], uint32(hl))
	for i := range h.ncols {
		if h.omit&(1<<i) != 0 {
			continue
		}
		c := h.cols[i]
		x = append(x, c.enc, c.comp, c.flags, 0)
		x = le.AppendUint32(x, c.off-uint32(h.headerLen)+uint32(hl))
		x = le.AppendUint32(x, c.slen)
		x = le.AppendUint32(x, c.rlen)
		x = le.AppendUint32(x, c.ck)
		x = le.AppendUint64(x, c.min)
		x = le.AppendUint64(x, c.max)
	}
	for i := range h.blooms {
		x = h.blooms[i].appendTo(x)
	}
	x = le.AppendUint32(x, crc32.Checksum(x, castagnoli))
	return append(x, payload...)
}

// TestDirV10Layout: a block rewritten in version 10's layout (the
// encodings format 11 adds aside) reads back the same columns as the
// version 11 block: both directories lead to the same streams.
func TestDirV10Layout(t *testing.T) {
	recs := newGen(23).window(nil, 1500, t0, "x")
	b, _ := newTestEncoder(t).encode(nil, noDictE(recs))
	x := asVersion(t, b, 10)
	var c1, c2 Columns
	if err := decodeBlock(b, true, &c1); err != nil {
		t.Fatal(err)
	}
	if err := decodeBlock(x, true, &c2); err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if c1.SrcAddr[i] != c2.SrcAddr[i] || c1.Packets[i] != c2.Packets[i] || c1.Bytes[i] != c2.Bytes[i] || c1.End[i] != c2.End[i] {
			t.Fatalf("row %d differs", i)
		}
	}
}

// noDictE gives recs few distinct ports and packet counts, none seen
// once: a block of them uses no encDictE (new in version 11), so it can
// be rewritten in version 10's layout.
func noDictE(recs []flow.Record) []flow.Record {
	for i := range recs {
		r := &recs[i]
		r.Packets, r.RevPackets = uint64(1+i%9), uint64(1+i%9)
		if r.Key.DstPort != 0 {
			r.Key.DstPort = commonPorts[i%3]
		}
	}
	return recs
}

// TestCheckDirV11: `weir store check` (Check) reads a store of format 11
// (and 12: the same directory) blocks as sound, and reports a block whose varint directory does not
// parse (its header CRC sealed over the damage) as damaged, the others
// read.
func TestCheckDirV11(t *testing.T) {
	f := newDamageFixture(t)
	e := f.x.entries[1]
	if v := f.dataB[e.off+12]; v < dirV11 {
		t.Fatalf("the fixture's block is format %d, want 11 or later", v)
	}
	rep, err := Check(f.dir, CheckOptions{})
	if err != nil || rep.DamagedBlocks != 0 || rep.NewerBlocks != 0 {
		t.Fatalf("sound store: %v, %+v", err, rep)
	}
	blk := slices.Clone(f.dataB[e.off : e.off+int64(e.blockLen)])
	pos, _ := walkDirV11(t, blk)
	for j := range 10 { // SrcPort's offset an 11-byte varint
		blk[pos[cSrcPort]+3+j] = 0x80
	}
	hl := binary.LittleEndian.Uint32(blk[8:])
	binary.LittleEndian.PutUint32(blk[hl-4:], crc32.Checksum(blk[:hl-4], castagnoli))
	b := slices.Concat(f.dataB[:e.off], blk, f.dataB[e.off+int64(e.blockLen):])
	if err := os.WriteFile(f.data, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var lines []string
	rep, err = Check(f.dir, CheckOptions{Problem: func(d Damage) { lines = append(lines, d.String()) }})
	if err != nil || rep.DamagedBlocks != 1 || rep.NewerBlocks != 0 || len(lines) == 0 {
		t.Fatalf("damaged directory: %v, %+v\n%s", err, rep, strings.Join(lines, "\n"))
	}
}
