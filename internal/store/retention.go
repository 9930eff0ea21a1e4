package store

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// PruneStats counts what one Prune removed.
type PruneStats struct {
	Partitions int   // day partitions deleted whole (all their blocks went)
	Blocks     int   // blocks deleted, in them or alone
	Rows       int64 // rows in those blocks
	Bytes      int64 // disk space freed
}

// errPunch means the file system cannot punch holes (punchHole).
var errPunch = errors.New("store: hole punching not supported")

// Prune deletes blocks, the unit of retention: first those whose rows all
// ended before now minus Config.Retention, then the oldest (by their last
// End) until the store takes at most Config.MaxSize bytes of disk. A
// partition keeps its newer blocks: the index is rewritten without the
// pruned ones (temp, fsync, rename) and their bytes are freed by punching
// holes (Linux), or where that is not supported by rewriting the
// partition beside the old one and swapping the two. A partition left
// without blocks is renamed to a dot-name (which readers ignore) and
// deleted.
func (s *Store) Prune(now time.Time) (PruneStats, error) {
	if s.readOnly {
		return PruneStats{}, ErrReadOnly
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return PruneStats{}, ErrClosed
	}
	return s.pruneLocked(now)
}

// prunePart is one partition as prune sees it.
type prunePart struct {
	pd   partDir
	x    *index
	size int64  // disk space of its files
	drop []bool // per index entry
}

// measure returns the disk space of d's files.
func measure(d *dirH) int64 {
	var n int64
	for _, name := range []string{dataName, indexName, indexTemp} {
		if f, err := d.open(name, os.O_RDONLY, 0); err == nil {
			if st, err := f.Stat(); err == nil {
				n += allocated(st)
			}
			f.Close()
		}
	}
	return n
}

// survey lists every partition with its committed index and size.
func (s *Store) survey() ([]*prunePart, int64, error) {
	pds, err := s.walkParts(nil)
	if err != nil {
		return nil, 0, err
	}
	var out []*prunePart
	var total int64
	for _, pd := range pds {
		d, err := s.openPartDir(pd, false)
		if err != nil {
			continue
		}
		pp := &prunePart{pd: pd, size: measure(d)}
		if x, _, err := readIndex(d); err == nil || errors.Is(err, errBadIndex) {
			pp.x = x
		} else {
			pp.x = &index{}
		}
		d.close()
		pp.drop = make([]bool, len(pp.x.entries))
		total += pp.size
		out = append(out, pp)
	}
	return out, total, nil
}

