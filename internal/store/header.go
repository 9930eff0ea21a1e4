package store

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/bits"
	"slices"
)

// maxColRaw bounds any column's raw stream, whatever its header claims:
// no allocation made while decoding a column exceeds it (the writer cuts
// a block early rather than pass it; blockCut).
const maxColRaw = 256 << 20

// maxRawLen bounds column id's raw stream in a block of rows rows: 8
// bytes a row and its header for numbers (addresses: 1 + 16 + 4 for a
// dictionary index, under 32), one length byte, maxStrLen bytes and a
// 3-byte index a row for strings; never more than maxColRaw.
func maxRawLen(id, rows int) int64 {
	n := 64 + 32*int64(rows)
	if id == cDropReason || id == cRule {
		n = 64 + int64(1+maxStrLen+3)*int64(rows)
	}
	if isLongStr(id) {
		n = 64 + int64(binary.MaxVarintLen16+maxLongStr+3)*int64(rows)
	}
	return min(n, maxColRaw)
}

// parseHeader checks and parses a block header from b (at least the header).
func parseHeader(b []byte, verify bool) (*blockHeader, error) {
	if len(b) < fixedHeader || string(b[:4]) != blockMagic {
		return nil, errCorruptBlock
	}
	// The header CRC first: a damaged header costs no allocation.
	if hl := int64(binary.LittleEndian.Uint32(b[8:12])); verify && (hl < fixedHeader+4 || hl > int64(len(b)) ||
		crc32.Checksum(b[:hl-4], castagnoli) != binary.LittleEndian.Uint32(b[hl-4:hl])) {
		return nil, errCorruptBlock
	}
	h := &blockHeader{
		blockLen:  int(binary.LittleEndian.Uint32(b[4:8])),
		headerLen: int(binary.LittleEndian.Uint32(b[8:12])),
		rows:      int(binary.LittleEndian.Uint32(b[16:20])),
		minStart:  int64(binary.LittleEndian.Uint64(b[24:32])),
		maxEnd:    int64(binary.LittleEndian.Uint64(b[32:40])),
	}
	hl := h.headerLen
	// Versions 1 and 2 (1 without compression 2) store the first
	// numColsV2 columns in the same layout, version 3 the first
	// numColsV3: read, the others are absent. Version 4 leaves out the
	// sparse columns its omitted bitmap names; version 5 adds the
	// enrichment columns, and the bitmap's bits 32 and up in bytes 14-15;
	// version 6 the node; version 7 only adds an address encoding
	// (adictd), so its layout is version 6's.
	ver := b[12]
	switch {
	case ver < 3:
		h.ncols = numColsV2
	case ver == 3:
		h.ncols = numColsV3
	case ver == 4:
		h.ncols = numColsV4
	case ver == 5:
		h.ncols = numColsV5
	default:
		h.ncols = numCols
	}
	h.omit = uint64(binary.LittleEndian.Uint32(b[20:24]))
	if ver >= 5 {
		h.omit |= uint64(binary.LittleEndian.Uint16(b[14:16])) << 32
	}
	ndir := h.ncols - bits.OnesCount64(h.omit)
	if ver > blockVersion {
		return nil, fmt.Errorf("%w: block format %d, this weir reads up to %d", errNewerBlock, ver, blockVersion)
	}
	minDir := ndir * dirEntry
	if ver >= dirV11 {
		minDir = ndir * 7 // three bytes, and at least one for each of the offset, length, min and max
	}
	if ver < 1 || ver > blockVersion || int(b[13]) != h.ncols || (ver < 4 && h.omit != 0) ||
		h.omit&(1<<firstSparse-1) != 0 || h.omit>>uint(h.ncols) != 0 || ndir < 0 || hl < fixedHeader+minDir+4 ||
		hl > len(b) || h.blockLen < hl || h.rows > maxRows {
		return nil, errCorruptBlock
	}
	p := b[fixedHeader : hl-4]
	if ver >= dirV11 {
		var ok bool
		if p, ok = parseDirV11(p, h, hl); !ok {
			return nil, errCorruptBlock
		}
	} else {
		p = parseDirV10(p, h)
	}
	for i := range h.ncols {
		if h.omit&(1<<uint(i)) != 0 {
			continue
		}
		c := &h.cols[i]
		if int(c.off) < hl || int64(c.off)+int64(c.slen) > int64(h.blockLen) || c.comp > compSeg || (ver == 1 && c.comp == compSeg) ||
			int64(c.rlen) > maxRawLen(i, h.rows) || (c.comp == compRaw && c.rlen != c.slen) ||
			(c.flags&flagPerPkt != 0 && (ver < 8 || (i != cBytes && i != cRevBytes))) ||
			(c.flags&flagRatio != 0 && (ver < 9 || i != cRevPackets)) || (c.flags&flagNoPkt != 0 && (ver < 10 || c.flags&flagPerPkt == 0)) || !tupleOK(ver, i, c, &h.cols[cDstPort]) ||
			((c.enc == encADictS || c.enc == encDeltaU) && ver < 9) || (c.enc == encDictE && ver < dirV11) || (c.enc == encADictS && i != cSrcAddr && i != cDstAddr) {
			return nil, errCorruptBlock
		}
	}
	for i := range h.blooms {
		n, ok := parseBloom(p, &h.blooms[i], ver >= 9 && i <= bloomDstAddr, ver >= portRunsV && i >= bloomSrcPort)
		if !ok {
			return nil, errCorruptBlock
		}
		p = p[n:]
	}
	if len(p) != 0 {
		return nil, errCorruptBlock
	}
	return h, nil
}

// parseDirV10 reads a version 1 to 10 directory (36-byte entries) from p
// into h.cols and returns the bytes after it; p holds it (parseHeader
// checked the header length).
func parseDirV10(p []byte, h *blockHeader) []byte {
	for i := range h.ncols {
		if h.omit&(1<<uint(i)) != 0 {
			continue
		}
		c := &h.cols[i]
		c.enc, c.comp, c.flags = p[0], p[1], p[2]
		c.off = binary.LittleEndian.Uint32(p[4:])
		c.slen = binary.LittleEndian.Uint32(p[8:])
		c.rlen = binary.LittleEndian.Uint32(p[12:])
		c.ck = binary.LittleEndian.Uint32(p[16:])
		c.min = binary.LittleEndian.Uint64(p[20:])
		c.max = binary.LittleEndian.Uint64(p[28:])
		p = p[dirEntry:]
	}
	return p
}

// tupleOK checks column i's directory entry c against the service tuple
// (version 9): only DstPort may be encTuple, and the columns the tuple
// holds are encTuple with flagTuple and no bytes exactly when DstPort is.
func tupleOK(ver byte, i int, c, dport *colMeta) bool {
	isT := slices.Contains(tupleCols[:], i)
	switch {
	case i == cDstPort:
		return c.enc != encTuple || ver >= 9
	case !isT:
		return c.enc != encTuple && c.flags&flagTuple == 0
	case dport.enc == encTuple:
		return c.enc == encTuple && c.flags == flagTuple && c.comp == compRaw && c.slen == 0 && c.rlen == 0
	}
	return c.enc != encTuple && c.flags&flagTuple == 0
}
