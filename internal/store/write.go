package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// minSpanRows is the fewest rows a partition holds before a Start span of
// Writeout writes it out: records replayed in time order still make
// blocks of about Writeout each, but Start times an exporter sets at
// random cannot cut blocks of a few rows (each row's Start would span).
const minSpanRows = 1 << 14

// maxOpenFiles bounds the partitions whose directory and block file the
// writer keeps open (two descriptors each); the least recently written
// are closed first (their buffered rows stay).
const maxOpenFiles = 128

// wpart is a partition the writer buffers rows for and appends to.
type wpart struct {
	key                partKey
	dir                string // path, for messages
	d                  *dirH  // the partition directory, open with f
	f                  *os.File
	xf                 *os.File // the index, open for journal appends (nil: the next commit rewrites it)
	renew              bool     // an append failed: the next commit rewrites the index under a new epoch
	idx                *index
	pend               []flow.Record
	minStart, maxStart int64     // of pend's Starts
	sorted             bool      // pend is in Start order
	written            bool      // a block was committed since the last periodic writeout
	used               uint64    // s.clock when rows last went in
	inflight           int       // its writeouts the committer holds (commit.go)
	retryAt            time.Time // its own failure backoff (a cause of this partition only)
	backoff            time.Duration
	cause              string // such a cause in progress, said once
	dropSaid           bool
}

// Write buffers recs (copying them) into their partitions, writing out
// partitions that are due. It implements sink.Sink. A failing writeout
// does not fail Write: the rows stay buffered (within
// Config.MaxPendingRows, and MaxBlockRows a partition) and are retried;
// what does not fit is dropped and counted in Stats.DroppedRows, and the
// cause is said once through Config.Log. Write fails only when the store
// is closed (the records then count as dropped).
func (s *Store) Write(recs []flow.Record) error {
	if s.readOnly {
		return ErrReadOnly
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.droppedRows.Add(int64(len(recs)))
		return ErrClosed
	}
	s.reapDone()
	now := time.Now()
	w := int64(s.cfg.Writeout)
	maxPend := int64(s.cfg.MaxPendingRows)
	pending := s.pendingRows.Load() // kept here per row; stored before anything that writes out
	var dropped int64
	p := s.last
	// Records go into p.pend in runs, copied in bulk (one memmove, not a
	// 312-byte copy per record): recs[j0:i] are accepted but not copied yet.
	j0 := 0
	for i := range recs {
		r := &recs[i]
		day := dayOf(r.Start)
		if p == nil || p.key.day != day || p.key.iface != r.Iface { // most batches hit one partition
			p.take(recs[j0:i])
			j0 = i
			s.pendingRows.Store(pending)
			p = s.part(partKey{r.Iface, day}, now)
			pending = s.pendingRows.Load()
		}
		if n := len(p.pend) + i - j0; n >= MaxBlockRows || n >= minSpanRows && max(p.maxStart, r.Start)-min(p.minStart, r.Start) >= w {
			p.take(recs[j0:i])
			j0 = i
			s.pendingRows.Store(pending)
			_ = s.writeout(p, now, false)
			pending = s.pendingRows.Load()
		}
		if pending >= maxPend && (!s.fail.active || s.fail.retryDue(now)) { // the disk failing: nothing to try before the retry
			p.take(recs[j0:i])
			j0 = i
			s.pendingRows.Store(pending)
			s.relieve(now)
			pending = s.pendingRows.Load()
		}
		n := len(p.pend) + i - j0
		if n >= MaxBlockRows || pending >= maxPend {
			p.take(recs[j0:i])
			j0 = i + 1
			dropped++
			continue
		}
		if n == 0 {
			p.minStart, p.maxStart, p.sorted = r.Start, r.Start, true
		} else {
			p.sorted = p.sorted && r.Start >= p.maxStart
			p.minStart, p.maxStart = min(p.minStart, r.Start), max(p.maxStart, r.Start)
		}
		pending++
	}
	p.take(recs[j0:])
	s.pendingRows.Store(pending)
	s.last = p
	if dropped > 0 {
		s.dropRows(dropped, p)
	}
	if now.Sub(s.lastWriteout) >= s.cfg.Writeout {
		_ = s.flushLocked(time.Time{}, false)
	}
	return nil
}

