package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"runtime"
	"slices"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/weir-dev/weir/internal/flow"
)

// Stored column ids, in directory order.
const (
	cSrcAddr = iota
	cDstAddr
	cIPVersion
	cSrcPort
	cDstPort
	cProto
	cICMPType
	cICMPCode
	cPackets
	cBytes
	cRevPackets
	cRevBytes
	cTCPFlags
	cRevTCPFlags
	cEndReason
	cVLAN
	cStart
	cEnd
	cDropPackets // the columns from here on are new in version 3
	cDropBytes
	cDropReason
	cSampling
	cNATSrcAddr // the columns from here on are new in version 4
	cNATDstAddr
	cNATVersion
	cNATSrcPort
	cNATDstPort
	cVerdict
	cRule
	cMark
	cZone
	cSrcWlName // the columns from here on are new in version 5
	cSrcWlNamespace
	cSrcWlNode
	cDstWlName
	cDstWlNamespace
	cDstWlNode
	cSvcName
	cSvcBackends
	cSvcGroup
	cServiceMatch
	cNode // new in version 6: where the record was observed
	numCols
)

// numColsV2 is the column count of version 1 and 2 blocks (ids below
// cDropPackets), numColsV3 that of version 3 blocks, numColsV4 that of
// version 4, numColsV5 that of version 5; their later columns read as
// zero or empty.
const (
	numColsV2 = cDropPackets
	numColsV3 = cNATSrcAddr
	numColsV4 = cSrcWlName
	numColsV5 = cNode
)

// firstSparse is the first column a version 4 block may omit (its
// omitted bitmap): the drop, sampling, NAT, verdict and conntrack
// columns, zero or empty in nearly every block.
const firstSparse = cDropPackets

