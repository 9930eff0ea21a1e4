package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

// maxInFlight bounds the writeouts handed to the committer and not yet
// reaped: their rows stay in memory (and in Stats.PendingRows) until their
// commit is durable, so that a failed commit is retried, never lost.
const maxInFlight = 8

// errSkipped marks a commit not tried because an earlier one failed: its
// blocks lie past a block that is not committed, so it is retried too.
var errSkipped = errors.New("store: commit not tried after an earlier commit failed")

// commitJob is one writeout's blocks, appended to the data file and not
// yet durable: the committer fsyncs the file, then appends and fsyncs the
// index record that makes them visible.
type commitJob struct {
	p                  *wpart
	x, nx              *index        // the index before and after these blocks
	rows               []flow.Record // the blocks' rows, kept until durable
	minStart, maxStart int64
	wrote              int64 // block bytes
	err                error // set by the committer
}

// committer commits jobs in the order they were handed over and never
// takes s.mu: a Write encodes the next block, and queries go on, while it
// waits for the disk. Jobs of one partition queued one after the other
// commit together (group commit): one fsync of the data file covers all
// their blocks, then one index record names them all. After a failure it
// skips every job until the writer has settled them all (s.broken), so
// that no index record ever commits blocks that follow an uncommitted one.
func (s *Store) committer() {
	var next *commitJob
	group := make([]*commitJob, 0, maxInFlight)
	for {
		j := next
		next = nil
		if j == nil {
			var ok bool
			if j, ok = <-s.jobs; !ok {
				return
			}
		}
		group = append(group[:0], j)
	gather:
		for len(group) < maxInFlight {
			select {
			case k, ok := <-s.jobs:
				switch {
				case !ok: // closed: the next receive ends the loop
					break gather
				case k.p != j.p:
					next = k
					break gather
				}
				group = append(group, k)
			default:
				break gather
			}
		}
		var err error
		if s.broken.Load() {
			err = errSkipped
		} else if err = s.commit(group); err != nil {
			s.broken.Store(true)
		}
		for i, g := range group {
			g.err = err
			if i > 0 && err != nil && !errors.Is(err, errAbandoned) {
				g.err = errSkipped // the failure is the first job's: counted once
			}
		}
		// Sent before they count as finished: a Flush woken by the count
		// finds them to settle, and their errors to return.
		for _, g := range group {
			s.doneJobs <- g // never blocks: its capacity is maxInFlight
		}
		s.cmu.Lock()
		s.finished += uint64(len(group))
		s.cmu.Unlock()
		s.ccond.Broadcast()
	}
}

// commit makes the blocks of group (consecutive jobs of one partition)
// durable and visible: the data file's fsync returns before the index
// record that names them is written.
func (s *Store) commit(group []*commitJob) error {
	first, last := group[0], group[len(group)-1]
	p := first.p
	var err error
	if !s.cfg.NoSync {
		if err = s.inject("sync", p.f.Name()); err == nil {
			err = p.f.Sync()
		}
	}
	if err == nil {
		if err = s.inject("index", p.dir); err == nil {
			x := *first.x // its commit state, before commitIndex moves last.nx on
			err = s.commitIndex(p, first.x, last.nx)
			for _, g := range group[:len(group)-1] {
				// Committed by last's record: no index bytes of their own.
				g.nx.epoch, g.nx.gen, g.nx.fileLen, g.nx.crc, g.nx.nrec = x.epoch, x.gen, x.fileLen, x.crc, x.nrec
			}
		}
	}
	if s.abandoned.Load() {
		return errAbandoned // counted as lost by Close already
	}
	return err
}