// take appends the accepted records rs to p's buffer (p nil: none).
func (p *wpart) take(rs []flow.Record) {
	if len(rs) > 0 {
		p.pend = append(p.pend, rs...)
	}
}

// part returns partition k's writer state, making room first when the
// writer holds Config.MaxPartitions partitions.
func (s *Store) part(k partKey, now time.Time) *wpart {
	s.clock++
	p := s.parts[k]
	if p == nil {
		for len(s.parts) >= s.cfg.MaxPartitions {
			s.evict(now)
		}
		p = &wpart{key: k, dir: filepath.Join(s.dir, escapeIface(k.iface), dayName(k.day))}
		s.parts[k] = p
	}
	p.used = s.clock
	return p
}

// evict writes out and releases the least recently written partition;
// rows it cannot write now (writes failing) are dropped and counted.
func (s *Store) evict(now time.Time) {
	var lru *wpart
	for _, p := range s.parts {
		if lru == nil || p.used < lru.used {
			lru = p
		}
	}
	_ = s.writeout(lru, now, false)
	if lru.inflight > 0 {
		s.drain() // a failed commit puts its rows back first
	}
	if n := len(lru.pend); n > 0 {
		s.pendingRows.Add(-int64(n))
		lru.pend = nil
		s.dropRows(int64(n), lru)
	}
	s.closePart(lru)
	delete(s.parts, lru.key)
	if s.last == lru {
		s.last = nil
	}
}

// relieve brings the buffered rows a quarter below
// Config.MaxPendingRows: it writes out the largest partitions first, and
// when what is left is held by partitions whose own writes fail (a link
// where their directory goes, say) it drops their rows, counted, so that
// they do not take the buffer from partitions that can be written.
func (s *Store) relieve(now time.Time) {
	target := int64(s.cfg.MaxPendingRows - s.cfg.MaxPendingRows/4)
	s.drain() // rows in flight count as pending until committed
	big := make([]*wpart, 0, len(s.parts))
	for _, p := range s.parts {
		if len(p.pend) > 0 {
			big = append(big, p)
		}
	}
	slices.SortFunc(big, func(a, b *wpart) int { return len(b.pend) - len(a.pend) })
	for _, p := range big {
		if s.pendingRows.Load() <= target {
			return
		}
		if err := s.writeout(p, now, false); err != nil && s.fail.active {
			return // the disk: nothing else can be written either
		}
	}
	for _, p := range big {
		if s.pendingRows.Load() <= target || s.fail.active {
			return
		}
		if n := len(p.pend); n > 0 && p.cause != "" {
			s.pendingRows.Add(-int64(n))
			p.pend = nil
			s.dropRows(int64(n), p)
		}
	}
}

// flushLocked writes out every partition's buffered rows, releases the
// partitions idle since the last periodic writeout and enforces
// retention. It stops at deadline (none when zero: the periodic writeout),
// and at the first failure that holds every partition (disk full): the
// rest stay buffered. force tries partitions even when their failure's
// retry is not due.
func (s *Store) flushLocked(deadline time.Time, force bool) error {
	now := time.Now()
	var first error
	failed, stopped := 0, false
	for k, p := range s.parts {
		if len(p.pend) > 0 {
			if stopped {
				continue
			}
			if s.abandoned.Load() || !deadline.IsZero() && time.Now().After(deadline) {
				stopped = true
				first = errors.Join(first, fmt.Errorf("%w: writing stopped at its deadline with records still buffered", ErrTimeout))
				continue
			}
			if err := s.writeout(p, now, force); err != nil && !errors.Is(err, errBackoff) {
				failed++
				if first == nil {
					first = err
				}
				stopped = diskWide(reasonOf(err)) || errors.Is(err, errAbandoned)
			}
			continue
		}
		if !p.written && p.inflight == 0 { // idle since the last writeout: release it
			s.settleIndex(p)
			s.closePart(p)
			delete(s.parts, k)
			if s.last == p {
				s.last = nil
			}
		}
		p.written = false
	}
	s.lastWriteout = now
	if failed > 1 {
		first = fmt.Errorf("%w (and %d more partitions failed)", first, failed-1)
	}
	if (s.cfg.Retention > 0 || s.cfg.MaxSize > 0) && !stopped {
		if _, err := s.pruneLocked(now); err != nil {
			first = errors.Join(first, err)
		}
	}
	return first
}