func (s *Store) pruneLocked(now time.Time) (PruneStats, error) {
	var st PruneStats
	var errs []error
	// Prune reads and rewrites committed indexes: none may be in flight.
	s.drain()
	for round := 0; round < 3; round++ { // again if freeing fell short of the estimate (file system block edges)
		parts, total, err := s.survey()
		if err != nil {
			return st, err
		}
		if !s.choosePrune(parts, total, now) {
			s.bytesOnDisk.Store(total)
			break
		}
		for _, pp := range parts {
			if slices.Contains(pp.drop, true) {
				if err := s.prunePart(pp, &st); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if len(errs) > 0 {
			break
		}
	}
	s.prunedParts.Add(int64(st.Partitions))
	s.prunedBlocks.Add(int64(st.Blocks))
	s.prunedRows.Add(st.Rows)
	s.prunedBytes.Add(st.Bytes)
	return st, errors.Join(errs...)
}

// choosePrune marks the blocks to delete; false when there are none.
// What a block frees is estimated as its length and index entry, and a
// partition's last block as what is left of the partition's files;
// pruneLocked measures again and goes on if that fell short.
func (s *Store) choosePrune(parts []*prunePart, total int64, now time.Time) bool {
	type ref struct {
		pp *prunePart
		i  int
	}
	var live []ref
	var freed int64
	marked := false
	left := make(map[*prunePart]int, len(parts))      // blocks not marked
	counted := make(map[*prunePart]int64, len(parts)) // freed estimate so far
	mark := func(pp *prunePart, i int) {
		pp.drop[i] = true
		marked = true
		left[pp]--
		n := int64(pp.x.entries[i].blockLen) + indexEntry
		if left[pp] == 0 {
			n = max(pp.size-counted[pp], 0)
		}
		counted[pp] += n
		freed += n
	}
	cutoff := now.Add(-s.cfg.Retention).UnixNano()
	for _, pp := range parts {
		left[pp] = len(pp.x.entries)
	}
	for _, pp := range parts {
		for i, e := range pp.x.entries {
			if s.cfg.Retention > 0 && e.maxEnd < cutoff {
				mark(pp, i)
			} else {
				live = append(live, ref{pp, i})
			}
		}
	}
	if s.cfg.MaxSize <= 0 || total-freed <= s.cfg.MaxSize {
		return marked
	}
	// Oldest first: by the last End, then the first Start, then place.
	slices.SortFunc(live, func(a, b ref) int {
		ea, eb := a.pp.x.entries[a.i], b.pp.x.entries[b.i]
		switch {
		case ea.maxEnd != eb.maxEnd:
			return cmpInt(ea.maxEnd, eb.maxEnd)
		case ea.minStart != eb.minStart:
			return cmpInt(ea.minStart, eb.minStart)
		case a.pp != b.pp:
			return strings.Compare(a.pp.pd.path, b.pp.pd.path)
		}
		return cmpInt(ea.off, eb.off)
	})
	for _, r := range live {
		if total-freed <= s.cfg.MaxSize {
			break
		}
		mark(r.pp, r.i)
	}
	if total-freed > s.cfg.MaxSize && s.markOnce(s.dir, -3) {
		s.warn(fmt.Sprintf("--max-size %s is below what the newest blocks take: everything stored was pruned", commas(s.cfg.MaxSize)))
	}
	return marked
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// prunePart deletes pp's marked blocks.
func (s *Store) prunePart(pp *prunePart, st *PruneStats) error {
	for _, wp := range s.parts {
		if wp.dir == pp.pd.path {
			s.closePart(wp) // its buffered rows stay; the next writeout reopens the new index
		}
	}
	var blocks int
	var rows int64
	var keep []indexEntryT
	for i, e := range pp.x.entries {
		if pp.drop[i] {
			blocks++
			rows += int64(e.rows)
		} else {
			keep = append(keep, e)
		}
	}
	if len(keep) == 0 {
		if err := s.removePart(pp.pd); err != nil {
			return err
		}
		st.Partitions++
		st.Blocks += blocks
		st.Rows += rows
		st.Bytes += pp.size
		return nil
	}
	d, err := s.openPartDir(pp.pd, false)
	if err != nil {
		return fmt.Errorf("store: prune %s: %w", pp.pd.path, err)
	}
	defer d.close()
	nx := &index{epoch: newEpoch(), gen: pp.x.gen + 1, iface: pp.x.iface, entries: keep}
	last := keep[len(keep)-1]
	nx.dataLen = last.off + int64(last.blockLen)
	err = s.dropBlocks(d, nx)
	if errors.Is(err, errPunch) {
		err = s.rewritePart(pp.pd, d, nx)
	}
	if err != nil {
		return fmt.Errorf("store: prune %s: %w", pp.pd.path, err)
	}
	st.Blocks += blocks
	st.Rows += rows
	if d2, err := s.openPartDir(pp.pd, false); err == nil {
		st.Bytes += max(pp.size-measure(d2), 0)
		d2.close()
	}
	return nil
}

// dropBlocks commits nx (the index without the pruned blocks; readers,
// seeing a new epoch, reload it), then frees every byte of the data file
// that nx does not list: the tail is cut, the rest punched out. A crash
// in between leaves the index right and bytes unfreed, which the next
// prune of the partition frees (it punches every unlisted range).
func (s *Store) dropBlocks(d *dirH, nx *index) error {
	if s.noPunch {
		return errPunch
	}
	f, err := d.open(dataName, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := writeIndex(d, nx, !s.cfg.NoSync, s.fPerm); err != nil {
		return err
	}
	if err := f.Truncate(nx.dataLen); err != nil {
		return err
	}
	var at int64
	for _, e := range nx.entries {
		if err := punchHole(f, at, e.off-at); err != nil {
			return err
		}
		at = e.off + int64(e.blockLen)
	}
	if !s.cfg.NoSync {
		return f.Sync()
	}
	return nil
}

// rewritePart writes nx's blocks into a new partition ".cmp-<day>" beside
// the old one, fsyncs it, and swaps the two by renames: a crash leaves
// the old partition, or the new one complete (finishInterrupted).
func (s *Store) rewritePart(pd partDir, d *dirH, nx *index) error {
	id, err := s.root.sub(pd.iname, false, 0, false)
	if err != nil {
		return err
	}
	defer id.close()
	tmp := ".cmp-" + pd.dname
	if err := id.removeAll(tmp); err != nil {
		return err
	}
	sync := !s.cfg.NoSync
	nd, err := id.sub(tmp, true, s.dirPerm, sync)
	if err != nil {
		return err
	}
	defer nd.close()
	src, err := d.open(dataName, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := nd.open(dataName, os.O_WRONLY|os.O_CREATE|os.O_EXCL, s.fPerm)
	if err != nil {
		return err
	}
	cx := &index{epoch: nx.epoch, gen: nx.gen, iface: nx.iface}
	var buf []byte
	for _, e := range nx.entries {
		buf = slices.Grow(buf[:0], e.blockLen)[:e.blockLen]
		if _, err = src.ReadAt(buf, e.off); err == nil {
			_, err = dst.Write(buf)
		}
		if err != nil {
			dst.Close()
			return err
		}
		e.off = cx.dataLen
		cx.entries = append(cx.entries, e)
		cx.dataLen += int64(e.blockLen)
	}
	if sync {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		_, err = writeIndex(nd, cx, sync, s.fPerm)
	}
	if err != nil {
		return err
	}
	tomb := fmt.Sprintf(".del-%s-%x", pd.dname, newEpoch())
	if err := id.rename(pd.dname, tomb); err != nil {
		return err
	}
	if err := id.rename(tmp, pd.dname); err != nil {
		return err
	}
	if sync {
		_ = id.sync()
	}
	return id.removeAll(tomb)
}

// removePart renames pd out of sight and deletes it.
func (s *Store) removePart(pd partDir) error {
	id, err := s.root.sub(pd.iname, false, 0, false)
	if err != nil {
		return fmt.Errorf("store: prune %s: %w", pd.path, err)
	}
	defer id.close()
	tomb := fmt.Sprintf(".del-%s-%x", pd.dname, newEpoch())
	if err := id.rename(pd.dname, tomb); err != nil {
		return fmt.Errorf("store: prune %s: %w", pd.path, err)
	}
	if !s.cfg.NoSync {
		_ = id.sync()
	}
	if err := id.removeAll(tomb); err != nil {
		return fmt.Errorf("store: prune %s: %w", pd.path, err)
	}
	return nil
}

// finishInterrupted completes what a crash interrupted: deletions
// (".del-" tombstones) and partition rewrites (".cmp-<day>": complete
// once the old partition was renamed away, else discarded).
func (s *Store) finishInterrupted() {
	ents, _ := s.root.list()
	for _, ie := range ents {
		if !ie.dir || strings.HasPrefix(ie.name, ".") {
			continue
		}
		id, err := s.root.sub(ie.name, false, 0, false)
		if err != nil {
			continue
		}
		des, _ := id.list()
		for _, e := range des {
			switch {
			case strings.HasPrefix(e.name, ".cmp-"):
				day := strings.TrimPrefix(e.name, ".cmp-")
				if _, ok := parseDay(day); !ok {
					continue
				}
				if d, err := id.sub(day, false, 0, false); err == nil {
					d.close()
					_ = id.removeAll(e.name)
				} else if id.rename(e.name, day) == nil && !s.cfg.NoSync {
					_ = id.sync()
				}
			case strings.HasPrefix(e.name, ".del-"):
				_ = id.removeAll(e.name)
			}
		}
		id.close()
	}
}

// surveyOnOpen measures the store and says what damage its indexes show
// (an index failing its checksum, blocks listed past the end of their
// file), so that a capture opening the store reports it at once.
func (s *Store) surveyOnOpen() int64 {
	pds, _ := s.walkParts(nil)
	var total int64
	for _, pd := range pds {
		d, err := s.openPartDir(pd, false)
		if err != nil {
			continue
		}
		total += measure(d)
		x, gaps, err := readIndex(d)
		if errors.Is(err, errBadIndex) {
			s.badIndex(pd.path, x, gaps, err)
		}
		if x != nil {
			var size int64 = -1
			if f, err := d.open(dataName, os.O_RDONLY, 0); err == nil {
				if st, err := f.Stat(); err == nil {
					size = st.Size()
				}
				f.Close()
			} else if errors.Is(err, os.ErrNotExist) {
				size = 0 // every block the index lists is gone
			}
			for _, e := range x.entries {
				if size >= 0 && e.off+int64(e.blockLen) > size {
					s.markCorrupt(pd.path, e.off, int64(e.blockLen), e.rows, fmt.Sprintf("past the end of the file (%d bytes): cut off", size))
				}
			}
		}
		d.close()
	}
	return total
}