// Block layout constants (see FORMAT in doc.go).
const (
	blockMagic   = "WBK1"
	blockVersion = 12
	fixedHeader  = 40
	dirEntry     = 36 // versions 1 to 10; version 11 uses varints (dir.go)
	portRunsV    = 12 // the first version with port runs filters (portRunsKind)
	numBlooms    = 4
	maxRows      = MaxBlockRows // decoder bound on rows per block (bounds decode memory)
	compressMin  = 64           // streams shorter than this are stored raw
	flagEndRel   = 1            // End stored as End-Start
	flagPerPkt   = 2            // version 8: Bytes or RevBytes stored per packet (putPerPacket)
	compRaw      = 0
	compZstd     = 1
	compSeg      = 2 // byte planes entropy-coded one by one (codec_seg.go)
	bloomSrcAddr = 0
	bloomDstAddr = 1
	bloomSrcPort = 2
	bloomDstPort = 3
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errCorruptBlock marks a block that fails a check; ReadBlock wraps it in
// ErrCorrupt.
var errCorruptBlock = errors.New("store: corrupt block")

// errNewerBlock is a block whose header checks out but whose format is
// newer than this weir reads: not damage, and never repaired away (a
// store an upgraded weir wrote, opened by an older one).
var errNewerBlock = fmt.Errorf("%w: written by a newer weir", errCorruptBlock)

// newerWhy starts the reason the scan gives a block of a newer format.
const newerWhy = "written by a newer weir"

// colMeta is one column's directory entry.
type colMeta struct {
	enc, comp, flags    uint8
	off, slen, rlen, ck uint32
	min, max            uint64
}

// blockHeader is a parsed, checked block header.
type blockHeader struct {
	rows      int
	ncols     int    // column ids the block's version has: numCols, numColsV5, numColsV4, numColsV3 or numColsV2
	omit      uint64 // versions 4 and up: bit id set = column id is all zero or "", not stored
	minStart  int64
	maxEnd    int64
	blockLen  int
	headerLen int
	cols      [numCols]colMeta
	blooms    [numBlooms]bloom
}

// blockEncoder turns a batch of records into one block; it is reused.
type blockEncoder struct {
	zenc    *zstd.Encoder
	aux     *blockEncoder // second goroutine's scratch (addresses and ports)
	seg     segEncoder
	rows    int
	ie      intEncoder
	at      addrTable
	at2     addrTable // destination addresses': each table starts at its last block's size
	ps      portSet
	blooms  [numBlooms]bloom
	addrs   [][16]byte // rows' addresses: source (NAT columns too), then
	addrs2  [][16]byte // destination
	u       []uint64
	u16     []uint16          // rows' ports: source, then
	u16b    []uint16          // destination
	cv      [numCols][]uint64 // extracted integer columns
	end     []uint64          // rows' End (putEnd)
	ident   []int32           // 0, 1, 2, ...: the rank of rows already in order
	ord     []flow.Record     // rows gathered into Start order, when a rare column needs them
	tup     []uint64          // rows' service tuples (tupleOf)
	ratio   []uint64          // RevPackets as ratios of Packets (putRevPackets)
	nonZero [numCols]uint64   // OR of each sparse column's values (strings: lengths; addresses: their words)
	omit    uint64            // sparse columns of the last encode left out (all zero)
	enr     bool              // the last encode's records have enrichment fields
	st      strTable
	cut     int // drop reasons of the last encode cut to maxStrLen
	cutRule int // rules likewise
	cutEnr  int // enrichment strings cut to maxLongStr
	cutNode int // node names cut to maxLongStr
	stream  []byte
	alt     []byte
	comp    []byte
	comp2   []byte
	payload []byte
	cols    [numCols]colMeta
}

func newZstdEncoder(level zstd.EncoderLevel) (*zstd.Encoder, error) {
	return zstd.NewWriter(nil,
		zstd.WithEncoderLevel(level),
		zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderCRC(false),              // the block has its own CRCs
		zstd.WithAllLitEntropyCompression(true), // byte planes have no matches but skewed bytes
		zstd.WithLowerEncoderMem(true))
}

// put compresses (when it helps) and appends one column stream.
func (e *blockEncoder) put(id int, enc uint8, st []byte, lo, hi uint64, flags uint8) {
	var data []byte
	var comp uint8
	data, comp, e.comp = e.compress(e.comp, enc, st)
	e.append(id, enc, comp, data, len(st), lo, hi, flags)
}

// compress returns the bytes to store for stream st (in buf, or st itself
// when compressing does not shrink it) and the compression used.
func (e *blockEncoder) compress(buf []byte, enc uint8, st []byte) (data []byte, comp uint8, newBuf []byte) {
	if len(st) < compressMin {
		return st, compRaw, buf
	}
	// Streams made of byte planes are entropy-coded plane by plane; others
	// go through zstd.
	if e.seg.cuts = planeCuts(e.seg.cuts[:0], enc, st, e.rows); len(e.seg.cuts) > 0 {
		buf, comp = e.seg.encode(buf[:0], st, e.seg.cuts), compSeg
	} else {
		buf, comp = e.zenc.EncodeAll(st, buf[:0]), compZstd
	}
	if len(buf) >= len(st)-len(st)/32 { // saving under 3%: raw decodes faster
		return st, compRaw, buf
	}
	return buf, comp, buf
}

// append adds a column's stored bytes to the payload and its directory entry.
func (e *blockEncoder) append(id int, enc, comp uint8, data []byte, rlen int, lo, hi uint64, flags uint8) {
	c := &e.cols[id]
	*c = colMeta{enc: enc, comp: comp, flags: flags, rlen: uint32(rlen), min: lo, max: hi}
	c.off = uint32(len(e.payload)) // relative to payload; fixed up later
	c.slen = uint32(len(data))
	c.ck = crc32.Checksum(data, castagnoli)
	e.payload = append(e.payload, data...)
}

func (e *blockEncoder) putInts(id int, signed, delta, dict bool) (lo, hi uint64) {
	var enc uint8
	e.stream, enc, lo, hi = e.ie.encodeInts(e.stream[:0], e.u, signed, delta, dict)
	e.put(id, enc, e.stream, lo, hi, 0)
	return lo, hi
}

// extract copies the integer fields into column slices in one pass over
// the records (each record's cache lines are read once); recs[i] is row
// rank[i] of the block. The six fields of the service tuple go only into
// e.tup: nearly every block codes them from it (putTuple), and
// untuple fills their columns for one that does not.
func (e *blockEncoder) extract(recs []flow.Record, rank []int32) {
	n := len(recs)
	for _, id := range intCols {
		e.cv[id] = slices.Grow(e.cv[id][:0], n)[:n]
	}
	ipv, er, vl, st := e.cv[cIPVersion][:n], e.cv[cEndReason][:n], e.cv[cVLAN][:n], e.cv[cStart][:n]
	pk, by, rpk, rby := e.cv[cPackets][:n], e.cv[cBytes][:n], e.cv[cRevPackets][:n], e.cv[cRevBytes][:n]
	tup := slices.Grow(e.tup[:0], n)[:n]
	en := slices.Grow(e.end[:0], n)[:n]
	e.tup, e.end = tup, en
	rank = rank[:n]
	// The sparse fields are only ORed here: they are zero in nearly every
	// block, whose columns are then left out without another pass.
	var ordp, ordb, orsm, orrs uint64
	var orns, ornd, ornv, orps, orpd, orvd, orrl, ormk, orzn, ornode uint64
	enr := false
	for i := range recs {
		r := &recs[i]
		j := rank[i] // records read in memory order, values written at their row
		ipv[j], er[j], vl[j], st[j] = uint64(r.Key.IPVersion), uint64(r.EndReason), uint64(r.VLAN), uint64(r.Start)
		pk[j], by[j], rpk[j], rby[j] = r.Packets, r.Bytes, r.RevPackets, r.RevBytes
		en[j] = uint64(r.End)
		tup[j] = tupleOf(r.Key.DstPort, r.Key.Proto, r.Key.ICMPType, r.Key.ICMPCode, r.TCPFlags, r.RevTCPFlags)
		ordp, ordb, orsm = ordp|r.DropPackets, ordb|r.DropBytes, orsm|uint64(r.Sampling)
		orrs |= uint64(len(r.DropReason))
		n := &r.PostNAT
		orns |= addrWords(&n.SrcAddr)
		ornd |= addrWords(&n.DstAddr)
		ornv, orps, orpd = ornv|uint64(n.IPVersion), orps|uint64(n.SrcPort), orpd|uint64(n.DstPort)
		orvd, orrl = orvd|uint64(r.Verdict), orrl|uint64(len(r.Rule))
		ormk, orzn = ormk|uint64(r.Mark), orzn|uint64(r.Zone)
		ornode |= uint64(len(r.Node))
		enr = enr || r.SrcWorkload != nil || r.DstWorkload != nil || r.Service != nil || r.ServiceMatch != 0
	}
	e.enr = enr
	z := &e.nonZero
	z[cDropPackets], z[cDropBytes], z[cSampling], z[cDropReason] = ordp, ordb, orsm, orrs
	z[cNATSrcAddr], z[cNATDstAddr], z[cNATVersion], z[cNATSrcPort], z[cNATDstPort] = orns, ornd, ornv, orps, orpd
	z[cVerdict], z[cRule], z[cMark], z[cZone] = orvd, orrl, ormk, orzn
	z[cNode] = ornode
}

// addrWords is the OR of an address's two 64-bit halves: 0 only for ::.
func addrWords(a *[16]byte) uint64 {
	return binary.LittleEndian.Uint64(a[:8]) | binary.LittleEndian.Uint64(a[8:])
}

// intCols are the columns extract fills.
var intCols = [...]int{cIPVersion, cPackets, cBytes, cRevPackets, cRevBytes, cEndReason, cVLAN, cStart}

// untuple fills the columns of the service tuple's six fields from e.tup
// (a block whose tuples do not fit one dictionary codes them one by one).
func (e *blockEncoder) untuple() {
	n := len(e.tup)
	for _, id := range [...]int{cDstPort, cProto, cICMPType, cICMPCode, cTCPFlags, cRevTCPFlags} {
		v := slices.Grow(e.cv[id][:0], n)[:n]
		e.cv[id] = v
		sh, m := tupleShift(id)
		for i, t := range e.tup {
			v[i] = t >> sh & m
		}
	}
}

// omitCol leaves sparse column id out of the block: it is all zero (or
// "", or ::) and its omitted bit says so.
func (e *blockEncoder) omitCol(id int) {
	e.omit |= 1 << uint(id)
	e.cols[id] = colMeta{}
}

// putSparse encodes a numeric sparse column: an all-zero one (extract
// says which) is left out without a pass over the rows.
func (e *blockEncoder) putSparse(id int, recs []flow.Record, dict bool) {
	if e.nonZero[id] == 0 {
		e.omitCol(id)
		return
	}
	v := slices.Grow(e.cv[id][:0], len(recs))[:len(recs)]
	e.cv[id] = v
	for i := range recs {
		v[i] = sparseOf(&recs[i], id)
	}
	e.putCol(id, false, false, dict)
}

// sparseOf is record r's value of numeric sparse column id.
func sparseOf(r *flow.Record, id int) uint64 {
	switch id {
	case cDropPackets:
		return r.DropPackets
	case cDropBytes:
		return r.DropBytes
	case cSampling:
		return uint64(r.Sampling)
	case cNATVersion:
		return uint64(r.PostNAT.IPVersion)
	case cNATSrcPort:
		return uint64(r.PostNAT.SrcPort)
	case cNATDstPort:
		return uint64(r.PostNAT.DstPort)
	case cVerdict:
		return uint64(r.Verdict)
	case cMark:
		return uint64(r.Mark)
	case cZone:
		return uint64(r.Zone)
	case cServiceMatch:
		return uint64(r.ServiceMatch)
	}
	return 0
}

// putStrs encodes string column id (DropReason, Rule, Node or an
// enrichment string; codec_str.go);
// its min and max are the shortest and longest string's lengths. It
// returns how many rows' strings were cut to maxStrLen.
func (e *blockEncoder) putStrs(id int, recs []flow.Record) (cut int) {
	if e.nonZero[id] == 0 {
		e.omitCol(id)
		return 0
	}
	var lo, hi uint64
	e.stream, lo, hi, cut = e.st.encodeCol(e.stream[:0], recs, id)
	enc := uint8(encSDict)
	if isLongStr(id) {
		enc = encSDictL
	}
	e.put(id, enc, e.stream, lo, hi, 0)
	return cut
}

// putNATAddr encodes a post-NAT address column (adict or araw, as the
// key's); rows not translated hold ::. No bloom filter: the NATVersion
// column's range says whether a block has translated rows at all.
func (e *blockEncoder) putNATAddr(id int, recs []flow.Record) {
	if e.nonZero[id] == 0 {
		e.omitCol(id)
		return
	}
	a := slices.Grow(e.addrs[:0], len(recs))[:len(recs)]
	for i := range recs {
		if id == cNATSrcAddr {
			a[i] = recs[i].PostNAT.SrcAddr
		} else {
			a[i] = recs[i].PostNAT.DstAddr
		}
	}
	e.addrs = a
	var enc uint8
	e.stream, enc = e.at.encodeAddrs(e.stream[:0], a, nil)
	e.put(id, enc, e.stream, 0, 0, 0)
}

// putCol encodes an extracted column.
func (e *blockEncoder) putCol(id int, signed, delta, dict bool) (lo, hi uint64) {
	var enc uint8
	e.stream, enc, lo, hi = e.ie.encodeInts(e.stream[:0], e.cv[id], signed, delta, dict)
	e.put(id, enc, e.stream, lo, hi, 0)
	return lo, hi
}

// putAddr encodes address column id from a (the rows' addresses) and
// fills its bloom filter with the block's distinct addresses.
func (e *blockEncoder) putAddr(id int, a [][16]byte, bl *bloom) {
	var enc uint8
	t := &e.at
	if id == cDstAddr {
		t = &e.at2
	}
	e.stream, enc = t.encodeAddrs(e.stream[:0], a, bl)
	e.put(id, enc, e.stream, 0, 0, 0)
}

// putPort encodes port column id from p (the rows' ports) and fills its
// bloom filter (or bucket bitmap) with the block's distinct ports.
func (e *blockEncoder) putPort(id int, p []uint16, bl *bloom) {
	u := slices.Grow(e.u[:0], len(p))[:len(p)]
	for i, x := range p {
		u[i] = uint64(x)
	}
	e.u = u
	e.putInts(id, false, false, true)
	e.portBloom(p, bl)
}

// portBloom fills a port column's bloom filter (or bucket bitmap) with
// the block's distinct ports of p.
func (e *blockEncoder) portBloom(p []uint16, bl *bloom) {
	d := e.ps.collect(p)
	bl.initPorts(len(d))
	for _, x := range d {
		bl.addPort(x)
	}
	bl.runPorts()
}

// addrPortCols are the columns putAddrsPorts encodes (DstPort is coded
// with the service tuple, putTuple; putAddrsPorts fills its filter).
var addrPortCols = [...]int{cSrcAddr, cDstAddr, cSrcPort}

// parallelMin is the fewest rows for which encode uses two goroutines.
const parallelMin = 1024

// putAddrsPorts encodes the address and port columns and fills their
// bloom filters.
func (e *blockEncoder) putAddrsPorts(recs []flow.Record, rank []int32, blooms *[numBlooms]bloom) {
	// One pass over the records for all four fields: on the second core
	// the records are not in cache, and each pass cost a miss a record.
	// recs[i] is row rank[i].
	n := len(recs)
	src, dst := slices.Grow(e.addrs[:0], n)[:n], slices.Grow(e.addrs2[:0], n)[:n]
	sp, dp := slices.Grow(e.u16[:0], n)[:n], slices.Grow(e.u16b[:0], n)[:n]
	e.addrs, e.addrs2, e.u16, e.u16b = src, dst, sp, dp
	rank = rank[:n]
	for i := range recs {
		k, j := &recs[i].Key, rank[i]
		src[j], dst[j], sp[j], dp[j] = k.SrcAddr, k.DstAddr, k.SrcPort, k.DstPort
	}
	e.putAddr(cSrcAddr, src, &blooms[bloomSrcAddr])
	e.putAddr(cDstAddr, dst, &blooms[bloomDstAddr])
	e.putPort(cSrcPort, sp, &blooms[bloomSrcPort])
	e.portBloom(dp, &blooms[bloomDstPort])
}

// encode appends the block for recs (in Start order) to dst.
func (e *blockEncoder) encode(dst []byte, recs []flow.Record) ([]byte, *blockHeader) {
	return e.encodeRanked(dst, recs, nil, nil)
}

// encodeRanked appends the block whose row j is src[perm[j]] to dst;
// rank is perm's inverse (both nil: src is in order). The hot passes read
// src in memory order and write each value at its row, so the records are
// not gathered (a random 312-byte copy a row); only a block that uses a
// rare column (drops, NAT, conntrack, enrichment, differing nodes) is.
func (e *blockEncoder) encodeRanked(dst []byte, src []flow.Record, perm, rank []int32) ([]byte, *blockHeader) {
	e.payload = e.payload[:0]
	e.rows = len(src)
	if rank == nil {
		rank = e.identity(len(src))
	}
	recs := src // the rows in Start order once gathered; src itself while no pass needs their order
	// Addresses and ports (about 45% of the work) are encoded on a second
	// goroutine with its own scratch while this one does the rest; the
	// payload holds the rest first, so the counters a group-by reads sit
	// next to the address columns.
	a, par := e, len(recs) >= parallelMin && runtime.GOMAXPROCS(0) > 1
	var wg sync.WaitGroup
	if par {
		if e.aux == nil {
			e.aux = &blockEncoder{zenc: e.zenc}
		}
		a = e.aux
		a.payload, a.rows = a.payload[:0], len(recs)
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.putAddrsPorts(src, rank, &e.blooms)
		}()
	}
	e.extract(src, rank)
	if perm != nil && e.needOrder(src) {
		e.ord = slices.Grow(e.ord[:0], len(src))[:len(src)]
		for j, k := range perm {
			e.ord[j] = src[k]
		}
		recs = e.ord
	}
	// The sparse columns first: a query that does not read them never has
	// them inside the byte span it reads. Nearly always they are left out.
	e.omit = 0
	e.putSparse(cDropPackets, recs, true)
	e.putSparse(cDropBytes, recs, true)
	e.cut = e.putStrs(cDropReason, recs)
	e.putSparse(cSampling, recs, false)
	e.putNATAddr(cNATSrcAddr, recs)
	e.putNATAddr(cNATDstAddr, recs)
	e.putSparse(cNATVersion, recs, false)
	e.putSparse(cNATSrcPort, recs, true)
	e.putSparse(cNATDstPort, recs, true)
	e.putSparse(cVerdict, recs, false)
	e.cutRule = e.putStrs(cRule, recs)
	e.putSparse(cMark, recs, true)
	e.putSparse(cZone, recs, true)
	e.cutEnr = e.putEnrich(recs)
	// One node (nearly always): a one-entry dictionary without index
	// planes, a few bytes a block; none (""): left out.
	e.cutNode = e.putStrs(cNode, recs)
	minStart, _ := e.putCol(cStart, true, true, false)
	e.putEnd()
	maxEnd := e.cols[cEnd].max
	if !e.putTuple() {
		e.untuple()
		e.putCol(cDstPort, false, false, true)
		for _, id := range tupleCols {
			e.putCol(id, false, false, false)
		}
	}
	for _, id := range []int{cIPVersion, cEndReason} {
		e.putCol(id, false, false, false)
	}
	for _, id := range []int{cVLAN, cPackets} {
		e.putCol(id, false, false, true)
	}
	e.putRevPackets()
	e.putPerPacket(cBytes, cPackets)
	e.putPerPacket(cRevBytes, cRevPackets)
	if par {
		wg.Wait()
		for _, id := range addrPortCols {
			e.cols[id] = a.cols[id]
			e.cols[id].off += uint32(len(e.payload))
		}
		e.payload = append(e.payload, a.payload...)
	} else {
		e.putAddrsPorts(src, rank, &e.blooms)
	}

	h := &blockHeader{rows: len(recs), minStart: int64(minStart), maxEnd: int64(maxEnd)}
	if len(recs) == 0 {
		h.minStart, h.maxEnd = 0, 0
	}
	h.omit, h.cols, h.ncols = e.omit, e.cols, numCols
	dst = appendHeader(dst, h, &e.blooms, len(e.payload))
	dst = append(dst, e.payload...)
	e.cols = h.cols
	return dst, h
}
