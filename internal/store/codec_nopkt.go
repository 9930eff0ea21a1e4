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
	m := 0
	for _, p := range pk {
		if p != 0 {
			m++
		}
	}
	v, err := decodeInts(&d.id, c.enc, st, m, v)
	if err != nil {
		return v, err
	}
	// Spread the m values over the rows with packets and turn them into
	// byte counts in one pass from the back (as perPacket does), so none
	// is overwritten before it is read (the j-th value sits at or before
	// its row).
	// Without a branch on the packets (rows without them may be any
	// share): such a row reads the next value too, and masks it out.
	v = slices.Grow(v, n-m)[:n]
	j := m
	var bad uint64
	for i := n - 1; i >= 0; i-- {
		p := pk[i]
		var nz, ge uint64
		if p != 0 {
			nz = 1
		}
		j -= int(nz)
		x := v[j] // j < n: a row without packets leaves m < n
		q, r := x&0xffff, x>>16
		hi, lo := bits.Mul64(q, p)
		b, carry := bits.Add64(lo, r, 0)
		if r >= p {
			ge = 1
		}
		bad |= (hi | carry | ge) & nz
		v[i] = b & -nz
	}
	if bad != 0 {
		return v, errBadStream
	}
	return v, nil
}
