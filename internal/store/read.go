package store

import (
	"errors"
	"fmt"
	"hash/crc32"
	"runtime"
	"slices"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/weir-dev/weir/internal/flow"
)

// Column is a bit set of the attributes ReadBlock decodes.
type Column uint64

// Columns that ReadBlock can decode. ColSrcAddr and ColDstAddr also fill
// IPVersion; ColICMP fills ICMPType and ICMPCode; ColFlags fills TCPFlags
// and RevTCPFlags. ColSrcAddrIdx and ColDstAddrIdx fill only the
// dictionary form of an address column (SrcDict and SrcIdx, DstDict and
// DstIdx) plus IPVersion, without the per-row addresses. Blocks of
// versions 1 and 2 have no drop and sampling columns: ColDropPackets,
// ColDropBytes, ColDropReason and ColSampling read as 0 and "" there.
// Blocks before version 4 have no NAT, verdict and conntrack columns:
// they read as 0, "" and :: (not translated). ColNATSrcAddr and
// ColNATDstAddr also fill NATVersion. Blocks before version 5 have no
// enrichment columns: SrcWorkload, DstWorkload and Service read as nil,
// ServiceMatch as 0. Blocks before version 6 have no node: Node reads
// as "".
const (
	ColSrcAddr Column = 1 << iota
	ColDstAddr
	ColSrcPort
	ColDstPort
	ColProto
	ColICMP
	ColPackets
	ColBytes
	ColRevPackets
	ColRevBytes
	ColFlags
	ColReason
	ColStart
	ColEnd
	ColVLAN
	ColIPVersion
	ColSrcAddrIdx // SrcDict, SrcIdx and IPVersion, no SrcAddr
	ColDstAddrIdx // DstDict, DstIdx and IPVersion, no DstAddr
	ColDropPackets
	ColDropBytes
	ColDropReason
	ColSampling
	ColNATSrcAddr // NATSrcAddr and NATVersion
	ColNATDstAddr // NATDstAddr and NATVersion
	ColNATVersion // NATVersion: 0 for rows not translated
	ColNATSrcPort // NATSrcPort
	ColNATDstPort // NATDstPort
	ColVerdict    // Verdict
	ColRule       // Rule
	ColMark       // Mark
	ColZone       // Zone
	// ColSrcWorkload fills SrcWorkload from the stored name, namespace
	// and node (ColDstWorkload DstWorkload, likewise), ColService
	// Service from its name, backends and group.
	ColSrcWorkload
	ColDstWorkload
	ColService
	ColServiceMatch // ServiceMatch
	// ColNode fills Node: where each record was observed ("" when not
	// set, and in blocks before version 6).
	ColNode
	// ColAll selects every column (the per-row addresses and their
	// dictionary form).
	ColAll Column = 1<<iota - 1
)

// Columns holds decoded columns of one block. Every slice ReadBlock fills
// has length N (but SrcDict and DstDict: one entry per distinct address);
// columns not requested are left with length 0. ReadBlock reuses the
// slices' capacity, so one Columns per goroutine decodes without
// allocating.
type Columns struct {
	N                                int
	SrcAddr, DstAddr                 [][16]byte // IPv4-mapped for IPv4
	IPVersion                        []uint8
	SrcPort, DstPort                 []uint16
	Proto, ICMPType, ICMPCode        []uint8
	Packets, Bytes, RevPackets       []uint64
	RevBytes                         []uint64
	TCPFlags, RevTCPFlags, EndReason []uint8
	VLAN                             []uint16
	Start, End                       []int64 // Unix ns
	Iface                            string
	DropPackets, DropBytes           []uint64
	DropReason                       []string // "" for none; at most 64 bytes
	Sampling                         []uint32
	// The key after NAT (conntrack source): NATVersion is the PostNAT
	// key's IP version, 0 for a row not translated (its addresses are
	// then :: and its ports 0).
	NATSrcAddr, NATDstAddr [][16]byte // IPv4-mapped for IPv4
	NATVersion             []uint8
	NATSrcPort, NATDstPort []uint16
	Verdict                []uint8  // flow.Verdict
	Rule                   []string // "" for none; at most 64 bytes
	Mark                   []uint32 // conntrack mark
	Zone                   []uint16 // conntrack zone
	// Enrichment: nil for a row whose workload (service) is not known,
	// or whose strings are all ""; rows of a block with the same
	// workload share one pointer, built when the block is read (never
	// modify what they point to).
	SrcWorkload, DstWorkload []*flow.Workload
	Service                  []*flow.Service
	ServiceMatch             []uint8 // flow.ServiceMatch
	// Node is where each row was observed (flow.Record.Node), "" when
	// not set; at most 4096 bytes.
	Node []string
	// With ColSrcAddr or ColSrcAddrIdx (Dst likewise), SrcDict[SrcIdx[i]]
	// is row i's source address (== SrcAddr[i] when ColSrcAddr is also
	// asked for). A dictionary-encoded block's Dict holds each distinct
	// address once, so a consumer can do per-address work once per block
	// instead of once per row; for other blocks Dict is the per-row list
	// (SrcAddr itself with ColSrcAddr) and Idx 0..N-1. ColSrcAddrIdx alone
	// leaves SrcAddr empty and never builds per-row addresses.
	SrcDict, DstDict [][16]byte
	SrcIdx, DstIdx   []uint32
	srcBuf, dstBuf   [][16]byte    // the dictionaries' storage, reused
	natBuf, natDict  [2][][16]byte // the NAT address columns' dictionaries (not exported)
	natIdx           [2][]uint32
	// ReadFirst's bytes of the block, from block offset rawLo, kept for
	// ReadMore; rawOf and rawOff say which block they are of.
	raw    []byte
	rawLo  int
	rawOf  *readPart
	rawOff int64
}