// errBackoff means a writeout was not tried: an earlier one failed and
// its retry is not due.
var errBackoff = errors.New("store: waiting to retry a failed write")

// errAbandoned means Close gave up on this writeout (counted as lost).
var errAbandoned = errors.New("store: write abandoned by Close")

// writeout appends p's buffered rows as blocks and hands them to the
// committer; unless force, not while a failure's retry is not due. A
// failure keeps the rows buffered and is counted and said (failure.go).
func (s *Store) writeout(p *wpart, now time.Time, force bool) error {
	if len(p.pend) == 0 {
		return nil
	}
	// Room in the pipeline first (settling a failed commit may put rows
	// back in p, close its files, or start a backoff).
	if s.broken.Load() {
		s.drain()
	}
	for s.inflight >= maxInFlight {
		s.reapOne()
	}
	if !force && !s.canWrite(p, now) {
		return errBackoff
	}
	if err := s.appendBlocks(p); err != nil {
		if !errors.Is(err, errAbandoned) {
			s.writeFailed(p, err, now)
		}
		return err
	}
	return nil // committed, or failed and counted, when the committer is done (commit.go)
}

// inject returns the error a test injected for op on path, if any.
func (s *Store) inject(op, path string) error {
	if s.fault == nil {
		return nil
	}
	return s.fault(op, path)
}

// openPart opens p's directory, data file and committed index, cutting off
// any uncommitted tail a crash left behind, and any index entries past the
// end of the file (counted and said: their rows are lost).
func (s *Store) openPart(p *wpart) error {
	sync := !s.cfg.NoSync
	for s.nOpen >= maxOpenFiles {
		var lru *wpart
		for _, q := range s.parts {
			if q.f != nil && (lru == nil || q.used < lru.used) {
				lru = q
			}
		}
		s.closePart(lru)
	}
	if err := s.inject("open", p.dir); err != nil {
		return err
	}
	id, err := s.root.sub(escapeIface(p.key.iface), true, s.dirPerm, sync)
	if err != nil {
		return err
	}
	d, err := id.sub(dayName(p.key.day), true, s.dirPerm, sync)
	id.close()
	if err != nil {
		return err
	}
	x, gaps, err := readIndex(d)
	switch {
	case errors.Is(err, os.ErrNotExist):
		x = &index{epoch: newEpoch()}
	case errors.Is(err, errBadIndex):
		s.badIndex(p.dir, x, gaps, err)
	case err != nil:
		d.close()
		return err
	}
	x.iface = p.key.iface
	// A temp index a crash left behind (or a link there) is removed here:
	// commits append to the index, and only some rewrite it whole.
	_ = d.remove(indexTemp)
	f, err := d.open(dataName, os.O_RDWR|os.O_CREATE, s.fPerm)
	if err != nil {
		d.close()
		return err
	}
	st, err := f.Stat()
	if err == nil && links(st) > 1 {
		err = fmt.Errorf("%s has %d hard links: not a file the store made; move it away", f.Name(), links(st))
	}
	if err == nil && st.Size() < x.dataLen {
		x, err = s.cutPastEnd(d, p.dir, x, st.Size())
	}
	if err == nil && st.Size() != x.dataLen {
		err = f.Truncate(x.dataLen)
	}
	if err != nil {
		f.Close()
		d.close()
		return err
	}
	p.d, p.f, p.idx = d, f, x
	s.nOpen++
	return nil
}

// badIndex counts and says an index rebuilt by scanning.
func (s *Store) badIndex(dir string, x *index, gaps []gap, err error) {
	if !s.markOnce(dir, -1) {
		return
	}
	s.corruptIndexes.Add(1)
	rows := 0
	for _, e := range x.entries {
		rows += e.rows
	}
	s.warn(fmt.Sprintf("index of %s %s; rebuilt from the %d intact blocks (%s records) of the data file", safePath(dir), indexWhy(err), len(x.entries), commas(int64(rows))))
	for _, g := range gaps {
		s.markCorrupt(dir, g.off, g.end-g.off, -1, g.why)
	}
}

// indexWhy says why an index was rebuilt by scanning.
func indexWhy(err error) string {
	if errors.Is(err, errTornIndex) {
		return "ends in a journal record cut short (a crash while committing, or a file cut)"
	}
	return "failed its checksum"
}