// appendBlocks encodes p's buffered rows as one block (more when their
// strings would make a column too large to read back), appends them to
// the data file and hands them to the committer; the rows move to the
// job, p gets an empty buffer. writeout has made room in the pipeline.
func (s *Store) appendBlocks(p *wpart) error {
	if p.f == nil {
		if err := s.openPart(p); err != nil {
			return err
		}
	}
	x := p.idx
	// nx's epoch and generation are set by the committer from the index it
	// commits after (a retry's rewrite may change the epoch; a group commit
	// makes one generation of several writeouts).
	nx := &index{dataLen: x.dataLen, iface: x.iface}
	nx.entries = x.entries[:len(x.entries):len(x.entries)]
	rows, perm, rank := s.order(p.pend, p.sorted, p.minStart, p.maxStart)
	// Cutting is needed in the rows' Start order; whether it is needed at
	// all is not (its sums do not depend on order): rows that fit one block
	// are encoded from the permutation, not gathered.
	if perm != nil && blockCut(rows) < len(rows) {
		rows, perm, rank = s.gather(rows, perm), nil, nil
	}
	var err error
	var wrote int64
	for len(rows) > 0 && err == nil {
		k := len(rows)
		if perm == nil {
			k = blockCut(rows)
		}
		var h *blockHeader
		s.buf, h = s.benc.encodeRanked(s.buf[:0], rows[:k], perm, rank)
		rows = rows[k:]
		s.encodeWarnings(p.dir)
		if err = s.inject("write", p.f.Name()); err == nil {
			_, err = p.f.WriteAt(s.buf, nx.dataLen)
		}
		nx.entries = append(nx.entries, indexEntryT{off: nx.dataLen, blockLen: h.blockLen, headerLen: h.headerLen,
			rows: h.rows, minStart: h.minStart, maxEnd: h.maxEnd})
		nx.dataLen += int64(len(s.buf))
		wrote += int64(len(s.buf))
	}
	if s.abandoned.Load() {
		return errAbandoned // counted as lost by Close already
	}
	if err != nil {
		s.closePart(p) // reopening truncates to the committed length
		return err
	}
	j := &commitJob{p: p, x: x, nx: nx, rows: p.pend, minStart: p.minStart, maxStart: p.maxStart, wrote: wrote}
	p.pend = s.spareBuf()
	p.idx = nx // the next writeout appends after these blocks
	p.written = true
	p.inflight++
	s.inflight++
	s.handed++
	s.live = append(s.live, j)
	s.jobs <- j // never blocks: at most maxInFlight are outstanding
	return nil
}

// keepSpare keeps a committed job's row buffer for a later writeout,
// within maxInFlight+1 buffers and maxSpareRows rows. With several
// commits in flight, keeping 2 meant a new 1.5 MB buffer (zeroed, faulted
// in, and scanned by the GC: records hold strings) for most blocks.
func (s *Store) keepSpare(rows []flow.Record) {
	if c := cap(rows); c > 0 && len(s.spare) <= maxInFlight && s.spareRows+c <= maxSpareRows {
		s.spare = append(s.spare, rows[:0])
		s.spareRows += c
	}
}

// maxSpareRows bounds the rows of the buffers committed jobs leave for
// reuse (s.spare): 2^17 records, 40 MB, as when 2 buffers of at most 2^16
// rows were kept; 5,000-row blocks keep one for each commit in flight.
const maxSpareRows = 1 << 17

// spareBuf returns a row buffer a committed job left, if any.
func (s *Store) spareBuf() []flow.Record {
	if n := len(s.spare); n > 0 {
		b := s.spare[n-1]
		s.spare = s.spare[:n-1]
		s.spareRows -= cap(b)
		return b
	}
	return nil
}

// reapOne waits for the oldest outstanding commit and settles it.
func (s *Store) reapOne() {
	s.settle(<-s.doneJobs)
}

// reapDone settles the commits that have finished, without waiting.
func (s *Store) reapDone() {
	for s.inflight > 0 {
		select {
		case j := <-s.doneJobs:
			s.settle(j)
		default:
			return
		}
	}
}

// drain waits for every outstanding commit and settles it (s.mu held:
// the paths that release or rewrite a partition, prune, Close).
func (s *Store) drain() {
	for s.inflight > 0 {
		s.reapOne()
	}
}