// colsOf maps requested Columns to stored column ids.
func colsOf(want Column) (ids [numCols]bool) {
	set := func(c Column, id ...int) {
		if want&c != 0 {
			for _, i := range id {
				ids[i] = true
			}
		}
	}
	set(ColSrcAddr|ColSrcAddrIdx, cSrcAddr, cIPVersion)
	set(ColDstAddr|ColDstAddrIdx, cDstAddr, cIPVersion)
	set(ColIPVersion, cIPVersion)
	set(ColSrcPort, cSrcPort)
	set(ColDstPort, cDstPort)
	set(ColProto, cProto)
	set(ColICMP, cICMPType, cICMPCode)
	set(ColPackets, cPackets)
	set(ColBytes, cBytes)
	set(ColRevPackets, cRevPackets)
	set(ColRevBytes, cRevBytes)
	set(ColFlags, cTCPFlags, cRevTCPFlags)
	set(ColReason, cEndReason)
	set(ColStart, cStart)
	set(ColEnd, cEnd)
	set(ColVLAN, cVLAN)
	set(ColDropPackets, cDropPackets)
	set(ColDropBytes, cDropBytes)
	set(ColDropReason, cDropReason)
	set(ColSampling, cSampling)
	set(ColNATSrcAddr, cNATSrcAddr, cNATVersion)
	set(ColNATDstAddr, cNATDstAddr, cNATVersion)
	set(ColNATVersion, cNATVersion)
	set(ColNATSrcPort, cNATSrcPort)
	set(ColNATDstPort, cNATDstPort)
	set(ColVerdict, cVerdict)
	set(ColRule, cRule)
	set(ColMark, cMark)
	set(ColZone, cZone)
	set(ColSrcWorkload, cSrcWlName, cSrcWlNamespace, cSrcWlNode)
	set(ColDstWorkload, cDstWlName, cDstWlNamespace, cDstWlNode)
	set(ColService, cSvcName, cSvcBackends, cSvcGroup)
	set(ColServiceMatch, cServiceMatch)
	set(ColNode, cNode)
	return ids
}

// decoder is per-goroutine decoding scratch, pooled.
type decoder struct {
	raw   []byte
	dec   []byte
	id    intDecoder
	seg   segDecoder
	str   strDecoder
	grp   groupDecoder
	start []int64
	pk    []uint64 // packets for a per-packet byte column, when not wanted
	stNP  []byte   // a flagNoPkt column's stream, kept while those packets decode
	pk0   []uint64 // Packets for a ratio-coded RevPackets, when not wanted
	tup   tupleDecoder
}

var decoderPool = sync.Pool{New: func() any { return new(decoder) }}

var (
	zdecOnce sync.Once
	zdec     *zstd.Decoder
	zdecErr  error
)

// zstdDecoder returns the shared decoder; DecodeAll is safe for concurrent
// use and runs up to GOMAXPROCS decodes at once.
func zstdDecoder() (*zstd.Decoder, error) {
	zdecOnce.Do(func() {
		zdec, zdecErr = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithDecoderMaxMemory(256<<20),
			zstd.WithDecodeAllCapLimit(true), // never decode past the directory's raw length
			zstd.IgnoreChecksum(true))
	})
	return zdec, zdecErr
}

