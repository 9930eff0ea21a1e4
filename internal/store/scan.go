package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
)

// scanner walks a block file for intact blocks, independently of any
// index: it rebuilds a damaged index and is what 'weir store check'
// verifies. After a damaged stretch it resynchronises on the next block
// magic whose header and columns check out, so one damaged block never
// hides the good blocks after it.
type scanner struct {
	r    io.ReaderAt
	size int64
	// decode makes every block also decode in full (check); otherwise
	// the header and column CRCs are checked.
	decode bool
	buf    []byte
	chunk  []byte
	cols   Columns
	dec    *decoder
	// spent counts the bytes read; past scanBudget(size) resynchronising
	// gives up (the rest is one damaged stretch), so a file full of false
	// block magics cannot make a scan quadratic.
	spent int64
}

// scanBudget is what a scan of a size-byte file may read: every byte a
// few times over (a block's header is read before the block), and room
// for the false starts of a damaged stretch.
func scanBudget(size int64) int64 { return 8*size + 64<<20 }

// read is ReadAt, counted against the budget.
func (sc *scanner) read(b []byte, off int64) (int, error) {
	sc.spent += int64(len(b))
	return sc.r.ReadAt(b, off)
}

// broke reports whether the scan has spent its budget.
func (sc *scanner) broke() bool { return sc.spent > scanBudget(sc.size) }

// gap is a damaged stretch [off, end) of a block file.
type gap struct {
	off, end int64
	why      string
}

// scanChunk is how much of a damaged stretch is read at a time while
// looking for the next block magic.
const scanChunk = 1 << 20

// scan returns the intact blocks of the file in order and the damaged
// stretches between and after them. Memory is bounded by the largest
// block the file really holds (a length field is believed only once the
// file has that many bytes).
func (sc *scanner) scan() (blocks []indexEntryT, gaps []gap) {
	var off int64
	for off < sc.size {
		e, why := sc.block(off)
		if why == "" {
			blocks = append(blocks, e)
			off += int64(e.blockLen)
			continue
		}
		next, ne := sc.resync(off + 1)
		if sc.broke() {
			why += " (and the scan gave up looking for intact blocks after it: too many false starts)"
		}
		gaps = append(gaps, gap{off: off, end: next, why: why})
		if next >= sc.size {
			break
		}
		blocks = append(blocks, ne)
		off = next + int64(ne.blockLen)
	}
	return blocks, gaps
}

// resync finds the first intact block at or after off; it returns size
// when there is none.
func (sc *scanner) resync(off int64) (int64, indexEntryT) {
	if sc.chunk == nil {
		sc.chunk = make([]byte, scanChunk+len(blockMagic)-1)
	}
	chunk := sc.chunk
	for off < sc.size && !sc.broke() {
		n, _ := sc.read(chunk[:min(int64(len(chunk)), sc.size-off)], off)
		if n < len(blockMagic) {
			break
		}
		p := chunk[:n]
		for i := 0; ; {
			j := bytes.Index(p[i:], []byte(blockMagic))
			if j < 0 {
				break
			}
			at := off + int64(i+j)
			if e, why := sc.block(at); why == "" {
				return at, e
			}
			if sc.broke() {
				return sc.size, indexEntryT{}
			}
			i += j + 1
		}
		if n < len(chunk) {
			break
		}
		off += int64(n - (len(blockMagic) - 1)) // a magic across the chunk edge is found in the next chunk
	}
	return sc.size, indexEntryT{}
}

// block checks the block at off; why is "" when it is intact, else what
// is wrong with it.
func (sc *scanner) block(off int64) (e indexEntryT, why string) {
	left := sc.size - off
	var fixed [fixedHeader]byte
	if left < fixedHeader {
		return e, fmt.Sprintf("cut off: %d bytes where a block header takes %d", left, fixedHeader)
	}
	if _, err := sc.read(fixed[:], off); err != nil && !isEOF(err) {
		return e, "read: " + err.Error()
	}
	if string(fixed[:4]) != blockMagic {
		return e, "no block header here (bad magic)"
	}
	bl := int64(binary.LittleEndian.Uint32(fixed[4:8]))
	hl := int64(binary.LittleEndian.Uint32(fixed[8:12]))
	switch {
	case bl < fixedHeader || hl < fixedHeader || hl > bl:
		return e, "header damaged (impossible lengths)"
	case bl > left:
		// The header's CRC says whether the length is to be believed.
		if hl <= left && sc.headerCRC(off, hl) {
			return e, fmt.Sprintf("cut off: block of %d bytes, only %d left in the file", bl, left)
		}
		return e, "header damaged (length past the end of the file)"
	}
	// The header's CRC before the block is read: a false start costs its
	// header, not the block its length field claims.
	if !sc.headerCRC(off, hl) {
		return e, "header checksum mismatch"
	}
	sc.buf = slices.Grow(sc.buf[:0], int(bl))[:bl]
	if n, err := sc.read(sc.buf, off); n < len(sc.buf) {
		return e, fmt.Sprintf("read: %v", err)
	}
	h, err := parseHeader(sc.buf, true)
	if errors.Is(err, errNewerBlock) {
		return e, fmt.Sprintf("%s (block format %d; this weir reads up to %d): read and check this store with that weir or a newer one", newerWhy, sc.buf[12], blockVersion)
	}
	if err != nil {
		return e, "header damaged (invalid fields)"
	}
	for i := range h.cols[:h.ncols] {
		if h.omit&(1<<uint(i)) != 0 {
			continue
		}
		c := &h.cols[i]
		if crc32.Checksum(sc.buf[c.off:c.off+c.slen], castagnoli) != c.ck {
			return e, fmt.Sprintf("column %d checksum mismatch", i)
		}
	}
	if sc.decode {
		if sc.dec == nil {
			sc.dec = new(decoder)
		}
		sc.cols.reset()
		if err := sc.dec.decodeCols(h, sc.buf, 0, ColAll, &sc.cols, false); err != nil {
			return e, "columns do not decode: " + err.Error()
		}
	}
	return indexEntryT{off: off, blockLen: h.blockLen, headerLen: h.headerLen, rows: h.rows, minStart: h.minStart, maxEnd: h.maxEnd}, ""
}

// headerCRC reports whether the hl header bytes at off match their CRC.
func (sc *scanner) headerCRC(off, hl int64) bool {
	if hl < fixedHeader+4 || hl > maxHeaderLen {
		return false
	}
	sc.buf = slices.Grow(sc.buf[:0], int(hl))[:hl]
	b := sc.buf
	if n, _ := sc.read(b, off); int64(n) < hl {
		return false
	}
	return crc32.Checksum(b[:hl-4], castagnoli) == binary.LittleEndian.Uint32(b[hl-4:])
}

// maxHeaderLen bounds a header read to check its CRC: the directory and
// four bloom filters (a byte per distinct value) of a block of
// MaxBlockRows rows are well below it.
const maxHeaderLen = 16 << 20
