package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/weir-dev/weir/internal/flow"
)

// Sentinel errors.
var (
	// ErrLocked means another writer holds the store directory.
	ErrLocked = errors.New("store: directory is locked by another writer")
	// ErrReadOnly is returned by writing methods of a read-only Store.
	ErrReadOnly = errors.New("store: opened read-only")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("store: closed")
	// ErrCorrupt marks a block that failed its checks; it was skipped and
	// counted in Stats.CorruptBlocks.
	ErrCorrupt = errors.New("store: corrupt block skipped")
	// ErrPruned is returned by ReadBlock for a block that retention
	// deleted after Blocks listed it (not damage: not counted).
	ErrPruned = errors.New("store: block pruned by retention since it was listed")
	// ErrSymlink marks a symbolic link where a store file or directory
	// goes: the store never follows one (its target is never touched).
	ErrSymlink = errors.New("store: a symbolic link where a store file goes (never followed: remove it)")
	// ErrTimeout means Flush or Close gave up waiting for the file
	// system (Config.CloseTimeout).
	ErrTimeout = errors.New("store: the file system did not respond in time")
)

// Defaults and bounds.
const (
	// DefaultWriteout is the writeout interval when Config.Writeout is 0.
	DefaultWriteout = 5 * time.Minute
	// DefaultTimePrecision is Config.TimePrecision's default.
	DefaultTimePrecision = time.Millisecond
	// MaxBlockRows bounds one block: a partition reaching it is written out
	// at once, so the buffer of a busy interface stays bounded.
	MaxBlockRows = 1 << 20
	// DefaultMaxPendingRows is Config.MaxPendingRows' default: about
	// 250 MB of buffered records.
	DefaultMaxPendingRows = MaxBlockRows
	// DefaultMaxPartitions is Config.MaxPartitions' default: far more
	// interfaces and days than one host writes at once.
	DefaultMaxPartitions = 16384
	// DefaultCloseTimeout is Config.CloseTimeout's default.
	DefaultCloseTimeout = 4 * time.Second
	maxWarnings         = 16
)

// Mode says who may read the files the store creates.
type Mode int

// Modes. The process umask still applies on top.
const (
	// ModePrivate creates directories 0700 and files 0600: only the
	// user weir runs as reads the flow records.
	ModePrivate Mode = iota
	// ModeGroup creates directories 0750 and files 0640, for a group
	// whose members run 'weir query' (chgrp the data directory and set
	// its setgid bit so that new directories keep the group).
	ModeGroup
)

func (m Mode) perms() (dir, file os.FileMode) {
	if m == ModeGroup {
		return 0o750, 0o640
	}
	return 0o700, 0o600
}

// Config configures a writable Store.
type Config struct {
	Dir string
	// Writeout is how often buffered rows become blocks (default 5 min);
	// a partition is also written out when it holds MaxBlockRows rows,
	// or when it holds at least minSpanRows rows whose Start times span
	// Writeout (so a replayed day still gets time-ordered blocks, while
	// random Start times cannot cut blocks of a few rows).
	Writeout time.Duration
	// Retention deletes blocks whose rows all ended longer ago than this
	// (wall clock); 0 keeps everything.
	Retention time.Duration
	// MaxSize deletes the oldest blocks (by their last End) until the
	// store takes at most this many bytes of disk; 0 means no limit.
	MaxSize int64
	// Level is the zstd level: 1 fastest (default), 2 default, 3 better,
	// 4 best.
	Level int
	// TimePrecision is the resolution Start and End are stored at: Start
	// is floored and End ceiled to it, so a record's interval only ever
	// widens. 0 means DefaultTimePrecision (1 ms, what IPFIX's
	// flowStart/EndMilliseconds and nfdump keep); 1 ns stores them exactly.
	// Packet and byte counts are always exact.
	TimePrecision time.Duration
	// Mode sets the permissions of what the store creates (ModePrivate
	// by default).
	Mode Mode
	// MaxPendingRows bounds the records buffered over all partitions
	// (DefaultMaxPendingRows when 0). At the bound the largest
	// partitions are written out; while writes fail, what exceeds it is
	// dropped and counted (Stats.DroppedRows).
	MaxPendingRows int
	// MaxPartitions bounds the partitions the writer buffers rows for at
	// once (DefaultMaxPartitions when 0): beyond it the least recently
	// written one is written out, as a small block, and released. Open
	// files are bounded on their own: the writer keeps at most 128
	// partitions' files open, closing the least recently written.
	MaxPartitions int
	// CloseTimeout bounds Flush and Close (DefaultCloseTimeout when 0):
	// what they could not write by then is counted as dropped.
	CloseTimeout time.Duration
	// Log, when set, receives each problem as it happens (one line, no
	// "store:" prefix): damaged blocks, write errors and recoveries,
	// dropped records. Stats.Warnings keeps the most recent ones.
	Log func(msg string)
	// NoSync skips fsync (tests and benchmarks only: a crash may then lose
	// committed blocks, though never corrupt what reads back).
	NoSync bool
}

