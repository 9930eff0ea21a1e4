package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// segCases are streams for the segment coder: flat, skewed, constant,
// random and long (several chunks) planes.
func segCases() [][]byte {
	r := rand.New(rand.NewPCG(3, 4))
	flat := make([]byte, 3000)
	skew := make([]byte, 5000)
	long := make([]byte, 3*segChunk+17)
	for i := range flat {
		flat[i] = byte(r.Uint32())
	}
	for i := range skew {
		if r.IntN(20) == 0 {
			skew[i] = byte(r.IntN(4))
		}
	}
	for i := range long {
		long[i] = byte(r.NormFloat64() * 3)
	}
	return [][]byte{nil, {7}, bytes.Repeat([]byte{9}, 2000), flat, skew, long, append(append([]byte{}, skew...), flat...)}
}

// TestSegmentsRoundTrip: every stream, cut anywhere, decodes to itself;
// skewed and constant planes shrink; a wrong length or a damaged stream
// is an error, not a panic or a wrong result.
func TestSegmentsRoundTrip(t *testing.T) {
	var e segEncoder
	var d segDecoder
	for ci, st := range segCases() {
		for _, cuts := range [][]int{nil, {len(st) / 2}, {len(st) / 3, len(st) / 3, 2 * len(st) / 3}} {
			if len(st) == 0 {
				cuts = nil
			}
			enc := e.encode(nil, st, cuts)
			got, err := d.decode([]byte("x"), enc, len(st))
			if err != nil || !bytes.Equal(got[1:], st) || got[0] != 'x' {
				t.Fatalf("case %d cuts %v: %v, round trip differs", ci, cuts, err)
			}
			if _, err := d.decode(nil, enc, len(st)+1); err == nil {
				t.Errorf("case %d: decoded to a wrong length", ci)
			}
			if len(enc) > 0 {
				if got, err := d.decode(nil, enc[:len(enc)-1], len(st)); err == nil && bytes.Equal(got, st) {
					t.Errorf("case %d: truncated stream decoded", ci)
				}
			}
		}
	}
	cs := segCases()
	if n := len(e.encode(nil, cs[2], nil)); n > 8 {
		t.Errorf("constant plane of 2000 bytes coded in %d", n)
	}
	if n := len(e.encode(nil, cs[4], nil)); n > len(cs[4])/4 {
		t.Errorf("95%%-zero plane of %d bytes coded in %d", len(cs[4]), n)
	}
	if n := len(e.encode(nil, cs[3], nil)); n > len(cs[3])+8 {
		t.Errorf("random plane of %d bytes grew to %d", len(cs[3]), n)
	}
}

// FuzzSegments: arbitrary bytes never panic the segment decoder, and
// arbitrary data cut at an arbitrary point round-trips.
func FuzzSegments(f *testing.F) {
	var e segEncoder
	for _, st := range segCases()[:5] {
		f.Add(e.encode(nil, st, nil), uint16(len(st)), uint16(len(st)/2))
	}
	var d segDecoder
	f.Fuzz(func(t *testing.T, data []byte, rlen, cut uint16) {
		_, _ = d.decode(nil, data, int(rlen))
		var cuts []int
		if int(cut) < len(data) {
			cuts = []int{int(cut)}
		}
		enc := e.encode(nil, data, cuts)
		got, err := d.decode(nil, enc, len(data))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("round trip of %d bytes: %v", len(data), err)
		}
	})
}

// TestRadixSort: radixSort orders keys by the bits above lo and keeps the
// order of equal ones (the low bits are the row index).
func TestRadixSort(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 2, 100, radixSmall - 1, radixSmall, 5000} {
		for _, span := range []uint64{1, 7, 1 << 12, 1 << 40} {
			// The value bits as they come; with a digit all keys share
			// (the pass radixSort skips) in the middle; up to bit 63
			// (a dictionary's IPv6 entries); above a 32-bit entry number.
			for v, val := range []func() uint64{
				func() uint64 { return r.Uint64N(span) },
				func() uint64 { return r.Uint64N(span)&^(1<<11-1)<<11 | 5<<11 | r.Uint64N(8) },
				func() uint64 { return r.Uint64N(span) | uint64(r.IntN(2))<<(63-idxBits) },
			} {
				for _, lo := range []uint{idxBits, 32} {
					keys := make([]uint64, n)
					for i := range keys {
						keys[i] = val()<<lo | uint64(i)
					}
					want := slices.Clone(keys)
					slices.Sort(want) // the index bits make every key distinct: one order
					got := radixSort(keys, make([]uint64, n), lo)
					if !slices.Equal(got, want) {
						t.Fatalf("n %d span %d values %d lo %d: not sorted stably", n, span, v, lo)
					}
				}
			}
		}
	}
}

