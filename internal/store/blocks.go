package store

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"
)

// BlockInfo describes one committed block: where it is, its time span and
// summaries that let a reader skip it without decoding.
type BlockInfo struct {
	Iface    string
	Day      string // UTC day partition, YYYY-MM-DD
	Offset   int64  // in the partition's data file
	Size     int    // bytes on disk
	Rows     int
	MinStart int64 // Unix ns
	MaxEnd   int64 // Unix ns

	h  *blockHeader
	rp *readPart
}

// MayContainSrc reports whether the block may hold source address a
// (16 bytes, IPv4-mapped for IPv4); false means certainly absent.
func (b *BlockInfo) MayContainSrc(a [16]byte) bool {
	return b.h.blooms[bloomSrcAddr].hasAddr(&a)
}

// MayContainDst is MayContainSrc for the destination address.
func (b *BlockInfo) MayContainDst(a [16]byte) bool {
	return b.h.blooms[bloomDstAddr].hasAddr(&a)
}

// MayContainAddr reports whether a may be the source or destination.
func (b *BlockInfo) MayContainAddr(a [16]byte) bool {
	return b.h.blooms[bloomSrcAddr].hasAddr(&a) || b.h.blooms[bloomDstAddr].hasAddr(&a)
}

// MayContainSrcPort reports whether the block may hold source port p.
func (b *BlockInfo) MayContainSrcPort(p uint16) bool {
	c := &b.h.cols[cSrcPort]
	return uint64(p) >= c.min && uint64(p) <= c.max && b.h.blooms[bloomSrcPort].hasPort(p)
}

// MayContainDstPort reports whether the block may hold destination port p.
func (b *BlockInfo) MayContainDstPort(p uint16) bool {
	c := &b.h.cols[cDstPort]
	return uint64(p) >= c.min && uint64(p) <= c.max && b.h.blooms[bloomDstPort].hasPort(p)
}

// MayContainPort reports whether p may be the source or destination port.
func (b *BlockInfo) MayContainPort(p uint16) bool {
	return b.MayContainSrcPort(p) || b.MayContainDstPort(p)
}

// Range returns the minimum and maximum of one numeric column (a single
// Column bit; for ColICMP, ColFlags the first of the pair; Start and End are
// int64 bits; for ColDropReason, ColRule and ColNode the shortest and
// longest string's length in bytes). ok is false for address columns, several
// bits, or a block without rows. Blocks older than a column, and version
// 4 blocks that left a column out, report 0, 0 for it, as it reads: a
// block whose ColNATVersion range is 0, 0 has no translated row.
func (b *BlockInfo) Range(c Column) (lo, hi uint64, ok bool) {
	if b.Rows == 0 {
		return 0, 0, false
	}
	var id int
	switch c {
	case ColSrcPort:
		id = cSrcPort
	case ColDstPort:
		id = cDstPort
	case ColProto:
		id = cProto
	case ColICMP:
		id = cICMPType
	case ColPackets:
		id = cPackets
	case ColBytes:
		id = cBytes
	case ColRevPackets:
		id = cRevPackets
	case ColRevBytes:
		id = cRevBytes
	case ColFlags:
		id = cTCPFlags
	case ColReason:
		id = cEndReason
	case ColStart:
		id = cStart
	case ColEnd:
		id = cEnd
	case ColVLAN:
		id = cVLAN
	case ColIPVersion:
		id = cIPVersion
	case ColDropPackets:
		id = cDropPackets
	case ColDropBytes:
		id = cDropBytes
	case ColDropReason:
		id = cDropReason
	case ColSampling:
		id = cSampling
	case ColNATVersion:
		id = cNATVersion
	case ColNATSrcPort:
		id = cNATSrcPort
	case ColNATDstPort:
		id = cNATDstPort
	case ColVerdict:
		id = cVerdict
	case ColRule:
		id = cRule
	case ColMark:
		id = cMark
	case ColZone:
		id = cZone
	case ColServiceMatch:
		id = cServiceMatch
	case ColNode:
		id = cNode
	default:
		return 0, 0, false
	}
	m := &b.h.cols[id]
	return m.min, m.max, true
}

// readPart is a reader's cached view of one partition.
type readPart struct {
	dir      string
	iface    string
	day      string
	f        *os.File
	epoch    uint64
	nEntries int         // index entries examined
	infos    []BlockInfo // the intact ones
	bad      []Damage    // the entries skipped: header damaged, or past the end of the file
	badSpan  [][2]int64  // their index entries' MinStart and MaxEnd
}

