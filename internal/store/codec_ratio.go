package store

import (
	"math/bits"
	"slices"
)

// flagRatio (version 9, RevPackets only): each stored value is
// zigzag(e)<<8 | t, and the row's reverse packets are floor(t·p/2) + e
// with p the row's Packets: t is the reverse-to-forward ratio in half
// steps (rounded, at most 255) and e what it does not explain. Where the
// two directions' packets are in a steady ratio (one ACK a segment, a
// request per answer) t takes a few values and e is 0, so the column costs
// the ratio's few bits instead of a second packet count (the gendb week:
// 0.92 → ~0.25 B/row).
const flagRatio = 4

// ratioOf returns the stored value for reverse packets rp given packets
// p, and whether it fits (e, a signed difference, with zigzag(e) under
// 2^56).
func ratioOf(rp, p uint64) (v uint64, ok bool) {
	var t uint64
	if p != 0 && rp < 1<<40 && p < 1<<40 { // the rounding below cannot overflow
		t = min((4*rp+p)/(2*p), 255)
	}
	b := t * p / 2 // t·p < 2^48 here (t is 0 otherwise)
	var z uint64
	if rp >= b {
		z = (rp - b) << 1 // zigzag of a difference ≥ 0
		ok = rp-b < 1<<55
	} else {
		z = (b-rp)<<1 - 1
		ok = b-rp <= 1<<55
	}
	return z<<8 | t, ok
}

// putRevPackets stores RevPackets as a ratio of Packets (flagRatio) when
// that is smaller, else as its plain counts. Which is smaller is judged
// by the bits of the values each way (Σ bit lengths): coding both and
// keeping the smaller cost 8% of a write.
func (e *blockEncoder) putRevPackets() {
	rp, pk := e.cv[cRevPackets], e.cv[cPackets]
	n := len(rp)
	u := slices.Grow(e.ratio[:0], n)[:n]
	e.ratio = u
	lo, hi := ^uint64(0), uint64(0)
	fits := true
	plainBits, ratioBits := 0, 0
	var hist [256]int32 // ratios of the rows with more than one packet
	for i, r := range rp {
		v, ok := ratioOf(r, pk[i])
		u[i] = v
		lo, hi = min(lo, r), max(hi, r)
		plainBits += bits.Len64(r)
		ratioBits += bits.Len64(v>>8) + bits.Len8(uint8(v))
		fits = fits && ok
		if pk[i] != 1 {
			hist[uint8(v)]++
		}
	}
	if n == 0 || !fits || ratioBits >= plainBits {
		e.putCol(cRevPackets, false, false, true)
		return
	}
	// With one packet, ratios 2k and 2k+1 both give k reverse packets
	// (floor(t/2)): such a row takes whichever the block's other rows use
	// more, so it adds no symbol of its own (the gendb week: its rows of
	// one packet and no answer took ratio 0, which no other row uses;
	// RevPackets 0.245 → 0.21 B/row).
	for i, v := range u {
		if t := uint8(v); pk[i] == 1 && t%2 == 0 && t < 255 && hist[t+1] > hist[t] {
			u[i] = v + 1
		}
	}
	var enc uint8
	e.alt, enc, _, _ = e.ie.encodeInts(e.alt[:0], u, false, false, true)
	e.put(cRevPackets, enc, e.alt, lo, hi, flagRatio)
}

// unratio turns a flagRatio column (v, decoded as stored) back into
// reverse packet counts given the rows' packets pk. A count that
// overflows or goes under 0 is a malformed stream.
func unratio(v, pk []uint64) error {
	if len(pk) != len(v) {
		return errBadStream
	}
	for i, x := range v {
		t, e := x&0xff, unzigzag(x>>8)
		hi, lo := bits.Mul64(t, pk[i])
		if hi > 1 {
			return errBadStream
		}
		b := lo>>1 | hi<<63 // floor(t·p/2)
		r := b + e          // e is signed (two's complement)
		if int64(e) >= 0 && r < b || int64(e) < 0 && r > b {
			return errBadStream
		}
		v[i] = r
	}
	return nil
}

// ratio applies flagRatio to the decoded RevPackets values v: pk is the
// block's decoded Packets when the caller has them, else nil (they are
// then decoded into scratch).
func (d *decoder) ratio(h *blockHeader, blk []byte, base int, pk, v []uint64, verify bool) error {
	if pk == nil {
		var err error
		if pk, err = d.plain(h, blk, base, cPackets, &d.pk0, verify); err != nil {
			return err
		}
	}
	return unratio(v, pk)
}

// plain decodes numeric column id of a block as stored (its flags not
// applied; 0 for a column the block lacks) into *buf.
func (d *decoder) plain(h *blockHeader, blk []byte, base, id int, buf *[]uint64, verify bool) ([]uint64, error) {
	if id >= h.ncols || h.omit&(1<<uint(id)) != 0 {
		*buf = zeros(*buf, h.rows)
		return *buf, nil
	}
	c := &h.cols[id]
	st, err := d.stream(c, blk, base, verify)
	if err != nil {
		return nil, err
	}
	v, err := decodeInts(&d.id, c.enc, st, h.rows, *buf)
	*buf = v
	return v, err
}

// counts decodes packet column id (Packets or RevPackets) of a block
// into *buf with its flags applied: the packets a per-packet byte column
// needs when the caller did not ask for them.
func (d *decoder) counts(h *blockHeader, blk []byte, base, id int, buf *[]uint64, verify bool) ([]uint64, error) {
	v, err := d.plain(h, blk, base, id, buf, verify)
	if err == nil && id < h.ncols && h.cols[id].flags&flagRatio != 0 {
		err = d.ratio(h, blk, base, nil, v, verify)
	}
	return v, err
}