// Stats are the store's counters.
type Stats struct {
	BlocksWritten  int64 // blocks committed by this Store
	RowsWritten    int64
	BytesWritten   int64 // block bytes appended
	BytesOnDisk    int64 // disk space of data and index files under Dir, as of the last writeout/prune/open
	CorruptBlocks  int64 // distinct blocks skipped for failed checks
	CorruptIndexes int64 // index files that failed their CRC (rebuilt by scanning)
	// DroppedRows counts every record handed to Write that was not
	// written: beyond the buffering bounds while writes failed, still
	// buffered when Close gave up, or written after Close.
	DroppedRows int64
	PendingRows int64 // records buffered now
	// Abandoned: Close gave up on a write that did not return; the
	// records then buffered are already counted in DroppedRows.
	Abandoned bool
	// WriteErrors counts failed writeouts by reason (WriteErrorReasons).
	WriteErrors      map[string]int64
	PrunedPartitions int64
	PrunedBlocks     int64
	PrunedRows       int64
	PrunedBytes      int64
	Warnings         []string // the most recent problems, oldest first
}

type partKey struct {
	iface string
	day   int64
}

// Store is an open store. Its reading methods are safe for concurrent use;
// Write, Flush, Prune and Close serialise on the writer lock, which readers
// never take.
type Store struct {
	dir            string
	root           *dirH
	cfg            Config
	dirPerm, fPerm os.FileMode
	readOnly       bool
	lock           *os.File

	mu           sync.Mutex // writer state below
	parts        map[partKey]*wpart
	last         *wpart
	nOpen        int    // partitions with open files
	clock        uint64 // Write calls, for least-recently-written
	benc         blockEncoder
	buf          []byte
	jbuf         []byte   // an index journal record
	sortKeys     []uint64 // writeout scratch: rows ordered by Start
	sortTmp      []uint64
	sortPerm     []int32 // rows' Start order and its inverse (order)
	sortRank     []int32
	sorted       []flow.Record
	lastWriteout time.Time
	closed       bool
	fail         failState
	fault        func(op, path string) error // tests: inject I/O errors
	noPunch      bool                        // tests: prune by rewriting
	stop, done   chan struct{}
	stopOnce     sync.Once
	abandoned    atomic.Bool // Close gave up on a stuck writer

	// The commit pipeline (commit.go): the writer hands writeouts over in
	// jobs and settles them under mu; the committer never takes mu.
	jobs, doneJobs chan *commitJob
	broken         atomic.Bool // a commit failed: skip the rest until settled
	inflight       int         // handed over, not settled
	handed         uint64      // jobs handed over, ever
	live           []*commitJob
	spare          [][]flow.Record // row buffers committed jobs gave back
	spareRows      int             // their capacity in rows (at most maxSpareRows)
	commitErr      error           // the first failed commit, for Flush or Close
	cmu            sync.Mutex      // finished, and ccond's
	ccond          *sync.Cond
	finished       uint64 // jobs the committer is done with, ever

	rmu    sync.Mutex // reader caches
	rparts map[string]*readPart

	wmu      sync.Mutex
	warnings []string
	corrupt  map[blockID]struct{}

	blocksWritten, rowsWritten, bytesWritten, bytesOnDisk atomic.Int64
	corruptBlocks, corruptIndexes, droppedRows            atomic.Int64
	pendingRows                                           atomic.Int64
	writeErrs                                             [numReasons]atomic.Int64
	prunedParts, prunedBlocks, prunedRows, prunedBytes    atomic.Int64
}

type blockID struct {
	dir string
	off int64
}