// waitCommitted waits, without s.mu, until the committer has finished
// the first n jobs handed to it.
func (s *Store) waitCommitted(n uint64) {
	s.cmu.Lock()
	for s.finished < n {
		s.ccond.Wait()
	}
	s.cmu.Unlock()
}

// settle takes a finished job back (s.mu held). A committed one ends any
// failure in progress and gives its buffer back; a failed or skipped one
// puts its rows back in front of its partition's buffer, to be written
// again, and closes the partition's files (reopening cuts the data file
// back to its committed length). The first failure is kept for the next
// Flush or Close to return, and counted and said like any failed writeout.
func (s *Store) settle(j *commitJob) {
	p := j.p
	s.inflight--
	p.inflight--
	for i, l := range s.live {
		if l == j {
			s.live = append(s.live[:i], s.live[i+1:]...)
			break
		}
	}
	now := time.Now()
	switch {
	case j.err == nil:
		// Counted here, not by the committer, so that Stats move together
		// with the writer's state (a block is never both pending and written).
		s.blocksWritten.Add(int64(len(j.nx.entries) - len(j.x.entries)))
		s.rowsWritten.Add(int64(len(j.rows)))
		s.bytesWritten.Add(j.wrote)
		s.bytesOnDisk.Add(j.wrote + j.nx.fileLen - j.x.fileLen)
		s.pendingRows.Add(-int64(len(j.rows)))
		s.keepSpare(j.rows)
		s.writeOK(p, now)
	case errors.Is(j.err, errAbandoned):
		// Close counted its rows as lost.
	default:
		if len(j.rows) > 0 {
			if len(p.pend) == 0 {
				p.minStart, p.maxStart, p.sorted = j.minStart, j.maxStart, true
			} else {
				p.minStart, p.maxStart = min(p.minStart, j.minStart), max(p.maxStart, j.maxStart)
			}
			p.sorted = false // the rows' order is unknown: order() sorts them
			p.pend = append(j.rows, p.pend...)
		}
		if !errors.Is(j.err, errSkipped) {
			s.writeFailed(p, j.err, now)
			if s.commitErr == nil {
				s.commitErr = fmt.Errorf("committing %s: %w", safePath(p.dir), j.err)
			}
		}
		if p.inflight == 0 {
			s.closePart(p)
		}
	}
	if s.inflight == 0 {
		s.broken.Store(false)
	}
}

// takeCommitErr returns the first commit failure since the last call.
func (s *Store) takeCommitErr() error {
	err := s.commitErr
	s.commitErr = nil
	return err
}

// commitIndex commits nx, which is x and the blocks just appended and
// fsynced: by a journal record appended to the index and fsynced, or, for
// a partition's first commit, after maxJournal records, or when the index
// file is not exactly what the writer last committed, by rewriting the
// index whole (temp file, fsync, rename, directory fsync).
func (s *Store) commitIndex(p *wpart, x, nx *index) error {
	sync := !s.cfg.NoSync
	nx.epoch, nx.gen, nx.fileLen, nx.crc, nx.nrec = x.epoch, x.gen+1, x.fileLen, x.crc, x.nrec
	if p.xf == nil && x.fileLen > 0 && x.nrec < maxJournal && !p.renew {
		p.xf = openJournal(p.d, x.fileLen)
	}
	if p.xf != nil && x.nrec < maxJournal {
		var err error
		if s.jbuf, err = appendJournal(p.xf, nx, len(x.entries), sync, s.jbuf,
			func() error { return s.inject("index sync", p.dir) }); err == nil {
			return nil
		}
		p.xf.Close()
		p.xf = nil
		// A reader may have loaded the record that was cut back off: the
		// retry writes other blocks at its offsets, so readers must reload.
		p.renew = true
		return err
	}
	if p.xf != nil {
		p.xf.Close() // the rename below replaces the file it has open
		p.xf = nil
	}
	if p.renew {
		nx.epoch = newEpoch()
	}
	if _, err := writeIndex(p.d, nx, sync, s.fPerm); err != nil {
		return err
	}
	p.renew = false
	return nil
}