// cutPastEnd drops the index entries of blocks that end past the data
// file's size (a file cut short: their rows are lost, said and counted)
// and commits the shorter index.
func (s *Store) cutPastEnd(d *dirH, dir string, x *index, size int64) (*index, error) {
	nx := &index{epoch: newEpoch(), gen: x.gen + 1, iface: x.iface}
	for _, e := range x.entries {
		if e.off+int64(e.blockLen) <= size {
			nx.entries = append(nx.entries, e)
			nx.dataLen = e.off + int64(e.blockLen)
			continue
		}
		s.markCorrupt(dir, e.off, int64(e.blockLen), e.rows, fmt.Sprintf("past the end of the file (%d bytes): cut off", size))
	}
	if _, err := writeIndex(d, nx, !s.cfg.NoSync, s.fPerm); err != nil {
		return nil, err
	}
	return nx, nil
}

// settleIndex rewrites p's index whole when it holds journal records, so
// that an index at rest (after Close, or a day's partition gone idle) is
// one a weir older than the journal reads too. Best effort: the journal
// stays valid when this fails.
func (s *Store) settleIndex(p *wpart) {
	if p.inflight > 0 {
		s.drain()
	}
	if p.xf == nil || p.idx == nil || p.idx.nrec == 0 || s.abandoned.Load() {
		return
	}
	p.xf.Close()
	p.xf = nil
	_, _ = writeIndex(p.d, p.idx, !s.cfg.NoSync, s.fPerm)
}

// closePart releases p's files (its buffered rows stay), once its
// commits in flight are settled.
func (s *Store) closePart(p *wpart) {
	if p.inflight > 0 {
		s.drain()
	}
	if p.xf != nil {
		p.xf.Close()
		p.xf = nil
	}
	if p.f != nil {
		p.f.Close()
		p.d.close()
		p.f, p.d = nil, nil
		s.nOpen--
	}
	p.idx = nil
}

// encodeWarnings says what the last encode had to cut.
func (s *Store) encodeWarnings(dir string) {
	if s.benc.cut > 0 {
		s.warn(fmt.Sprintf("%s: %d drop reasons longer than %d bytes were cut", dir, s.benc.cut, maxStrLen))
	}
	if s.benc.cutEnr > 0 {
		s.warn(fmt.Sprintf("%s: %d workload or service strings longer than %d bytes were cut", dir, s.benc.cutEnr, maxLongStr))
	}
	if s.benc.cutNode > 0 {
		s.warn(fmt.Sprintf("%s: %d node names longer than %d bytes were cut", dir, s.benc.cutNode, maxLongStr))
	}
	if s.benc.cutRule > 0 {
		s.warn(fmt.Sprintf("%s: %d rules longer than %d bytes were cut", dir, s.benc.cutRule, maxStrLen))
	}
}

// blockCut returns how many of rows go in one block: all of them unless
// a workload, service or node string column would pass maxColRaw (readers
// refuse a larger column).
func blockCut(rows []flow.Record) int {
	const per = 8 // a row's index bytes and an entry's length, at most
	if int64(len(rows))*(maxLongStr+per) <= maxColRaw-1024 {
		return len(rows) // no column can pass the bound: no pass over the rows
	}
	var sum [3][3]int64 // src workload, dst workload, service: three strings each
	var node int64
	for i := range rows {
		r := &rows[i]
		if node += int64(min(len(r.Node), maxLongStr)) + per; node > maxColRaw-1024 {
			return max(i, 1)
		}
		if r.SrcWorkload == nil && r.DstWorkload == nil && r.Service == nil {
			continue
		}
		var l [3][3]int
		if w := r.SrcWorkload; w != nil {
			l[0] = [3]int{len(w.Name), len(w.Namespace), len(w.Node)}
		}
		if w := r.DstWorkload; w != nil {
			l[1] = [3]int{len(w.Name), len(w.Namespace), len(w.Node)}
		}
		if v := r.Service; v != nil {
			l[2] = [3]int{len(v.Name), len(v.Backends), len(v.Group)}
		}
		for a := range l {
			for b := range l[a] {
				sum[a][b] += int64(min(l[a][b], maxLongStr)) + per
				if sum[a][b] > maxColRaw-1024 {
					return max(i, 1)
				}
			}
		}
	}
	return len(rows)
}
