package store

import (
	"math/bits"
	"slices"
)

// flagNoPkt (version 10, with flagPerPkt) leaves the rows without packets
// out of a per-packet byte column: their bytes are 0 (a block with bytes
// but no packets keeps the plain counts), so the stream holds one value
// for each row whose packet count is not 0, in row order. The gendb week:
// 7% of its rows have no reverse packets, whose per-packet sizes of 0 cost
// RevBytes ~0.05 B/row.
const flagNoPkt = 16

// putNoPkt stores per-packet values u (rows' r<<16 | q, packets pk) with
// flagNoPkt when some rows have no packets and some do, reporting false
// (nothing stored) otherwise.
func (e *blockEncoder) putNoPkt(id int, u, pk []uint64, lo, hi uint64) bool {
	m := 0
	for _, p := range pk {
		if p != 0 {
			m++
		}
	}
	if m == 0 || m == len(u) {
		return false
	}
	v := u[:0] // in place: v never passes the row it reads
	for i, p := range pk {
		if p != 0 {
			v = append(v, u[i])
		}
	}
	var enc uint8
	e.stream, enc, _, _ = e.ie.encodeInts(e.stream[:0], v, false, false, true)
	rows := e.rows
	e.rows = m // the stream's planes are m rows long
	e.put(id, enc, e.stream, lo, hi, flagPerPkt|flagNoPkt)
	e.rows = rows
	return true
}

// perPacketCol decodes per-packet byte column c (stream st, n rows) into v
// against packet column pid (have when the caller decoded it, else it is
// decoded into scratch), filling in the rows without packets when the
// column has flagNoPkt, and returns the byte counts.
func (d *decoder) perPacketCol(h *blockHeader, blk []byte, base int, c *colMeta, st []byte, n, pid int, have, v []uint64, verify bool) ([]uint64, error) {
	if c.flags&flagNoPkt == 0 {
		v, err := decodeInts(&d.id, c.enc, st, n, v)
		if err == nil {
			err = d.perPacket(h, blk, base, pid, have, v, verify)
		}
		return v, err
	}
	pk := have
	if pk == nil {
		// st is the decoder's scratch, which decoding the packets reuses.
		d.stNP = append(d.stNP[:0], st...)
		st = d.stNP
		var err error
		if pk, err = d.counts(h, blk, base, pid, &d.pk, verify); err != nil {
			return v, err
		}
	}
	if len(pk) != n {
		return v, errBadStream
	}
	m, or := nonZero(pk)
	v, err := decodeInts(&d.id, c.enc, st, m, v)
	if err != nil {
		return v, err
	}
	v = slices.Grow(v, n-m)[:n]
	bad := spreadPerPacket(v, pk[:n], m, or)
	if bad != 0 {
		return v, errBadStream
	}
	return v, nil
}

// spreadPerPacket spreads the first m values of v (r<<16 | q, one for
// each row of pk with packets, in row order) over all rows of v and turns
// them into byte counts, in one pass from the back (as perPacket does),
// so none is overwritten before it is read (the j-th value sits at or
// before its row). It returns non-zero when a row's remainder is not
// under its packets or its count overflows. Without a branch on the
// packets (rows without them may be any share): such a row reads the
// next value too, and masks it out. (A function of its own: inside
// perPacketCol the loop's values did not fit the registers.)
// or is the bitwise or of pk's values (nonZero's).
func spreadPerPacket(v, pk []uint64, m int, or uint64) (bad uint64) {
	if or>>48 == 0 { // below48
		return spreadPerPacket48(v, pk, m)
	}
	return spreadPerPacketWide(v, pk, m)
}

// below48 reports whether every value of pk is under 2^48: then q·p + r
// of a per-packet value (q < 2^16, r < 2^48) fits 64 bits, and the
// decoders skip the 128-bit product and its overflow checks.
func below48(pk []uint64) bool {
	var or uint64
	for _, p := range pk {
		or |= p
	}
	return or>>48 == 0
}

// spreadPerPacket48 is spreadPerPacket for packets under 2^48 (below48):
// a 64-bit multiply, and only the remainder's bound to check (the
// 128-bit product and the carry checks were a fifth of the loop).
func spreadPerPacket48(v, pk []uint64, m int) (bad uint64) {
	pk = pk[:len(v)]
	j := m
	for i := len(v) - 1; i >= 0; i-- {
		p := pk[i]
		nz := (p | -p) >> 63 // 1 unless p is 0
		j -= int(nz)
		x := v[j] // j < len(v): a row without packets leaves m < len(v)
		q, r := x&0xffff, x>>16
		var ge uint64
		if r >= p {
			ge = 1
		}
		bad |= ge & nz
		v[i] = (q*p + r) & -nz
	}
	return bad
}

// spreadPerPacketWide is spreadPerPacket for any packet counts.
func spreadPerPacketWide(v, pk []uint64, m int) (bad uint64) {
	pk = pk[:len(v)]
	j := m
	for i := len(v) - 1; i >= 0; i-- {
		p := pk[i]
		nz := (p | -p) >> 63 // 1 unless p is 0
		j -= int(nz)
		x := v[j] // j < len(v): a row without packets leaves m < len(v)
		q, r := x&0xffff, x>>16
		hi, lo := bits.Mul64(q, p)
		b, carry := bits.Add64(lo, r, 0)
		var ge uint64
		if r >= p {
			ge = 1
		}
		bad |= (hi | carry | ge) & nz
		v[i] = b & -nz
	}
	return bad
}

// nonZero counts the values of pk that are not 0, without a branch on
// them: rows without packets come in no order, and the branch on each
// mispredicted (a fifth of perPacketCol's samples in a profile of `sip`).
// It also returns the values' bitwise or (for below48's test).
func nonZero(pk []uint64) (int, uint64) {
	m, or := uint64(0), uint64(0)
	for _, p := range pk {
		m += (p | -p) >> 63 // 1 unless p is 0
		or |= p
	}
	return int(m), or
}