// stream returns column c's raw stream from blk (which starts at block
// offset base), checking its CRC and decompressing it.
func (d *decoder) stream(c *colMeta, blk []byte, base int, verify bool) ([]byte, error) {
	lo := int(c.off) - base
	if lo < 0 || lo+int(c.slen) > len(blk) {
		return nil, errCorruptBlock
	}
	data := blk[lo : lo+int(c.slen)]
	if verify && crc32.Checksum(data, castagnoli) != c.ck {
		return nil, errCorruptBlock
	}
	if c.comp == compRaw {
		return data, nil
	}
	if c.comp == compSeg {
		out, err := d.seg.decode(d.dec[:0], data, int(c.rlen))
		d.dec = out
		return out, err
	}
	zd, err := zstdDecoder()
	if err != nil {
		return nil, err
	}
	out := slices.Grow(d.dec[:0], int(c.rlen))
	out, err = zd.DecodeAll(data, out)
	if err != nil || len(out) != int(c.rlen) {
		return nil, errCorruptBlock
	}
	d.dec = out
	return out, nil
}

// decodeCols decodes the wanted columns of h from blk (block bytes from
// offset base) into dst.
func (d *decoder) decodeCols(h *blockHeader, blk []byte, base int, want Column, dst *Columns, verify bool) error {
	ids := colsOf(want)
	n := h.rows
	var err error
	d.grp.newBlock()
	d.tup.ok = false
	for id := range numCols {
		if !ids[id] {
			continue
		}
		if g := groupOf(id); g >= 0 { // the three columns of a pointer column, decoded together
			if g == id {
				if err := d.decodeGroup(h, blk, base, id, dst, verify); err != nil {
					return err
				}
			}
			continue
		}
		if id >= h.ncols || h.omit&(1<<uint(id)) != 0 { // a column the block's version did not have, or left out
			absent(id, n, dst)
			continue
		}
		c := &h.cols[id]
		if c.enc == encTuple { // DstPort and the columns its tuples hold (codec_tuple.go)
			if err := d.tupleCol(h, blk, base, id, dst, verify); err != nil {
				return err
			}
			continue
		}
		st, serr := d.stream(c, blk, base, verify)
		if serr != nil {
			return serr
		}
		switch id {
		case cSrcAddr:
			dst.SrcAddr, err = decodeAddrs(&dst.srcBuf, &dst.SrcDict, &dst.SrcIdx, c.enc, st, n, dst.SrcAddr, want&ColSrcAddr != 0, &h.blooms[bloomSrcAddr])
		case cDstAddr:
			dst.DstAddr, err = decodeAddrs(&dst.dstBuf, &dst.DstDict, &dst.DstIdx, c.enc, st, n, dst.DstAddr, want&ColDstAddr != 0, &h.blooms[bloomDstAddr])
		case cIPVersion:
			dst.IPVersion, err = decodeInts(&d.id, c.enc, st, n, dst.IPVersion)
		case cSrcPort:
			dst.SrcPort, err = decodeInts(&d.id, c.enc, st, n, dst.SrcPort)
		case cDstPort:
			dst.DstPort, err = decodeInts(&d.id, c.enc, st, n, dst.DstPort)
		case cProto:
			dst.Proto, err = decodeInts(&d.id, c.enc, st, n, dst.Proto)
		case cICMPType:
			dst.ICMPType, err = decodeInts(&d.id, c.enc, st, n, dst.ICMPType)
		case cICMPCode:
			dst.ICMPCode, err = decodeInts(&d.id, c.enc, st, n, dst.ICMPCode)
		case cPackets:
			dst.Packets, err = decodeInts(&d.id, c.enc, st, n, dst.Packets)
		case cBytes:
			if c.flags&flagPerPkt != 0 {
				dst.Bytes, err = d.perPacketCol(h, blk, base, c, st, n, cPackets, wanted(ids[cPackets], dst.Packets), dst.Bytes, verify)
			} else {
				dst.Bytes, err = decodeInts(&d.id, c.enc, st, n, dst.Bytes)
			}
		case cRevPackets:
			dst.RevPackets, err = decodeInts(&d.id, c.enc, st, n, dst.RevPackets)
			if err == nil && c.flags&flagRatio != 0 {
				err = d.ratio(h, blk, base, wanted(ids[cPackets], dst.Packets), dst.RevPackets, verify)
			}
		case cRevBytes:
			if c.flags&flagPerPkt != 0 {
				dst.RevBytes, err = d.perPacketCol(h, blk, base, c, st, n, cRevPackets, wanted(ids[cRevPackets], dst.RevPackets), dst.RevBytes, verify)
			} else {
				dst.RevBytes, err = decodeInts(&d.id, c.enc, st, n, dst.RevBytes)
			}
		case cTCPFlags:
			dst.TCPFlags, err = decodeInts(&d.id, c.enc, st, n, dst.TCPFlags)
		case cRevTCPFlags:
			dst.RevTCPFlags, err = decodeInts(&d.id, c.enc, st, n, dst.RevTCPFlags)
		case cEndReason:
			dst.EndReason, err = decodeInts(&d.id, c.enc, st, n, dst.EndReason)
		case cVLAN:
			dst.VLAN, err = decodeInts(&d.id, c.enc, st, n, dst.VLAN)
		case cStart:
			dst.Start, err = decodeInts(&d.id, c.enc, st, n, dst.Start)
		case cEnd:
			dst.End, err = decodeInts(&d.id, c.enc, st, n, dst.End)
			if err == nil && c.flags&flagEndRel != 0 {
				err = d.addStart(h, blk, base, ids[cStart], dst, verify)
			}
		case cDropPackets:
			dst.DropPackets, err = decodeInts(&d.id, c.enc, st, n, dst.DropPackets)
		case cDropBytes:
			dst.DropBytes, err = decodeInts(&d.id, c.enc, st, n, dst.DropBytes)
		case cDropReason:
			dst.DropReason, err = d.str.decodeStrs(c.enc, st, n, dst.DropReason)
		case cSampling:
			dst.Sampling, err = decodeInts(&d.id, c.enc, st, n, dst.Sampling)
		case cNATSrcAddr:
			dst.NATSrcAddr, err = decodeAddrs(&dst.natBuf[0], &dst.natDict[0], &dst.natIdx[0], c.enc, st, n, dst.NATSrcAddr, true, nil)
		case cNATDstAddr:
			dst.NATDstAddr, err = decodeAddrs(&dst.natBuf[1], &dst.natDict[1], &dst.natIdx[1], c.enc, st, n, dst.NATDstAddr, true, nil)
		case cNATVersion:
			dst.NATVersion, err = decodeInts(&d.id, c.enc, st, n, dst.NATVersion)
		case cNATSrcPort:
			dst.NATSrcPort, err = decodeInts(&d.id, c.enc, st, n, dst.NATSrcPort)
		case cNATDstPort:
			dst.NATDstPort, err = decodeInts(&d.id, c.enc, st, n, dst.NATDstPort)
		case cVerdict:
			dst.Verdict, err = decodeInts(&d.id, c.enc, st, n, dst.Verdict)
		case cRule:
			dst.Rule, err = d.str.decodeStrs(c.enc, st, n, dst.Rule)
		case cMark:
			dst.Mark, err = decodeInts(&d.id, c.enc, st, n, dst.Mark)
		case cZone:
			dst.Zone, err = decodeInts(&d.id, c.enc, st, n, dst.Zone)
		case cServiceMatch:
			dst.ServiceMatch, err = decodeInts(&d.id, c.enc, st, n, dst.ServiceMatch)
		case cNode:
			dst.Node, err = d.str.decodeStrs(c.enc, st, n, dst.Node)
		}
		if err != nil {
			return err
		}
	}
	dst.N = n
	return nil
}

