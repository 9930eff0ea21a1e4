// fsedec.go's header reader (readNCount) and table builder (buildFSETable)
// are derived from github.com/klauspost/compress/fse, Copyright 2018 Klaus
// Post, based on work Copyright (c) 2013 Yann Collet; BSD licence, whose
// text is in fsedec.LICENSE beside this file.

package store

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// fseDecoder decodes the FSE chunks of segmented streams (segFSE: what
// fse.Compress writes, normalised counts then a backward bit stream with
// two interleaved states) into the caller's buffer. It is klauspost's
// fse.Decompress with the decoder's state and bit container in registers
// (that one keeps them in memory: BenchmarkFSEDecode, 2.5x), and tables
// kept for reuse: a plane's normalised counts often repeat from block to
// block (a quarter of the gendb week's FSE chunks find theirs kept). Its answers are fse.Decompress's, byte for
// byte, errors included (FuzzFSEDecode).
type fseDecoder struct {
	tabs [fseTables]fseTable
	next int // the slot the next new table takes
}

// fseTables is how many decoding tables an fseDecoder keeps: a block's
// FSE planes (a few columns, a few planes each) fit.
const fseTables = 16

// fseTable is one decoding table and the header bytes it was built from.
type fseTable struct {
	hdr []byte
	log uint8
	dt  []fseEntry
}

// fseEntry is one state's symbol, bit count and next-state base.
type fseEntry struct {
	newState uint16
	sym      uint8
	nbBits   uint8
}

const (
	fseMinLog = 5
	fseMaxLog = 15
	fseMaxSym = 255
)

// decode decodes FSE chunk src into out, whose length is the chunk's
// decoded length; it reports whether src held exactly that.
func (d *fseDecoder) decode(src, out []byte) bool {
	var norm [fseMaxSym + 1]int16
	hlen, log, nsym, ok := readNCount(src, &norm)
	if !ok {
		return false
	}
	t := d.table(src[:hlen], log, norm[:nsym])
	if t == nil {
		return false
	}
	return fseStream(src[hlen:], t.dt, t.log, out)
}

// table returns the decoding table of header hdr (normalised counts
// norm of table log log), from the kept ones when one matches, else
// built into the next slot; nil when the counts build no valid table.
func (d *fseDecoder) table(hdr []byte, log uint8, norm []int16) *fseTable {
	for i := range d.tabs {
		if t := &d.tabs[i]; t.dt != nil && t.log == log && bytes.Equal(t.hdr, hdr) {
			return t
		}
	}
	t := &d.tabs[d.next]
	d.next = (d.next + 1) % fseTables
	t.hdr = append(t.hdr[:0], hdr...)
	t.log = log
	size := 1 << log
	if cap(t.dt) < size {
		t.dt = make([]fseEntry, size)
	}
	t.dt = t.dt[:size]
	if !buildFSETable(t.dt, log, norm) {
		t.dt = nil
		return nil
	}
	return t
}

