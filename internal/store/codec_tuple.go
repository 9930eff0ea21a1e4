package store

import (
	"encoding/binary"
	"slices"
)

// encTuple (version 9) stores DstPort, Proto, ICMPType, ICMPCode,
// TCPFlags and RevTCPFlags as one dictionary of their combinations (the
// service tuple): u32 size (1..rows), u8 index width, the entries as 7
// byte planes (DstPort's two, then one each for the others; a packed
// entry is dport | proto<<16 | type<<24 | code<<32 | flags<<40 |
// revflags<<48), in descending frequency, then the index planes (rows).
// The stream is DstPort's; the other five columns' directory entries
// carry encTuple, flagTuple, their own min and max, and no bytes. A
// service's protocol and flags follow from its port, so one index costs
// about what the port alone did (the gendb week: 0.87 → ~0.44 B/row for
// the six columns).
const (
	encTuple  = 10
	flagTuple = 8
)

// tupleCols are the columns a tuple holds besides DstPort, in field order.
var tupleCols = [...]int{cProto, cICMPType, cICMPCode, cTCPFlags, cRevTCPFlags}

// tupleMax is the most distinct tuples a block codes this way (one index
// byte); tupleEntry the bytes an entry takes, which the rows must repay
// (a block of n rows takes at most n/tupleEntry tuples).
const (
	tupleMax   = 256
	tupleEntry = 7
)

// tupleOf packs a row's service tuple.
func tupleOf(dport uint16, proto, typ, code, flags, rflags uint8) uint64 {
	return uint64(dport) | uint64(proto)<<16 | uint64(typ)<<24 | uint64(code)<<32 | uint64(flags)<<40 | uint64(rflags)<<48
}

// tupleShift is where column id's value sits in a packed tuple, and
// tupleMask its width.
func tupleShift(id int) (uint, uint64) {
	switch id {
	case cDstPort:
		return 0, 0xffff
	case cProto:
		return 16, 0xff
	case cICMPType:
		return 24, 0xff
	case cICMPCode:
		return 32, 0xff
	case cTCPFlags:
		return 40, 0xff
	}
	return 48, 0xff // cRevTCPFlags
}

// putTuple codes the six columns as one tuple dictionary (from e.tup,
// which extract fills) when the block's rows take few enough tuples;
// it reports whether it did.
func (e *blockEncoder) putTuple() bool {
	n := len(e.tup)
	limit := min(tupleMax, n/tupleEntry)
	t := &e.ie.tab
	if limit == 0 || !t.build(e.tup, limit) {
		return false
	}
	d := len(t.dict)
	o := freqOrder(t.count, &t.order, &t.rank, t.idx)
	iw := byteWidth(uint64(d - 1))
	st := binary.LittleEndian.AppendUint32(e.stream[:0], uint32(d))
	st = append(st, byte(iw))
	s := slices.Grow(t.sorted[:0], d)[:d]
	var lo, hi [6]uint64
	for f := range lo {
		lo[f] = ^uint64(0)
	}
	for i, oi := range o {
		v := t.dict[oi]
		s[i] = v
		for f, id := range [6]int{cDstPort, cProto, cICMPType, cICMPCode, cTCPFlags, cRevTCPFlags} {
			sh, m := tupleShift(id)
			x := v >> sh & m
			lo[f], hi[f] = min(lo[f], x), max(hi[f], x)
		}
	}
	t.sorted = s
	st = putPlanes(st, s, tupleEntry)
	st = putPlanes(st, t.idx, iw)
	e.stream = st
	e.put(cDstPort, encTuple, st, lo[0], hi[0], 0)
	for f, id := range tupleCols {
		e.append(id, encTuple, compRaw, nil, 0, lo[f+1], hi[f+1], flagTuple)
	}
	return true
}

// tupleDecoder is a block's decoded tuple dictionary and row indexes,
// kept while the block's columns are decoded (each of the six reads them).
type tupleDecoder struct {
	ok   bool // decoded for the block decodeCols is on
	dict []uint64
	idx  []uint32
}

// tupleCol decodes column id (DstPort or one of tupleCols) of an encTuple
// block into dst.
func (d *decoder) tupleCol(h *blockHeader, blk []byte, base, id int, dst *Columns, verify bool) error {
	c := &h.cols[cDstPort]
	if (id != cDstPort && h.cols[id].flags&flagTuple == 0) || cDstPort >= h.ncols || h.omit&(1<<cDstPort) != 0 || c.enc != encTuple {
		return errBadStream
	}
	if !d.tup.ok {
		st, err := d.stream(c, blk, base, verify)
		if err != nil {
			return err
		}
		if err := d.tup.decode(st, h.rows); err != nil {
			return err
		}
		d.tup.ok = true
	}
	n := h.rows
	switch id {
	case cDstPort:
		dst.DstPort = tupleField(&d.tup, id, n, dst.DstPort)
	case cProto:
		dst.Proto = tupleField(&d.tup, id, n, dst.Proto)
	case cICMPType:
		dst.ICMPType = tupleField(&d.tup, id, n, dst.ICMPType)
	case cICMPCode:
		dst.ICMPCode = tupleField(&d.tup, id, n, dst.ICMPCode)
	case cTCPFlags:
		dst.TCPFlags = tupleField(&d.tup, id, n, dst.TCPFlags)
	case cRevTCPFlags:
		dst.RevTCPFlags = tupleField(&d.tup, id, n, dst.RevTCPFlags)
	default:
		return errBadStream
	}
	return nil
}

// decode parses an encTuple stream of n rows. The dictionary holds at
// most n entries (and at least one when there are rows), so what it
// allocates is bounded by the rows, never by the size field.
func (t *tupleDecoder) decode(st []byte, n int) error {
	if len(st) < 5 {
		return errBadStream
	}
	size := int(binary.LittleEndian.Uint32(st[0:4]))
	iw := int(st[4])
	if iw > 4 || size > n || (size == 0 && n > 0) || (iw == 0 && size > 1) || int64(len(st)-5) != int64(size)*tupleEntry+int64(n)*int64(iw) {
		return errBadStream
	}
	t.dict = slices.Grow(t.dict[:0], size)[:size]
	getPlanes(st[5:], t.dict, tupleEntry)
	t.idx = slices.Grow(t.idx[:0], n)[:n]
	getPlanes(st[5+size*tupleEntry:], t.idx, iw)
	if n > 0 && int(maxOf(t.idx)) >= size {
		return errBadStream
	}
	return nil
}

// tupleField fills dst (resized to n) with column id's value of each
// row's tuple.
func tupleField[T integer](t *tupleDecoder, id, n int, dst []T) []T {
	dst = slices.Grow(dst[:0], n)[:n]
	sh, m := tupleShift(id)
	var vals [tupleMax]T // the column's value of each entry, looked up per row
	if len(t.dict) <= tupleMax {
		for i, v := range t.dict {
			vals[i] = T(v >> sh & m)
		}
		for i, x := range t.idx[:n] {
			dst[i] = vals[x&(tupleMax-1)]
		}
		return dst
	}
	for i, x := range t.idx[:n] {
		dst[i] = T(t.dict[x] >> sh & m)
	}
	return dst
}