// ReadFirst is ReadBlock that reads the bytes of block b's all columns
// but decodes only first (a part of all); ReadMore then decodes others
// from the same bytes. A query decodes the columns its condition reads
// first, and the others only for a block where some row matches: a
// condition the summaries cannot rule out, that no row meets, then costs
// the condition's columns alone.
func (s *Store) ReadFirst(b *BlockInfo, first, all Column, dst *Columns) error {
	if b == nil || b.h == nil || b.rp == nil {
		return errors.New("store: ReadFirst of a BlockInfo not from Blocks")
	}
	dst.reset()
	dst.Iface = b.Iface
	d := decoderPool.Get().(*decoder)
	defer decoderPool.Put(d)
	lo, hi := b.h.span(all)
	dst.raw = slices.Grow(dst.raw[:0], hi-lo)[:hi-lo]
	dst.rawLo, dst.rawOf, dst.rawOff = lo, b.rp, b.Offset
	return s.decodeFrom(d, b, dst.raw, lo, first, dst, true)
}

// ReadMore decodes more columns of block b into dst, which holds what
// ReadFirst of the same b decoded: those columns stay as they are. The
// bytes ReadFirst read are decoded when they hold want's columns; else
// they are read.
func (s *Store) ReadMore(b *BlockInfo, want Column, dst *Columns) error {
	if b == nil || b.h == nil || b.rp == nil {
		return errors.New("store: ReadMore of a BlockInfo not from Blocks")
	}
	if dst.N != b.Rows || dst.Iface != b.Iface || dst.rawOf != b.rp || dst.rawOff != b.Offset {
		return errors.New("store: ReadMore into Columns that ReadFirst did not fill from this block")
	}
	d := decoderPool.Get().(*decoder)
	defer decoderPool.Put(d)
	if lo, hi := b.h.span(want); lo >= dst.rawLo && hi <= dst.rawLo+len(dst.raw) {
		return s.decodeFrom(d, b, dst.raw, dst.rawLo, want, dst, false)
	}
	return s.readCols(b, want, dst)
}

