package store

import (
	"encoding/binary"
	"slices"
	"unicode/utf8"

	"github.com/weir-dev/weir/internal/flow"
)

// encSDict is the string dictionary encoding (FORMAT in doc.go): u32
// size, u8 index width, size entries (u8 length, the bytes) in descending
// frequency, then the index planes.
const encSDict = 7

// encSDictL is sdict with uvarint entry lengths of up to maxLongStr
// bytes (FORMAT in doc.go): the version 5 enrichment columns.
const encSDictL = 8

// maxStrLen bounds a stored string: longer ones are cut (at a UTF-8 rune
// start) when written. Kernel drop reason names are under 40 bytes.
const maxStrLen = 64

// maxLongStr bounds a stored enrichment string (a workload or service
// name, a service's backend list): longer ones are cut likewise.
const maxLongStr = 4096

// maxInterned bounds a decoder's cache of the strings it has built.
const maxInterned = 4096

// strTable builds the dictionary of a block's string column; it is reused.
type strTable struct {
	m     map[string]int32
	dict  []string
	count []uint32
	idx   []uint64 // per-row dictionary index
	order []int32
	rank  []uint64
}

// clip cuts s to at most max bytes, backing up to a rune start so that a
// cut UTF-8 string stays valid.
func clip(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}

// encodeStrs appends the DropReason column of recs as an sdict stream and
// returns the shortest and longest stored length and how many rows' strings
// were cut to maxStrLen.
func (t *strTable) encodeStrs(dst []byte, recs []flow.Record) (out []byte, lo, hi uint64, cut int) {
	return t.encodeCol(dst, recs, cDropReason)
}

// strOf is record r's string of column id: DropReason, Rule, Node or an
// enrichment string ("" for a nil workload or service).
func strOf(r *flow.Record, id int) string {
	switch id {
	case cRule:
		return r.Rule
	case cDropReason:
		return r.DropReason
	case cNode:
		return r.Node
	}
	return enrichStr(r, id)
}

// appendEntry appends dictionary entry s: a u8 length for sdict, a
// uvarint one for sdictl (long).
func appendEntry(dst []byte, s string, long bool) []byte {
	if long {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
	} else {
		dst = append(dst, byte(len(s)))
	}
	return append(dst, s...)
}

// encodeCol is encodeStrs for string column id (cDropReason, cRule, or
// an enrichment column, which is sdictl: isLongStr).
func (t *strTable) encodeCol(dst []byte, recs []flow.Record, id int) (out []byte, lo, hi uint64, cut int) {
	n := len(recs)
	if n == 0 {
		return append(binary.LittleEndian.AppendUint32(dst, 0), 0), 0, 0, 0
	}
	long, maxLen := isLongStr(id), maxStrLen
	if long {
		maxLen = maxLongStr
	}
	// Nearly every block has one value (no drops: ""): one entry, no
	// index planes, found without hashing.
	first := strOf(&recs[0], id)
	same := true
	for i := range recs {
		if strOf(&recs[i], id) != first {
			same = false
			break
		}
	}
	if same {
		s, c := clip(first, maxLen)
		if c {
			cut = n
		}
		dst = append(binary.LittleEndian.AppendUint32(dst, 1), 0)
		return appendEntry(dst, s, long), uint64(len(s)), uint64(len(s)), cut
	}
	if t.m == nil {
		t.m = make(map[string]int32)
	}
	clear(t.m)
	t.dict, t.count = t.dict[:0], t.count[:0]
	idx := slices.Grow(t.idx[:0], n)[:n]
	t.idx = idx
	var last string
	lastID, lastCut := int32(-1), false
	for i := range recs {
		s := strOf(&recs[i], id)
		if lastID >= 0 && s == last { // runs are common: no hashing
			idx[i] = uint64(lastID)
			t.count[lastID]++
			if lastCut {
				cut++
			}
			continue
		}
		last = s
		s, lastCut = clip(s, maxLen)
		if lastCut {
			cut++
		}
		id, ok := t.m[s]
		if !ok {
			id = int32(len(t.dict))
			t.m[s] = id
			t.dict = append(t.dict, s)
			t.count = append(t.count, 0)
		}
		lastID = id
		idx[i] = uint64(id)
		t.count[id]++
	}
	d := len(t.dict)
	o := freqOrder(t.count, &t.order, &t.rank, idx)
	iw := byteWidth(uint64(d - 1))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(d))
	dst = append(dst, byte(iw))
	lo = uint64(maxLen)
	for _, oi := range o {
		s := t.dict[oi]
		lo, hi = min(lo, uint64(len(s))), max(hi, uint64(len(s)))
		dst = appendEntry(dst, s, long)
	}
	return putPlanes(dst, idx, iw), lo, hi, cut
}