// TestBlockVersions: a block of an unknown version, a version-6 block
// relabelled as version 1, 2, 3, 4 or 5 (whose blocks have 18, 22, 31 or 41
// columns and a smaller omitted bitmap, or none), one whose column count is not its version's, or
// whose omitted bitmap names a column that may not be left out or does
// not exist, is refused as corrupt even with a valid header CRC, not
// misread. (Real version 1, 2 and 3 blocks are read: TestOldBlocks.)
func TestBlockVersions(t *testing.T) {
	e := newTestEncoder(t)
	recs := newGen(2).window(nil, 200, t0, "x")
	for i := range recs { // few services: a tuple dictionary
		if recs[i].Key.Proto != flow.ProtoICMP {
			recs[i].Key.DstPort = commonPorts[i%3]
		}
	}
	b, h := e.encode(nil, recs)
	var c Columns
	if err := decodeBlock(b, true, &c); err != nil || c.N != 200 {
		t.Fatalf("valid block: %v, %d rows", err, c.N)
	}
	if b[12] != blockVersion || b[13] != 42 {
		t.Fatalf("version %d with %d columns, want %d with 42", b[12], b[13], blockVersion)
	}
	if b := h.cols[cBytes].flags; b&flagPerPkt == 0 {
		t.Fatalf("Bytes flags %#x: the generator's bytes are whole packets, want per-packet", b)
	}
	if h.cols[cDstPort].enc != encTuple {
		t.Fatalf("DstPort encoding %d, want the service tuple (new in version 9)", h.cols[cDstPort].enc)
	}
	hl := h.headerLen
	relabel := func(version, cols byte) []byte {
		bad := slices.Clone(b)
		bad[12], bad[13] = version, cols
		binary.LittleEndian.PutUint32(bad[hl-4:], crc32.Checksum(bad[:hl-4], castagnoli))
		return bad
	}
	for _, v := range [][2]byte{{0, 41}, {1, 41}, {2, 41}, {3, 41}, {4, 41}, {blockVersion + 1, 41}, {3, 22}, {2, 18}, {4, 22}, {4, 31},
		{5, 31}, {5, 40}, {5, 42}, {5, 41}, {6, 41}, {6, 43}, {7, 41}, {7, 43}, {8, 41}, {8, 43},
		{9, 41}, {9, 43}, {10, 41}, {10, 43}, {10, 42}, // {10, 42}: version 10's directory has 36-byte entries
		{7, 42}, {8, 42}} { // {7, 42}: the block's per-packet Bytes flag is new in version 8; {8, 42}: its tuple in version 9
		if err := decodeBlock(relabel(v[0], v[1]), true, &c); !errors.Is(err, errCorruptBlock) {
			t.Errorf("version %d with %d columns: %v, want corrupt", v[0], v[1], err)
		}
	}
	omit := uint64(binary.LittleEndian.Uint32(b[20:])) | uint64(binary.LittleEndian.Uint16(b[14:]))<<32
	for _, bits := range []uint64{omit | 1<<cSrcPort, omit | 1<<cStart, omit | 1<<numCols, omit | 1<<47, omit &^ (1 << cZone),
		omit &^ (1 << cSvcGroup), omit &^ (1 << cNode)} {
		bad := slices.Clone(b)
		binary.LittleEndian.PutUint32(bad[20:], uint32(bits))
		binary.LittleEndian.PutUint16(bad[14:], uint16(bits>>32))
		binary.LittleEndian.PutUint32(bad[hl-4:], crc32.Checksum(bad[:hl-4], castagnoli))
		if err := decodeBlock(bad, true, &c); !errors.Is(err, errCorruptBlock) {
			t.Errorf("omitted bitmap %#x (valid %#x): %v, want corrupt", bits, omit, err)
		}
	}
}