// readNCount reads the normalised counts at the start of src (FSE's
// header: the table log in 4 bits, then each symbol's count in a
// variable number of bits, runs of zero counts as repeat flags), as
// fse.Decompress does. It returns the header's length, the table log and
// the number of symbols.
func readNCount(src []byte, norm *[fseMaxSym + 1]int16) (hlen int, log uint8, nsym int, ok bool) {
	iend := len(src)
	if iend < 4 {
		return 0, 0, 0, false
	}
	off := 0
	u32 := func(o int) uint32 { return binary.LittleEndian.Uint32(src[o : o+4]) }
	stream := u32(0)
	nbBits := uint(stream&0xf) + fseMinLog
	if nbBits > fseMaxLog {
		return 0, 0, 0, false
	}
	log = uint8(nbBits)
	stream >>= 4
	bitCount := uint(4)
	remaining := int32(1<<nbBits) + 1
	threshold := int32(1 << nbBits)
	total := int32(0)
	nbBits++
	charnum := uint16(0) // 16 bits as in fse.Decompress, whose answers these are (wrapping included)
	prev0 := false
	for remaining > 1 {
		if prev0 {
			n0 := charnum
			for stream&0xffff == 0xffff {
				n0 += 24
				if off < iend-5 {
					off += 2
					stream = u32(off) >> bitCount
				} else {
					stream >>= 16
					bitCount += 16
				}
			}
			for stream&3 == 3 {
				n0 += 3
				stream >>= 2
				bitCount += 2
			}
			n0 += uint16(stream & 3)
			bitCount += 2
			if n0 > fseMaxSym {
				return 0, 0, 0, false
			}
			for charnum < n0 {
				norm[charnum&0xff] = 0
				charnum++
			}
			if off <= iend-7 || off+int(bitCount>>3) <= iend-4 {
				off += int(bitCount >> 3)
				bitCount &= 7
				stream = u32(off) >> bitCount
			} else {
				stream >>= 2
			}
		}
		lim := 2*threshold - 1 - remaining
		var count int32
		if int32(stream)&(threshold-1) < lim {
			count = int32(stream) & (threshold - 1)
			bitCount += nbBits - 1
		} else {
			count = int32(stream) & (2*threshold - 1)
			if count >= threshold {
				count -= lim
			}
			bitCount += nbBits
		}
		count-- // -1: a symbol below 1/table size (one low-probability state)
		if count < 0 {
			remaining += count
			total -= count
		} else {
			remaining -= count
			total += count
		}
		if count > 1<<15-1 {
			return 0, 0, 0, false
		}
		norm[charnum&0xff] = int16(count)
		charnum++
		prev0 = count == 0
		for remaining < threshold {
			nbBits--
			threshold >>= 1
		}
		if off <= iend-7 || off+int(bitCount>>3) <= iend-4 {
			off += int(bitCount >> 3)
			bitCount &= 7
		} else {
			bitCount -= uint(8 * (iend - 4 - off))
			off = iend - 4
		}
		stream = u32(off) >> (bitCount & 31)
	}
	if charnum <= 1 || charnum > fseMaxSym+1 || remaining != 1 || bitCount > 32 || total != 1<<log {
		return 0, 0, 0, false
	}
	off += int(bitCount+7) >> 3
	if off > len(src) {
		return 0, 0, 0, false
	}
	return off, log, int(charnum), true
}

// buildFSETable fills dt (1<<log entries) from normalised counts: each
// symbol's states spread over the table with FSE's step, low-probability
// symbols (-1) at its end, then each state's bit count and next-state
// base. It reports whether the counts make a valid table.
func buildFSETable(dt []fseEntry, log uint8, norm []int16) bool {
	size := uint32(1) << log
	high := size - 1
	var next [fseMaxSym + 1]uint16
	for s, v := range norm {
		if v == -1 {
			dt[high].sym = uint8(s)
			high--
			next[s] = 1
		} else {
			next[s] = uint16(v)
		}
	}
	mask := size - 1
	step := size>>1 + size>>3 + 3
	pos := uint32(0)
	for s, v := range norm {
		for range int(v) {
			dt[pos].sym = uint8(s)
			pos = (pos + step) & mask
			for pos > high {
				pos = (pos + step) & mask
			}
		}
	}
	if pos != 0 {
		return false
	}
	for u := range dt {
		s := dt[u].sym
		ns := next[s]
		next[s]++
		nb := log - uint8(bits.Len16(ns)-1)
		st := ns<<nb - uint16(size)
		if st >= uint16(size) || (st == uint16(u) && nb == 0) {
			return false
		}
		dt[u].nbBits, dt[u].newState = nb, st
	}
	return true
}