// readCols reads the bytes of b's wanted columns and decodes them into
// dst (ReadBlock after resetting dst).
func (s *Store) readCols(b *BlockInfo, want Column, dst *Columns) error {
	d := decoderPool.Get().(*decoder)
	defer decoderPool.Put(d)
	lo, hi := b.h.span(want)
	buf := slices.Grow(d.raw[:0], hi-lo)[:hi-lo]
	d.raw = buf
	return s.decodeFrom(d, b, buf, lo, want, dst, true)
}

// decodeFrom decodes b's wanted columns into dst from buf, the bytes of b
// from offset lo, reading them first when read is set.
func (s *Store) decodeFrom(d *decoder, b *BlockInfo, buf []byte, lo int, want Column, dst *Columns, read bool) error {
	if read {
		if n, err := b.rp.f.ReadAt(buf, b.Offset+int64(lo)); n < len(buf) {
			if err != nil && !isEOF(err) {
				return fmt.Errorf("store: read block: %w", err)
			}
			return s.damaged(b, "cut off: the file ends inside the block")
		}
	}
	if err := d.decodeCols(b.h, buf, lo, want, dst, true); err != nil {
		if errors.Is(err, errCorruptBlock) || errors.Is(err, errBadStream) {
			return s.damaged(b, err.Error())
		}
		return err
	}
	dst.N = b.Rows
	return nil
}

// absent fills column id, which an older block version lacks or a
// version 4 block left out, with n zeros or empty strings.
func absent(id, n int, dst *Columns) {
	switch id {
	case cNATSrcAddr:
		dst.NATSrcAddr = zeros(dst.NATSrcAddr, n)
	case cNATDstAddr:
		dst.NATDstAddr = zeros(dst.NATDstAddr, n)
	case cNATVersion:
		dst.NATVersion = zeros(dst.NATVersion, n)
	case cNATSrcPort:
		dst.NATSrcPort = zeros(dst.NATSrcPort, n)
	case cNATDstPort:
		dst.NATDstPort = zeros(dst.NATDstPort, n)
	case cVerdict:
		dst.Verdict = zeros(dst.Verdict, n)
	case cRule:
		dst.Rule = zeros(dst.Rule, n)
	case cMark:
		dst.Mark = zeros(dst.Mark, n)
	case cZone:
		dst.Zone = zeros(dst.Zone, n)
	case cDropPackets:
		dst.DropPackets = zeros(dst.DropPackets, n)
	case cDropBytes:
		dst.DropBytes = zeros(dst.DropBytes, n)
	case cDropReason:
		dst.DropReason = zeros(dst.DropReason, n)
	case cSampling:
		dst.Sampling = zeros(dst.Sampling, n)
	case cServiceMatch:
		dst.ServiceMatch = zeros(dst.ServiceMatch, n)
	case cNode:
		dst.Node = zeros(dst.Node, n)
	}
}

// zeros returns s resized to n zero values.
func zeros[T any](s []T, n int) []T {
	s = slices.Grow(s[:0], n)[:n]
	clear(s)
	return s
}

