package store

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"

	"github.com/klauspost/compress/fse"
	"github.com/klauspost/compress/huff0"
)

// planeCuts appends to cuts the offsets in a column stream st (of n rows,
// encoded as enc) where one byte plane ends and the next begins, so each
// plane can be entropy-coded on its own: planes have very different byte
// distributions (a low byte is near-uniform, a high byte mostly zero) and
// one shared code for all of them wastes bits. A stream that does not
// parse gets no cuts (it is then compressed whole).
func planeCuts(cuts []int, enc uint8, st []byte, n int) []int {
	cut := func(off, w, size int) int {
		for j := 0; j < w; j++ {
			cuts = append(cuts, off)
			off += size
		}
		return off
	}
	start := len(cuts)
	end := -1
	switch enc {
	case encFOR, encDelta, encDeltaU:
		if len(st) >= 17 {
			end = cut(17, int(st[0]), n)
		}
	case encDict:
		if len(st) >= 14 {
			size := int(binary.LittleEndian.Uint32(st[1:5]))
			off := cut(14, int(st[5]), size)
			end = cut(off, int(st[0]), n)
		}
	case encDictE:
		end = dictECuts(cut, st, n)
	case encADict, encADictD:
		if len(st) >= 5 {
			size := int(binary.LittleEndian.Uint32(st[0:4]))
			if off, ok := addrCuts(&cuts, st, 5, size); ok {
				end = cut(off, int(st[4]), n)
			}
		}
	case encADictS:
		if len(st) >= 9 {
			off := cut(9, 1, int(binary.LittleEndian.Uint32(st[0:4])))
			off = cut(off, 16, int(binary.LittleEndian.Uint32(st[5:9])))
			end = cut(off, int(st[4]), n)
		}
	case encTuple:
		if len(st) >= 5 {
			off := cut(5, tupleEntry, int(binary.LittleEndian.Uint32(st[0:4])))
			end = cut(off, int(st[4]), n)
		}
	case encARaw:
		end, _ = addrCuts(&cuts, st, 0, n)
	case encSDict, encSDictL:
		end = strCuts(&cuts, enc, st, n)
	}
	if end != len(st) {
		return cuts[:start]
	}
	return cuts
}

// addrCuts appends the plane cuts of putAddrs' output for size entries at
// st[off:] and returns where it ends.
func addrCuts(cuts *[]int, st []byte, off, size int) (int, bool) {
	bm := (size + 7) / 8
	if size < 0 || off+bm > len(st) {
		return 0, false
	}
	n4 := 0
	for _, b := range st[off : off+bm] {
		n4 += bits.OnesCount8(b)
	}
	off += bm
	for _, p := range [...][2]int{{4, n4}, {16, size - n4}} {
		for j := 0; j < p[0]; j++ {
			*cuts = append(*cuts, off)
			off += p[1]
		}
	}
	return off, true
}

// Chunk modes of a segmented (compression 2) stream.
const (
	segRaw    = 0 // u8 mode, uvarint len, bytes
	segRLE    = 1 // u8 mode, uvarint len, u8 byte
	segHuff1X = 2 // u8 mode, uvarint len, uvarint stored len, huff0 1X (table + bits)
	segHuff4X = 3 // as segHuff1X, huff0 4X
	segFSE    = 4 // as segHuff1X, FSE (normalised counts + bits)
	segChunk  = 1 << 16
	huff4XMin = 1024 // 4X decodes faster but its jump table costs 6 bytes
)

// Coder choice: a chunk whose entropy is over segRawAbove of its size is
// stored raw (copying beats decoding for a few % saved); FSE, slower to
// decode than Huffman, is used only where it saves more than segFSEGain
// bits a byte over Huffman's 1-bit floor. On the generator's data
// (TestColumnBytes, with fse.Decompress, a third of Huffman's speed), gain
// 0 gave 13.56 B/row and ~70 ns/row to read SrcAddr+Bytes+RevBytes, 0.75
// 13.76 and ~58, never FSE (1) 14.50 and ~45. With fsedec.go's decoder
// (2.5x fse.Decompress), on the gendb week in format 10: 0.75 12.401 B/row,
// 0.25 12.353, 0 12.351, and `sip` and `sip,dip` where dport = 443 within
// the noise of each other (3 rounds): not worth a change.
const (
	segRawAbove = 0.96
	segFSEGain  = 0.25
)

// segEncoder entropy-codes streams plane by plane, reusing its scratch.
type segEncoder struct {
	hist [256]uint32
	hs   huff0.Scratch
	fs   fse.Scratch
	cuts []int
}

// encode appends st coded as chunks: st is split at cuts (ascending
// offsets inside st) and every segChunk bytes, and each chunk is stored
// raw, as one repeated byte, or with huff0 or FSE. FSE spends fractional
// bits per byte and wins on skewed planes (a flag plane that is 95% one
// value costs 0.3 bits, not Huffman's 1); Huffman's smaller table and
// faster decoder win on flatter ones.
func (s *segEncoder) encode(dst, st []byte, cuts []int) []byte {
	prev := 0
	for k := 0; k <= len(cuts); k++ {
		end := len(st)
		if k < len(cuts) {
			end = cuts[k]
		}
		for prev < end {
			c := min(end, prev+segChunk)
			dst = s.chunk(dst, st[prev:c])
			prev = c
		}
	}
	return dst
}