// fseStream decodes bit stream src with table dt (table log log) into
// out, and reports whether it held exactly len(out) symbols. The stream
// is read backwards from its last byte's highest set bit; two states
// take turns, and it ends when every bit is read and the state whose
// turn it is needs bits: that state's symbol and then the other's are the
// last two.
func fseStream(src []byte, dt []fseEntry, log uint8, out []byte) bool {
	if len(src) == 0 || src[len(src)-1] == 0 {
		return false
	}
	// pos is the number of bits not yet read: bits [0, pos) of src as
	// one little-endian number; reading takes the top ones.
	pos := 8*(len(src)-1) + bits.Len8(src[len(src)-1]) - 1
	over := false // a read past the first bit: the stream is short
	// read is the careful reader for the start and the end: n bits at
	// pos, 0 once every bit is read (as fse.Decompress, which then ends
	// without error only if no read went past the start).
	read := func(n uint8) uint32 {
		if n == 0 || pos == 0 {
			return 0
		}
		if int(n) > pos {
			over = true
			v := uint32(load(src, pos)>>(64-pos)) << (int(n) - pos)
			pos = 0
			return v & (1<<n - 1)
		}
		v := uint32(load(src, pos) >> (64 - uint(n)))
		pos -= int(n)
		return v
	}
	s1 := uint32(read(log))
	s2 := uint32(read(log))
	o := 0
	dt = dt[:1<<log]
	// The fast part: 4 symbols a refill (log <= 14: at most 56 bits of
	// the 57 or more a refill holds), while more than the refill remains,
	// so the stream cannot end inside it.
	if log <= 14 {
		var sym byte
		for pos >= 8*9 && o+4 <= len(out) {
			end := (pos + 7) >> 3
			v := binary.LittleEndian.Uint64(src[end-8 : end])
			v <<= uint(end*8-pos) & 63
			used := uint(0)
			o4 := out[o : o+4 : o+4]
			sym, s1, v, used = fseStep(dt, s1, v, used)
			o4[0] = sym
			sym, s2, v, used = fseStep(dt, s2, v, used)
			o4[1] = sym
			sym, s1, v, used = fseStep(dt, s1, v, used)
			o4[2] = sym
			sym, s2, _, used = fseStep(dt, s2, v, used)
			o4[3] = sym
			pos -= int(used)
			o += 4
		}
	}
	// The rest one symbol at a time, checking for the end before each.
	// The two states' turns are written out, not a shared closure: one
	// capturing o, s1 and s2 keeps them out of registers in the fast loop
	// above too (measured 5% slower on BenchmarkFSEDecode).
	for {
		e := dt[s1&uint32(len(dt)-1)]
		if pos == 0 && e.nbBits > 0 {
			if o+2 > len(out) {
				return false
			}
			out[o], out[o+1] = e.sym, dt[s2&uint32(len(dt)-1)].sym
			o += 2
			break
		}
		if o >= len(out) {
			return false
		}
		out[o] = e.sym
		o++
		s1 = uint32(e.newState) + read(e.nbBits)
		e = dt[s2&uint32(len(dt)-1)]
		if pos == 0 && e.nbBits > 0 {
			if o+2 > len(out) {
				return false
			}
			out[o], out[o+1] = e.sym, dt[s1&uint32(len(dt)-1)].sym
			o += 2
			break
		}
		if o >= len(out) {
			return false
		}
		out[o] = e.sym
		o++
		s2 = uint32(e.newState) + read(e.nbBits)
	}
	return !over && o == len(out)
}

// fseStep is one state's turn: the state's entry gives the symbol, and
// the next state is the entry's base plus its bit count's worth of v,
// the stream's next bits on top (the shifts masked to 6 bits: no check
// for counts of 64 and over). used counts the bits taken.
func fseStep(dt []fseEntry, st uint32, v uint64, used uint) (byte, uint32, uint64, uint) {
	e := dt[st&uint32(len(dt)-1)]
	nb := uint(e.nbBits)
	return e.sym, uint32(e.newState) + uint32(v>>1>>((63-nb)&63)), v << (nb & 63), used + nb
}

// load returns the 64 bits of src below bit pos (pos >= 1), the bit
// pos-1 on top, zeros below the stream's start.
func load(src []byte, pos int) uint64 {
	end := (pos + 7) >> 3
	var v uint64
	if end >= 8 {
		v = binary.LittleEndian.Uint64(src[end-8 : end])
	} else {
		var b [8]byte
		copy(b[8-end:], src[:end])
		v = binary.LittleEndian.Uint64(b[:])
	}
	return v << uint(end*8-pos)
}