// Blocks lists the committed blocks of the given interfaces (all when
// ifaces is empty) whose [MinStart, MaxEnd] overlaps [from, to] (Unix ns;
// to == 0 means no upper bound), ordered by interface, day and offset. Each
// call reloads the indexes, so it sees blocks committed since the last
// call; headers already read are cached. Blocks whose headers fail their
// checks, or that lie past the end of their file, are skipped, counted
// (Stats.CorruptBlocks) and said once each (Stats.Warnings, Config.Log);
// BlocksDamaged also returns them.
func (s *Store) Blocks(from, to int64, ifaces []string) ([]BlockInfo, error) {
	bl, _, err := s.BlocksDamaged(from, to, ifaces)
	return bl, err
}

// BlocksDamaged is Blocks that also returns the committed blocks of the
// range it skipped as damaged, with the records each held (from the
// index), for a reader to report what its answer leaves out.
func (s *Store) BlocksDamaged(from, to int64, ifaces []string) ([]BlockInfo, []Damage, error) {
	if to == 0 {
		to = math.MaxInt64
	}
	parts, err := s.walkParts(ifaces)
	if err != nil {
		return nil, nil, err
	}
	var out []BlockInfo
	var bad []Damage
	s.rmu.Lock()
	defer s.rmu.Unlock()
	for _, pd := range parts {
		if dn := int64(24 * time.Hour); pd.day > math.MaxInt64/dn || pd.day > math.MinInt64/dn && pd.day*dn > to {
			continue
		}
		rp := s.refresh(pd)
		if rp == nil || (len(ifaces) > 0 && !slices.Contains(ifaces, rp.iface)) {
			continue
		}
		for _, b := range rp.infos {
			if b.MaxEnd >= from && b.MinStart <= to {
				out = append(out, b)
			}
		}
		for i, d := range rp.bad {
			if sp := rp.badSpan[i]; sp[1] >= from && sp[0] <= to {
				bad = append(bad, d)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Iface != out[j].Iface {
			return out[i].Iface < out[j].Iface
		}
		return out[i].Day < out[j].Day
	})
	return out, bad, nil
}

// refresh brings the cached view of partition pd up to its current index;
// nil means nothing readable there. Called with s.rmu held.
func (s *Store) refresh(pd partDir) *readPart { return s.refreshOnce(pd, true) }

func (s *Store) refreshOnce(pd partDir, again bool) *readPart {
	dir := pd.path
	d, err := s.openPartDir(pd, false)
	if err != nil {
		s.skipLink(dir, err)
		delete(s.rparts, dir)
		return nil
	}
	defer d.close()
	x, gaps, err := readIndex(d)
	if errors.Is(err, errBadIndex) {
		if s.markOnce(dir, -1) {
			s.corruptIndexes.Add(1)
			s.warn("index of " + safePath(dir) + " " + indexWhy(err) + "; blocks recovered by scanning the data file")
		}
		for _, g := range gaps {
			s.markCorrupt(dir, g.off, g.end-g.off, -1, g.why)
		}
	} else if err != nil {
		s.skipLink(dir, err)
		delete(s.rparts, dir)
		return nil
	}
	rp := s.rparts[dir]
	if rp == nil || rp.epoch != x.epoch || rp.nEntries > len(x.entries) {
		f, err := d.open(dataName, os.O_RDONLY, 0)
		if err != nil {
			s.skipLink(dir, err)
			if errors.Is(err, os.ErrNotExist) { // the index lists blocks of a file that is gone
				for _, e := range x.entries {
					s.markCorrupt(dir, e.off, int64(e.blockLen), e.rows, "the block file is missing")
				}
			}
			delete(s.rparts, dir)
			return nil
		}
		rp = &readPart{dir: dir, iface: x.iface, day: pd.dname, f: f, epoch: x.epoch}
		s.rparts[dir] = rp
	}
	rp.iface = x.iface
	size := int64(math.MaxInt64)
	if st, err := rp.f.Stat(); err == nil {
		size = st.Size()
	}
	var hb []byte
	var bad []Damage
	var badSpan [][2]int64
	infos := rp.infos
	for _, e := range x.entries[rp.nEntries:] {
		var h *blockHeader
		var why string
		if end := e.off + int64(e.blockLen); end > size {
			why = fmt.Sprintf("past the end of the file (%d bytes): cut off", size)
		} else {
			hb = slices.Grow(hb[:0], e.headerLen)[:e.headerLen]
			n, err := rp.f.ReadAt(hb, e.off)
			if n == len(hb) {
				h, err = parseHeader(hb, true)
			} else if err == nil {
				err = errCorruptBlock
			}
			if err == nil && (h.blockLen != e.blockLen || h.rows != e.rows || h.minStart != e.minStart || h.maxEnd != e.maxEnd) {
				err = errCorruptBlock
			}
			if err != nil {
				why = "header damaged (checksum or fields do not match the index)"
			}
		}
		if why != "" {
			bad = append(bad, Damage{File: filepath.Join(dir, dataName), Offset: e.off, Size: int64(e.blockLen), Rows: e.rows, Reason: why})
			badSpan = append(badSpan, [2]int64{e.minStart, e.maxEnd})
			continue
		}
		// The next blocks are appended; earlier copies handed out stay valid.
		infos = append(infos, BlockInfo{Iface: x.iface, Day: pd.dname, Offset: e.off, Size: e.blockLen,
			Rows: e.rows, MinStart: e.minStart, MaxEnd: e.maxEnd, h: h, rp: rp})
	}
	if len(bad) > 0 && again {
		// Retention may have pruned (punched out) blocks since the index
		// was read: damage only counts if the index did not change.
		if x2, _, err := readIndex(d); err == nil && x2.epoch != x.epoch {
			delete(s.rparts, dir)
			return s.refreshOnce(pd, false)
		}
	}
	for _, b := range bad {
		s.markCorrupt(dir, b.Offset, b.Size, b.Rows, b.Reason)
	}
	rp.infos = infos
	rp.bad = append(rp.bad, bad...)
	rp.badSpan = append(rp.badSpan, badSpan...)
	rp.nEntries = len(x.entries)
	return rp
}

// skipLink says once that a link (or other non-store entry) where a
// partition's directory or file goes was skipped.
func (s *Store) skipLink(dir string, err error) {
	if errors.Is(err, ErrSymlink) && s.markOnce(dir, -2) {
		s.warn(errText(err) + ": skipped")
	}
}

// ReadBlock decodes the wanted columns of b into dst, reusing dst's slices.
// It is safe for concurrent use with distinct dst. A block failing its CRCs
// or truncated returns an error wrapping ErrCorrupt (and is counted); dst's
// contents are then undefined.
func (s *Store) ReadBlock(b *BlockInfo, want Column, dst *Columns) error {
	if b == nil || b.h == nil || b.rp == nil {
		return errors.New("store: ReadBlock of a BlockInfo not from Blocks")
	}
	dst.reset()
	dst.Iface = b.Iface
	return s.readCols(b, want, dst)
}

// damaged reports block b as corrupt, unless retention pruned it since
// Blocks listed it (its bytes were freed: ErrPruned, not counted).
func (s *Store) damaged(b *BlockInfo, why string) error {
	if s.pruned(b) {
		return fmt.Errorf("%w: %s offset %d", ErrPruned, safePath(b.rp.dir), b.Offset)
	}
	s.markCorrupt(b.rp.dir, b.Offset, int64(b.Size), b.Rows, why)
	return fmt.Errorf("%w: %s offset %d: %s", ErrCorrupt, safePath(b.rp.dir), b.Offset, why)
}

// pruned reports whether b's partition no longer lists b.
func (s *Store) pruned(b *BlockInfo) bool {
	pd := partDir{iname: filepath.Base(filepath.Dir(b.rp.dir)), dname: b.rp.day}
	d, err := s.openPartDir(pd, false)
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	defer d.close()
	x, _, err := readIndex(d)
	if err != nil || x.epoch == b.rp.epoch {
		return false
	}
	for _, e := range x.entries {
		if e.off == b.Offset && e.blockLen == b.Size {
			return false
		}
	}
	return true
}

// Ifaces lists the interface names that have partitions.
func (s *Store) Ifaces() ([]string, error) {
	parts, err := s.walkParts(nil)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for i := len(parts) - 1; i >= 0; i-- { // newest day of each interface first
		pd := parts[i]
		if seen[pd.iname] {
			continue
		}
		d, err := s.openPartDir(pd, false)
		if err != nil {
			continue
		}
		x, _, err := readIndex(d)
		d.close()
		if x != nil && (err == nil || errors.Is(err, errBadIndex)) {
			out = append(out, x.iface)
			seen[pd.iname] = true
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Span returns the earliest Start and latest End over all blocks (0, 0 for
// an empty store).
func (s *Store) Span() (first, last int64, err error) {
	bl, err := s.Blocks(math.MinInt64, math.MaxInt64, nil)
	if err != nil || len(bl) == 0 {
		return 0, 0, err
	}
	first, last = bl[0].MinStart, bl[0].MaxEnd
	for _, b := range bl[1:] {
		first, last = min(first, b.MinStart), max(last, b.MaxEnd)
	}
	return first, last, nil
}

func isEOF(err error) bool {
	return err != nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF))
}