// strDecoder is a decoder's scratch for string columns.
type strDecoder struct {
	dict  []string
	idx   []uint32
	cache map[string]string // strings already built, so steady reads do not allocate
}

// intern returns b as a string, built once while the cache has room.
func (d *strDecoder) intern(b []byte) string {
	if s, ok := d.cache[string(b)]; ok { // no allocation for the lookup
		return s
	}
	s := string(b)
	if d.cache == nil || len(d.cache) >= maxInterned {
		d.cache = make(map[string]string)
	}
	d.cache[s] = s
	return s
}

// decodeStrs decodes an sdict or sdictl stream of n rows into dst
// (resized to n).
func (d *strDecoder) decodeStrs(enc uint8, st []byte, n int, dst []string) ([]string, error) {
	dict, idx, err := d.decodeDict(enc, st, n, &d.dict, &d.idx)
	if err != nil {
		return dst[:0], err
	}
	dst = slices.Grow(dst[:0], n)[:n]
	if idx == nil { // one entry
		for i := range dst {
			dst[i] = dict[0]
		}
		return dst, nil
	}
	for i, x := range idx {
		dst[i] = dict[x]
	}
	return dst, nil
}

// decodeDict decodes an sdict or sdictl stream of n rows into its
// dictionary (in *dictBuf) and per-row indexes (in *idxBuf; nil when the
// dictionary has one entry, which every row then holds). Every length,
// size and index is checked against the stream and n, so the allocation
// is bounded by the stream's length.
func (d *strDecoder) decodeDict(enc uint8, st []byte, n int, dictBuf *[]string, idxBuf *[]uint32) (dict []string, idx []uint32, err error) {
	if (enc != encSDict && enc != encSDictL) || len(st) < 5 {
		return nil, nil, errBadStream
	}
	size := int64(binary.LittleEndian.Uint32(st[0:4]))
	iw := int(st[4])
	p := st[5:]
	// Every entry takes a byte at least: a size the stream cannot hold is
	// refused before anything is sized by it.
	if iw > 4 || size > int64(n) || (size == 0) != (n == 0) || (iw == 0 && size > 1) ||
		int64(len(p)) < size+int64(n)*int64(iw) {
		return nil, nil, errBadStream
	}
	dict = slices.Grow((*dictBuf)[:0], int(size))[:size]
	*dictBuf = dict
	for i := range dict {
		l, k := entryLen(enc, p)
		if k <= 0 || uint64(len(p)-k) < l {
			return nil, nil, errBadStream
		}
		dict[i] = d.intern(p[k : k+int(l)])
		p = p[k+int(l):]
	}
	if int64(len(p)) != int64(n)*int64(iw) {
		return nil, nil, errBadStream
	}
	if iw == 0 { // one entry (checked above), or no rows
		return dict, nil, nil
	}
	idx = slices.Grow((*idxBuf)[:0], n)[:n]
	*idxBuf = idx
	getPlanes(p, idx, iw)
	for _, x := range idx {
		if int64(x) >= size {
			return nil, nil, errBadStream
		}
	}
	return dict, idx, nil
}

// entryLen parses a dictionary entry's length at the start of p: the
// length and the bytes it took, k <= 0 if it is malformed or over its
// encoding's bound.
func entryLen(enc uint8, p []byte) (l uint64, k int) {
	if enc == encSDictL {
		l, k = binary.Uvarint(p)
		if l > maxLongStr {
			return 0, -1
		}
		return l, k
	}
	if len(p) < 1 || int(p[0]) > maxStrLen {
		return 0, -1
	}
	return uint64(p[0]), 1
}

// strCuts appends the plane cuts of an sdict stream of n rows (the
// entries are one segment, each index plane another) and returns where
// it ends, or -1 if it does not parse.
func strCuts(cuts *[]int, enc uint8, st []byte, n int) int {
	if len(st) < 5 {
		return -1
	}
	size := int(binary.LittleEndian.Uint32(st[0:4]))
	off := 5
	for i := 0; i < size && off < len(st); i++ {
		l, k := entryLen(enc, st[off:])
		if k <= 0 {
			return -1
		}
		off += k + int(l)
	}
	if off > len(st) {
		return -1
	}
	for j := 0; j < int(st[4]); j++ {
		*cuts = append(*cuts, off)
		off += n
	}
	return off
}