// Open opens (creating) a store for writing. Only one writer may hold a
// directory: a second Open, in this process or another, fails with ErrLocked.
func Open(cfg Config) (*Store, error) {
	if cfg.Dir == "" {
		return nil, errors.New("store: Config.Dir is empty")
	}
	if cfg.Writeout <= 0 {
		cfg.Writeout = DefaultWriteout
	}
	switch {
	case cfg.TimePrecision == 0:
		cfg.TimePrecision = DefaultTimePrecision
	case cfg.TimePrecision < 0 || cfg.TimePrecision > time.Hour:
		return nil, fmt.Errorf("store: TimePrecision %v out of range 1ns..1h", cfg.TimePrecision)
	}
	if cfg.MaxPendingRows <= 0 {
		cfg.MaxPendingRows = DefaultMaxPendingRows
	}
	if cfg.MaxPartitions <= 0 {
		cfg.MaxPartitions = DefaultMaxPartitions
	}
	if cfg.CloseTimeout <= 0 {
		cfg.CloseTimeout = DefaultCloseTimeout
	}
	level := zstd.SpeedFastest
	switch cfg.Level {
	case 2:
		level = zstd.SpeedDefault
	case 3:
		level = zstd.SpeedBetterCompression
	case 4:
		level = zstd.SpeedBestCompression
	}
	s := newStore(cfg.Dir)
	s.cfg = cfg
	s.dirPerm, s.fPerm = cfg.Mode.perms()
	root, err := openRoot(cfg.Dir, true, s.dirPerm)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	s.root = root
	if s.lock, err = lockDir(root, s.fPerm); err != nil {
		root.close()
		return nil, err
	}
	zenc, err := newZstdEncoder(level)
	if err != nil {
		s.lock.Close()
		root.close()
		return nil, err
	}
	s.benc.zenc = zenc
	s.parts = make(map[partKey]*wpart)
	s.lastWriteout = time.Now()
	s.checkMode()
	s.finishInterrupted()
	s.bytesOnDisk.Store(s.surveyOnOpen())
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	s.jobs, s.doneJobs = make(chan *commitJob, maxInFlight), make(chan *commitJob, maxInFlight)
	s.ccond = sync.NewCond(&s.cmu)
	go s.committer()
	go s.ticker()
	return s, nil
}

// OpenReadOnly opens a store for reading while a writer may be appending to
// it; call Blocks again to see newly committed blocks.
func OpenReadOnly(dir string) (*Store, error) {
	root, err := openRoot(dir, false, 0)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	s := newStore(dir)
	s.root = root
	s.readOnly = true
	return s, nil
}

func newStore(dir string) *Store {
	return &Store{dir: dir, rparts: make(map[string]*readPart), corrupt: make(map[blockID]struct{})}
}

// checkMode warns when the data directory lets more users in than the
// configured Mode (a store made by an older weir, or by hand).
func (s *Store) checkMode() {
	m, err := s.root.mode()
	if err != nil {
		return
	}
	if extra := m.Perm() &^ s.dirPerm; extra&0o077 != 0 {
		s.warn(fmt.Sprintf("%s is mode %04o: other local users may read the flow records; chmod %o %s", s.dir, m.Perm(), s.dirPerm, s.dir))
	}
}

// ticker writes out buffered rows every Writeout even when no Write comes,
// and retries failed writeouts.
func (s *Store) ticker() {
	defer close(s.done)
	t := time.NewTicker(min(s.cfg.Writeout, time.Second))
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.mu.Lock()
			now := time.Now()
			if !s.closed {
				s.reapDone()
			}
			switch {
			case s.closed:
			case now.Sub(s.lastWriteout) >= s.cfg.Writeout:
				_ = s.flushLocked(time.Time{}, false)
			case s.fail.retryDue(now) && s.pendingRows.Load() > 0:
				s.retry()
			}
			s.mu.Unlock()
		}
	}
}

// Flush writes every partition's buffered rows as one block each, waits
// until they are durable (each block file fsynced, then its index record
// written and fsynced), then enforces retention. It tries each partition
// once even while writes are failing, returns the first commit that
// failed since the last Flush (its rows are buffered again, to be
// retried), and returns within Config.CloseTimeout (ErrTimeout when a
// write does not come back). While it waits for the disk the writer lock
// is free: Write goes on buffering and encoding.
func (s *Store) Flush() error {
	if s.readOnly {
		return ErrReadOnly
	}
	return s.bounded(func(deadline time.Time) error {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return ErrClosed
		}
		err := s.flushLocked(deadline, true)
		n := s.handed
		s.mu.Unlock()
		s.waitCommitted(n)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.reapDone()
		return errors.Join(s.takeCommitErr(), err)
	}, false)
}