// addStart turns End-Start back into End, decoding Start if not wanted.
func (d *decoder) addStart(h *blockHeader, blk []byte, base int, have bool, dst *Columns, verify bool) error {
	start := dst.Start
	if !have {
		st, err := d.stream(&h.cols[cStart], blk, base, verify)
		if err != nil {
			return err
		}
		if d.start, err = decodeInts(&d.id, h.cols[cStart].enc, st, h.rows, d.start); err != nil {
			return err
		}
		start = d.start
	}
	end := dst.End[:len(start)]
	for i, s := range start {
		end[i] += s
	}
	return nil
}

// reset truncates every column slice (N = 0).
func (c *Columns) reset() {
	c.N = 0
	c.SrcAddr, c.DstAddr = c.SrcAddr[:0], c.DstAddr[:0]
	c.SrcIdx, c.DstIdx = c.SrcIdx[:0], c.DstIdx[:0]
	c.SrcDict, c.DstDict = c.srcBuf[:0], c.dstBuf[:0]
	c.IPVersion = c.IPVersion[:0]
	c.SrcPort, c.DstPort = c.SrcPort[:0], c.DstPort[:0]
	c.Proto, c.ICMPType, c.ICMPCode = c.Proto[:0], c.ICMPType[:0], c.ICMPCode[:0]
	c.Packets, c.Bytes, c.RevPackets, c.RevBytes = c.Packets[:0], c.Bytes[:0], c.RevPackets[:0], c.RevBytes[:0]
	c.TCPFlags, c.RevTCPFlags, c.EndReason = c.TCPFlags[:0], c.RevTCPFlags[:0], c.EndReason[:0]
	c.VLAN = c.VLAN[:0]
	c.Start, c.End = c.Start[:0], c.End[:0]
	c.DropPackets, c.DropBytes, c.DropReason, c.Sampling = c.DropPackets[:0], c.DropBytes[:0], c.DropReason[:0], c.Sampling[:0]
	c.NATSrcAddr, c.NATDstAddr, c.NATVersion = c.NATSrcAddr[:0], c.NATDstAddr[:0], c.NATVersion[:0]
	c.NATSrcPort, c.NATDstPort = c.NATSrcPort[:0], c.NATDstPort[:0]
	c.Verdict, c.Rule, c.Mark, c.Zone = c.Verdict[:0], c.Rule[:0], c.Mark[:0], c.Zone[:0]
	c.SrcWorkload, c.DstWorkload, c.Service, c.ServiceMatch = c.SrcWorkload[:0], c.DstWorkload[:0], c.Service[:0], c.ServiceMatch[:0]
	c.Node = c.Node[:0]
}

// span returns the byte range of the block holding the wanted columns.
func (h *blockHeader) span(want Column) (lo, hi int) {
	ids := colsOf(want)
	if ids[cEnd] && h.cols[cEnd].flags&flagEndRel != 0 {
		ids[cStart] = true
	}
	if ids[cBytes] && h.cols[cBytes].flags&flagPerPkt != 0 {
		ids[cPackets] = true
	}
	if ids[cRevBytes] && h.cols[cRevBytes].flags&flagPerPkt != 0 {
		ids[cRevPackets] = true
	}
	if ids[cRevPackets] && h.cols[cRevPackets].flags&flagRatio != 0 {
		ids[cPackets] = true
	}
	for _, id := range tupleCols {
		if ids[id] && h.cols[id].enc == encTuple {
			ids[cDstPort] = true
		}
	}
	lo, hi = h.blockLen, 0
	for id, ok := range ids[:h.ncols] {
		if ok && h.omit&(1<<uint(id)) == 0 {
			c := &h.cols[id]
			lo = min(lo, int(c.off))
			hi = max(hi, int(c.off+c.slen))
		}
	}
	if lo > hi {
		return 0, 0
	}
	return lo, hi
}

// decodeBlock parses and decodes a whole block held in b (fuzzing and
// tests); verify=false skips the CRCs to reach the decoders.
func decodeBlock(b []byte, verify bool, dst *Columns) error {
	h, err := parseHeader(b, verify)
	if err != nil {
		return err
	}
	if h.blockLen > len(b) {
		return fmt.Errorf("%w: truncated", errCorruptBlock)
	}
	d := new(decoder) // not pooled: a fuzz run's coverage must not depend on an earlier input's buffers
	dst.reset()
	return d.decodeCols(h, b[:h.blockLen], 0, ColAll, dst, verify)
}
