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
	"strings"
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
	return b.h.blooms[bloomSrcAddr].has(addrKey(&a))
}

// MayContainDst is MayContainSrc for the destination address.
func (b *BlockInfo) MayContainDst(a [16]byte) bool {
	return b.h.blooms[bloomDstAddr].has(addrKey(&a))
}

// MayContainAddr reports whether a may be the source or destination.
func (b *BlockInfo) MayContainAddr(a [16]byte) bool {
	k := addrKey(&a)
	return b.h.blooms[bloomSrcAddr].has(k) || b.h.blooms[bloomDstAddr].has(k)
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
// int64 bits; for ColDropReason and ColRule the shortest and longest
// string's length in bytes). ok is false for address columns, several
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
}

// Blocks lists the committed blocks of the given interfaces (all when
// ifaces is empty) whose [MinStart, MaxEnd] overlaps [from, to] (Unix ns;
// to == 0 means no upper bound), ordered by interface, day and offset. Each
// call reloads the indexes, so it sees blocks committed since the last
// call; headers already read are cached. Blocks whose headers fail their
// checks are skipped and counted.
func (s *Store) Blocks(from, to int64, ifaces []string) ([]BlockInfo, error) {
	if to == 0 {
		to = math.MaxInt64
	}
	dirs, err := s.ifaceDirs(ifaces)
	if err != nil {
		return nil, err
	}
	var out []BlockInfo
	s.rmu.Lock()
	defer s.rmu.Unlock()
	for _, idir := range dirs {
		days, err := os.ReadDir(idir)
		if err != nil {
			continue // deleted meanwhile
		}
		for _, de := range days {
			day, ok := parseDay(de.Name())
			if !ok || day*86400*1e9 > to {
				continue
			}
			rp := s.refresh(filepath.Join(idir, de.Name()), de.Name())
			if rp == nil || (len(ifaces) > 0 && !slices.Contains(ifaces, rp.iface)) {
				continue
			}
			for _, b := range rp.infos {
				if b.MaxEnd >= from && b.MinStart <= to {
					out = append(out, b)
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Iface != out[j].Iface {
			return out[i].Iface < out[j].Iface
		}
		return out[i].Day < out[j].Day
	})
	return out, nil
}

// ifaceDirs lists the interface directories to visit.
func (s *Store) ifaceDirs(ifaces []string) ([]string, error) {
	if len(ifaces) > 0 {
		var out []string
		for _, n := range ifaces {
			out = append(out, filepath.Join(s.dir, escapeIface(n)))
		}
		return out, nil
	}
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, filepath.Join(s.dir, e.Name()))
		}
	}
	return out, nil
}

// refresh brings the cached view of partition dir up to its current index;
// nil means nothing readable there. Called with s.rmu held.
func (s *Store) refresh(dir, day string) *readPart {
	x, err := readIndex(dir)
	if errors.Is(err, errBadIndex) {
		if s.markOnce(dir, -1) {
			s.corruptIndexes.Add(1)
			s.warn("index of " + dir + " failed its CRC; blocks recovered by scanning")
		}
	} else if err != nil {
		delete(s.rparts, dir)
		return nil
	}
	rp := s.rparts[dir]
	if rp == nil || rp.epoch != x.epoch || rp.nEntries > len(x.entries) {
		f, err := os.Open(filepath.Join(dir, dataName))
		if err != nil {
			delete(s.rparts, dir)
			return nil
		}
		rp = &readPart{dir: dir, iface: x.iface, day: day, f: f, epoch: x.epoch}
		s.rparts[dir] = rp
	}
	rp.iface = x.iface
	var hb []byte
	for _, e := range x.entries[rp.nEntries:] {
		hb = slices.Grow(hb[:0], e.headerLen)[:e.headerLen]
		n, err := rp.f.ReadAt(hb, e.off)
		var h *blockHeader
		if n == len(hb) {
			h, err = parseHeader(hb, true)
		} else if err == nil {
			err = errCorruptBlock
		}
		if err == nil && (h.blockLen != e.blockLen || h.rows != e.rows || h.minStart != e.minStart || h.maxEnd != e.maxEnd) {
			err = errCorruptBlock
		}
		if err != nil {
			s.markCorrupt(dir, e.off, "header: "+err.Error())
			continue
		}
		// The next blocks are appended; earlier copies handed out stay valid.
		rp.infos = append(rp.infos, BlockInfo{Iface: x.iface, Day: day, Offset: e.off, Size: e.blockLen,
			Rows: e.rows, MinStart: e.minStart, MaxEnd: e.maxEnd, h: h, rp: rp})
	}
	rp.nEntries = len(x.entries)
	return rp
}

// markOnce records (dir, off) as seen and reports whether it is new.
func (s *Store) markOnce(dir string, off int64) bool {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if _, ok := s.corrupt[blockID{dir, off}]; ok {
		return false
	}
	if len(s.corrupt) < 1<<16 {
		s.corrupt[blockID{dir, off}] = struct{}{}
	}
	return true
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
	d := decoderPool.Get().(*decoder)
	defer decoderPool.Put(d)
	lo, hi := b.h.span(want)
	buf := slices.Grow(d.raw[:0], hi-lo)[:hi-lo]
	d.raw = buf
	if n, err := b.rp.f.ReadAt(buf, b.Offset+int64(lo)); n < len(buf) {
		if err != nil && !isEOF(err) {
			return fmt.Errorf("store: read block: %w", err)
		}
		s.markCorrupt(b.rp.dir, b.Offset, "truncated")
		return fmt.Errorf("%w: %s offset %d: truncated", ErrCorrupt, b.rp.dir, b.Offset)
	}
	if err := d.decodeCols(b.h, buf, lo, want, dst, true); err != nil {
		if errors.Is(err, errCorruptBlock) || errors.Is(err, errBadStream) {
			s.markCorrupt(b.rp.dir, b.Offset, err.Error())
			return fmt.Errorf("%w: %s offset %d: %v", ErrCorrupt, b.rp.dir, b.Offset, err)
		}
		return err
	}
	dst.N = b.Rows
	return nil
}

// Ifaces lists the interface names that have partitions.
func (s *Store) Ifaces() ([]string, error) {
	dirs, err := s.ifaceDirs(nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, idir := range dirs {
		days, _ := os.ReadDir(idir)
		for i := len(days) - 1; i >= 0; i-- {
			if _, ok := parseDay(days[i].Name()); !ok {
				continue
			}
			if x, err := readIndex(filepath.Join(idir, days[i].Name())); x != nil && (err == nil || errors.Is(err, errBadIndex)) {
				out = append(out, x.iface)
				break
			}
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