func (s *segEncoder) chunk(dst, b []byte) []byte {
	mode, best := uint8(segRaw), b
	if len(b) >= 16 {
		// One histogram picks the coder, so each chunk is compressed once:
		// FSE when one byte dominates (Huffman cannot go under 1 bit),
		// Huffman otherwise, nothing when the entropy says it cannot pay.
		h := &s.hist
		histogram(h, b)
		var top uint32
		maxSym := 0
		// Order-0 entropy and a Huffman estimate (no code is under 1 bit),
		// in bits: Σ c·log2(n/c) and Σ c·max(1, log2(n/c)).
		var bitsH, bitsHuff float64
		n := float64(len(b))
		ln := log2Fast(uint32(len(b)))
		for x, c := range h {
			if c != 0 {
				top = max(top, c)
				maxSym = x
				l := ln - log2Fast(c)
				bitsH += float64(c) * l
				bitsHuff += float64(c) * max(1, l)
			}
		}
		switch {
		case int(top) == len(b):
			mode, best = segRLE, b[:1]
		case bitsH/8 > n*segRawAbove:
		case bitsHuff-bitsH > n*segFSEGain:
			s.fs.Out = s.fs.Out[:0]
			copy(s.fs.Histogram(), h[:]) // FSE need not count again
			s.fs.HistogramFinished(uint8(maxSym), int(top))
			if out, err := fse.Compress(b, &s.fs); err == nil && len(out) < len(best) {
				mode, best = segFSE, out
			}
		default:
			s.hs.Reuse = huff0.ReusePolicyNone // every chunk carries its own table
			m, comp := uint8(segHuff1X), huff0.Compress1X
			if len(b) >= huff4XMin {
				m, comp = segHuff4X, huff0.Compress4X
			}
			s.hs.Out = s.hs.Out[:0]
			if out, _, err := comp(b, &s.hs); err == nil && len(out) < len(best) {
				mode, best = m, out
			}
		}
	} else if len(b) > 1 && allSame(b) {
		mode, best = segRLE, b[:1]
	}
	dst = append(dst, mode)
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	if mode >= segHuff1X {
		dst = binary.AppendUvarint(dst, uint64(len(best)))
	}
	return append(dst, best...)
}

// log2Tab[i] is log2(1 + i/256).
var log2Tab = func() (t [256]float64) {
	for i := range t {
		t[i] = math.Log2(1 + float64(i)/256)
	}
	return t
}()

// log2Fast is log2(c) for c > 0 within 0.006: the exponent plus a table
// lookup of the top 8 mantissa bits (math.Log2 cost 6% of encoding).
func log2Fast(c uint32) float64 {
	l := bits.Len32(c) - 1
	return float64(l) + log2Tab[(c<<(31-l)>>23)&0xff]
}

// histogram sets h to the byte counts of b. Four interleaved tables keep
// runs of one byte from waiting on the previous increment of its counter;
// a chunk under histSplitMin bytes (most of a block's chunks, a few % of
// its bytes) counts into one, where clearing and summing the other three
// cost more than the wait.
func histogram(h *[256]uint32, b []byte) {
	*h = [256]uint32{}
	if len(b) < histSplitMin {
		for _, x := range b {
			h[x]++
		}
		return
	}
	var t [3][256]uint32
	i := 0
	for ; i+4 <= len(b); i += 4 {
		h[b[i]]++
		t[0][b[i+1]]++
		t[1][b[i+2]]++
		t[2][b[i+3]]++
	}
	for ; i < len(b); i++ {
		h[b[i]]++
	}
	for x := range h {
		h[x] += t[0][x] + t[1][x] + t[2][x]
	}
}

// histSplitMin is the shortest chunk histogram counts in four tables.
const histSplitMin = 1024

func allSame(b []byte) bool {
	for _, x := range b[1:] {
		if x != b[0] {
			return false
		}
	}
	return true
}

// segDecoder decodes segmented streams, reusing its scratch.
type segDecoder struct {
	hs  huff0.Scratch
	fse fseDecoder
}

// decode appends the decoded stream of src to dst; the result must be
// exactly rlen bytes.
func (s *segDecoder) decode(dst, src []byte, rlen int) ([]byte, error) {
	base := len(dst)
	dst = slices.Grow(dst, rlen)
	for len(src) > 0 {
		mode := src[0]
		n, k := binary.Uvarint(src[1:])
		if k <= 0 || n > segChunk || n == 0 || int(n) > rlen-(len(dst)-base) {
			return dst, errBadStream
		}
		src = src[1+k:]
		var data []byte
		if mode >= segHuff1X {
			sl, k := binary.Uvarint(src)
			if k <= 0 || sl > uint64(len(src)-k) {
				return dst, errBadStream
			}
			data, src = src[k:k+int(sl)], src[k+int(sl):]
		}
		at := len(dst)
		out := dst[at : at+int(n) : at+int(n)]
		var err error
		var got []byte
		switch mode {
		case segRaw:
			if uint64(len(src)) < n {
				return dst, errBadStream
			}
			got = append(out[:0], src[:n]...)
			src = src[n:]
		case segRLE:
			if len(src) < 1 {
				return dst, errBadStream
			}
			for i := range out {
				out[i] = src[0]
			}
			got, src = out, src[1:]
		case segHuff1X, segHuff4X:
			var hs *huff0.Scratch
			s.hs.MaxDecodedSize = int(n)
			if hs, data, err = huff0.ReadTable(data, &s.hs); err != nil {
				return dst, errBadStream
			}
			if mode == segHuff1X {
				got, err = hs.Decoder().Decompress1X(out[:0], data)
			} else {
				got, err = hs.Decoder().Decompress4X(out[:0], data)
			}
		case segFSE:
			if !s.fse.decode(data, out) {
				return dst, errBadStream
			}
			got = out
		default:
			return dst, errBadStream
		}
		if err != nil || len(got) != int(n) || (len(got) > 0 && &got[0] != &out[0]) {
			return dst, errBadStream
		}
		dst = dst[:at+int(n)]
	}
	if len(dst)-base != rlen {
		return dst, errBadStream
	}
	return dst, nil
}
