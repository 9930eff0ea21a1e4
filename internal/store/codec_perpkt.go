package store

import (
	"math/bits"
	"slices"
)

// putPerPacket stores byte counter id as r<<16 | q, q = bytes/packets
// (the mean packet size) and r = bytes%packets, packets from column pid
// (flagPerPkt): a packet size takes far fewer values than a byte count, so
// this costs less than the bytes themselves (the gendb week: Bytes 1.71 →
// ~1.0 B/row). The directory keeps the byte count's own min and max. A
// block with a row of bytes without packets, a mean size of 64 KiB or
// more, or a remainder too wide to shift stores the plain counts.
func (e *blockEncoder) putPerPacket(id, pid int) {
	by := e.cv[id]
	pk := e.cv[pid][:len(by)]
	u := slices.Grow(e.u[:0], len(by))[:len(by)]
	e.u = u
	lo, hi := ^uint64(0), uint64(0)
	var bad uint64 // any bit set: the transform does not fit
	for i, b := range by {
		p := pk[i]
		lo, hi = min(lo, b), max(hi, b)
		var q, r uint64
		switch {
		case p == 1:
			q = b
		case b|p < 1<<32 && p != 0: // 32-bit division is the cheaper one
			q, r = uint64(uint32(b)/uint32(p)), uint64(uint32(b)%uint32(p))
		case p != 0:
			q, r = b/p, b%p
		default:
			bad |= b // bytes without packets
		}
		bad |= q>>16 | r>>48
		u[i] = r<<16 | q
	}
	if bad != 0 || len(by) == 0 {
		e.putCol(id, false, false, true)
		return
	}
	if e.putNoPkt(id, u, pk, lo, hi) { // version 10: rows without packets left out
		return
	}
	var enc uint8
	e.stream, enc, _, _ = e.ie.encodeInts(e.stream[:0], u, false, false, true)
	e.put(id, enc, e.stream, lo, hi, flagPerPkt)
}

// perPacket turns a flagPerPkt column (v, decoded as stored) back into
// byte counts, decoding packet column pid into scratch when the caller
// did not want it (have false). A row whose remainder is not under its
// packets, or whose count overflows, is a malformed stream.
func (d *decoder) perPacket(h *blockHeader, blk []byte, base, pid int, have []uint64, v []uint64, verify bool) error {
	pk := have
	if pk == nil {
		var err error
		if pk, err = d.counts(h, blk, base, pid, &d.pk, verify); err != nil {
			return err
		}
	}
	if len(pk) != len(v) {
		return errBadStream
	}
	if below48(pk) {
		// q·p + r fits 64 bits: no 128-bit product, one check per row
		// folded into bad (no branch).
		var bad uint64
		for i, x := range v {
			p, q, r := pk[i], x&0xffff, x>>16
			var ge uint64
			if r >= p && x != 0 {
				ge = 1
			}
			bad |= ge
			v[i] = q*p + r
		}
		if bad != 0 {
			return errBadStream
		}
		return nil
	}
	for i, x := range v {
		p, q, r := pk[i], x&0xffff, x>>16
		hi, lo := bits.Mul64(q, p)
		b, carry := bits.Add64(lo, r, 0)
		if hi|carry != 0 || (r >= p && x != 0) {
			return errBadStream
		}
		v[i] = b
	}
	return nil
}

// wanted is the decoded packet column when the caller asked for it, else
// nil (perPacket then decodes it into scratch).
func wanted(ok bool, pk []uint64) []uint64 {
	if ok {
		return pk
	}
	return nil
}