// FlushAsync writes every partition's buffered rows as blocks and hands
// them to the committer without waiting for their fsyncs; at most
// maxInFlight writeouts are outstanding (it waits for the oldest beyond
// that). Its blocks are acknowledged by a later Flush or Close returning
// nil; it returns the first failed commit not yet returned (the rows of
// a failed commit are buffered again and retried).
func (s *Store) FlushAsync() error {
	if s.readOnly {
		return ErrReadOnly
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.reapDone()
	err := s.flushLocked(time.Time{}, true)
	return errors.Join(s.takeCommitErr(), err)
}

// Close writes out buffered rows and releases the store. It returns within
// Config.CloseTimeout in every state: records it could not write by then
// (disk full, a file system that does not answer) are counted in
// Stats.DroppedRows and said. The error reports any record lost.
func (s *Store) Close() error {
	if s.readOnly {
		s.rmu.Lock()
		for _, rp := range s.rparts {
			rp.f.Close()
		}
		s.rparts = map[string]*readPart{}
		s.rmu.Unlock()
		s.root.close()
		return nil
	}
	err := s.bounded(func(deadline time.Time) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return ErrClosed
		}
		s.closed = true
		err := s.flushLocked(deadline, true)
		s.drain()
		err = errors.Join(s.takeCommitErr(), err)
		if n := s.pendingRows.Load(); n > 0 && !s.abandoned.Load() {
			s.dropPending(fmt.Sprintf("closing: %s records could not be written (%s) and are lost", commas(n), errText(s.fail.lastErr)))
		}
		for _, p := range s.parts {
			if err == nil {
				s.settleIndex(p)
			}
			s.closePart(p)
		}
		close(s.jobs) // the committer ends
		return err
	}, true)
	if errors.Is(err, ErrClosed) {
		return err
	}
	s.stopOnce.Do(func() { close(s.stop) })
	select {
	case <-s.done:
	case <-time.After(100 * time.Millisecond): // stuck in a write with the lock: it exits when that returns
	}
	if !s.abandoned.Load() {
		if cerr := s.lock.Close(); err == nil {
			err = cerr
		}
		s.root.close()
	}
	if d := s.droppedRows.Load(); d > 0 {
		err = errors.Join(err, fmt.Errorf("store: %s records were not written (weir_store_dropped_rows_total)", commas(d)))
	}
	return err
}

// Stats returns a snapshot of the counters.
func (s *Store) Stats() Stats {
	s.wmu.Lock()
	w := append([]string(nil), s.warnings...)
	s.wmu.Unlock()
	st := Stats{
		BlocksWritten: s.blocksWritten.Load(), RowsWritten: s.rowsWritten.Load(),
		BytesWritten: s.bytesWritten.Load(), BytesOnDisk: s.bytesOnDisk.Load(),
		CorruptBlocks: s.corruptBlocks.Load(), CorruptIndexes: s.corruptIndexes.Load(),
		DroppedRows: s.droppedRows.Load(), PendingRows: s.pendingRows.Load(), Abandoned: s.abandoned.Load(),
		PrunedPartitions: s.prunedParts.Load(), PrunedBlocks: s.prunedBlocks.Load(),
		PrunedRows: s.prunedRows.Load(), PrunedBytes: s.prunedBytes.Load(),
		Warnings: w,
	}
	for r := range numReasons {
		if n := s.writeErrs[r].Load(); n > 0 {
			if st.WriteErrors == nil {
				st.WriteErrors = make(map[string]int64)
			}
			st.WriteErrors[WriteErrorReasons[r]] = n
		}
	}
	return st
}

// warn records a problem and passes it to Config.Log.
func (s *Store) warn(msg string) {
	s.wmu.Lock()
	if len(s.warnings) == maxWarnings {
		copy(s.warnings, s.warnings[1:])
		s.warnings = s.warnings[:maxWarnings-1]
	}
	s.warnings = append(s.warnings, msg)
	s.wmu.Unlock()
	if s.cfg.Log != nil {
		s.cfg.Log(msg)
	}
}

// markCorrupt counts a corrupt block once and records a warning; rows is
// what the index says the block held (-1: unknown).
func (s *Store) markCorrupt(dir string, off int64, size int64, rows int, why string) {
	if !s.markOnce(dir, off) {
		return
	}
	s.corruptBlocks.Add(1)
	s.warn(Damage{File: filepath.Join(dir, dataName), Offset: off, Size: size, Rows: rows, Reason: why}.String() +
		"; 'weir store check --repair' removes it")
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

func newEpoch() uint64 { return rand.Uint64() | 1 }

// Pending calls fn with every record not yet acknowledged durable (in
// no particular order): those buffered for the next writeout, and those
// of blocks whose commit is in flight (such a block may just have become
// visible to queries). The *Record is only valid during the call; fn
// must not call the Store. It holds the writer lock while it runs (never
// held across an fsync), so fn should only copy.
func (s *Store) Pending(fn func(*flow.Record)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, j := range s.live {
		for i := range j.rows {
			fn(&j.rows[i])
		}
	}
	for _, p := range s.parts {
		for i := range p.pend {
			fn(&p.pend[i])
		}
	}
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }
