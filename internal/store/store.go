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
	maxWarnings  = 16
)

// Config configures a writable Store.
type Config struct {
	Dir string
	// Writeout is how often buffered rows become blocks (default 5 min);
	// a partition is also written out when its rows' Start times span
	// Writeout, or when it holds MaxBlockRows rows.
	Writeout time.Duration
	// Retention deletes day partitions whose whole day is older than this
	// (wall clock); 0 keeps everything.
	Retention time.Duration
	// MaxSize deletes the oldest day partitions until the store is at most
	// this many bytes; 0 means no limit.
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
	// NoSync skips fsync (tests and benchmarks only: a crash may then lose
	// committed blocks, though never corrupt what reads back).
	NoSync bool
}

// Stats are the store's counters.
type Stats struct {
	BlocksWritten    int64 // blocks committed by this Store
	RowsWritten      int64
	BytesWritten     int64 // block bytes appended
	BytesOnDisk      int64 // data and index bytes under Dir, as of the last writeout/prune/open
	CorruptBlocks    int64 // distinct blocks skipped for failed checks
	CorruptIndexes   int64 // index files that failed their CRC (rebuilt by scanning)
	DroppedRows      int64 // rows lost because writeouts kept failing
	PrunedPartitions int64
	PrunedBlocks     int64
	PrunedBytes      int64
	Warnings         []string // the most recent problems, oldest first
}

type partKey struct {
	iface string
	day   int64
}

// wpart is a partition the writer buffers rows for and appends to.
type wpart struct {
	key      partKey
	dir      string
	f        *os.File
	idx      *index
	pend     []flow.Record
	minStart int64
	written  bool
}

// Store is an open store. Its reading methods are safe for concurrent use;
// Write, Flush, Prune and Close serialise on the writer lock, which readers
// never take.
type Store struct {
	dir      string
	cfg      Config
	readOnly bool
	lock     *os.File

	mu           sync.Mutex // writer state below
	parts        map[partKey]*wpart
	last         *wpart
	benc         blockEncoder
	buf          []byte
	sortKeys     []uint64 // writeout scratch: rows ordered by Start
	sortTmp      []uint64
	sorted       []flow.Record
	lastWriteout time.Time
	closed       bool
	stop         chan struct{}
	done         chan struct{}

	rmu    sync.Mutex // reader caches
	rparts map[string]*readPart

	wmu      sync.Mutex
	warnings []string
	corrupt  map[blockID]struct{}

	blocksWritten, rowsWritten, bytesWritten, bytesOnDisk atomic.Int64
	corruptBlocks, corruptIndexes, droppedRows            atomic.Int64
	prunedParts, prunedBlocks, prunedBytes                atomic.Int64
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
	level := zstd.SpeedFastest
	switch cfg.Level {
	case 2:
		level = zstd.SpeedDefault
	case 3:
		level = zstd.SpeedBetterCompression
	case 4:
		level = zstd.SpeedBestCompression
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	lock, err := lockDir(filepath.Join(cfg.Dir, lockName))
	if err != nil {
		return nil, err
	}
	zenc, err := newZstdEncoder(level)
	if err != nil {
		lock.Close()
		return nil, err
	}
	s := newStore(cfg.Dir)
	s.cfg = cfg
	s.lock = lock
	s.benc.zenc = zenc
	s.parts = make(map[partKey]*wpart)
	s.lastWriteout = time.Now()
	s.removeTombstones()
	s.bytesOnDisk.Store(s.diskUsage())
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go s.ticker()
	return s, nil
}

// OpenReadOnly opens a store for reading while a writer may be appending to
// it; call Blocks again to see newly committed blocks.
func OpenReadOnly(dir string) (*Store, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("store: %s is not a directory", dir)
	}
	s := newStore(dir)
	s.readOnly = true
	s.closed = false
	return s, nil
}

func newStore(dir string) *Store {
	return &Store{dir: dir, rparts: make(map[string]*readPart), corrupt: make(map[blockID]struct{})}
}

// ticker writes out buffered rows every Writeout even when no Write comes.
func (s *Store) ticker() {
	defer close(s.done)
	t := time.NewTicker(s.cfg.Writeout)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.mu.Lock()
			if !s.closed && time.Since(s.lastWriteout) >= s.cfg.Writeout {
				if err := s.flushLocked(); err != nil {
					s.warn("writeout: " + err.Error())
				}
			}
			s.mu.Unlock()
		}
	}
}

// Write buffers recs (copying them) into their partitions, writing out
// partitions that are due. It implements sink.Sink.
func (s *Store) Write(recs []flow.Record) error {
	if s.readOnly {
		return ErrReadOnly
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	var errs []error
	w := int64(s.cfg.Writeout)
	p := s.last
	for i := range recs {
		r := &recs[i]
		day := dayOf(r.Start)
		if p == nil || p.key.day != day || p.key.iface != r.Iface { // most batches hit one partition
			p = s.part(partKey{r.Iface, day})
		}
		if len(p.pend) > 0 && (len(p.pend) >= MaxBlockRows || r.Start-p.minStart >= w) {
			if err := s.writeout(p); err != nil {
				errs = append(errs, err)
				if len(p.pend) >= MaxBlockRows {
					s.droppedRows.Add(int64(len(p.pend)))
					s.warn(fmt.Sprintf("dropped %d rows of %s after failed writeouts", len(p.pend), p.dir))
					p.pend = p.pend[:0]
				}
			}
		}
		if len(p.pend) == 0 || r.Start < p.minStart {
			p.minStart = r.Start
		}
		p.pend = append(p.pend, *r)
	}
	s.last = p
	if time.Since(s.lastWriteout) >= s.cfg.Writeout {
		errs = append(errs, s.flushLocked())
	}
	return errors.Join(errs...)
}

func (s *Store) part(k partKey) *wpart {
	p := s.parts[k]
	if p == nil {
		p = &wpart{key: k, dir: filepath.Join(s.dir, escapeIface(k.iface), dayName(k.day))}
		s.parts[k] = p
	}
	return p
}

// Flush writes every partition's buffered rows as one block each, then
// enforces retention.
func (s *Store) Flush() error {
	if s.readOnly {
		return ErrReadOnly
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return s.flushLocked()
}

func (s *Store) flushLocked() error {
	var errs []error
	for k, p := range s.parts {
		if len(p.pend) > 0 {
			if err := s.writeout(p); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if !p.written { // idle since the last writeout: release its file
			p.close()
			delete(s.parts, k)
			if s.last == p {
				s.last = nil
			}
		}
		p.written = false
	}
	s.lastWriteout = time.Now()
	if s.cfg.Retention > 0 || s.cfg.MaxSize > 0 {
		if _, err := s.pruneLocked(time.Now()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (p *wpart) close() {
	if p.f != nil {
		p.f.Close()
		p.f = nil
	}
	p.idx = nil
}

// openPart opens p's data file and committed index, cutting off any
// uncommitted tail a crash left behind.
func (s *Store) openPart(p *wpart) error {
	sync := !s.cfg.NoSync
	if err := mkdirSynced(s.dir, p.dir, sync); err != nil {
		return err
	}
	x, err := readIndex(p.dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		x = &index{epoch: newEpoch()}
	case errors.Is(err, errBadIndex):
		s.corruptIndexes.Add(1)
		s.warn("index of " + p.dir + " failed its CRC; rebuilt from the data file")
	case err != nil:
		return err
	}
	x.iface = p.key.iface
	f, err := os.OpenFile(filepath.Join(p.dir, dataName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if st, err := f.Stat(); err != nil || st.Size() != x.dataLen {
		if err == nil {
			err = f.Truncate(x.dataLen)
		}
		if err != nil {
			f.Close()
			return err
		}
	}
	p.f, p.idx = f, x
	return nil
}

// writeout appends p's buffered rows as one block and commits the index.
func (s *Store) writeout(p *wpart) error {
	if p.f == nil {
		if err := s.openPart(p); err != nil {
			return fmt.Errorf("store: open partition %s: %w", p.dir, err)
		}
	}
	var h *blockHeader
	s.buf, h = s.benc.encode(s.buf[:0], s.prepare(p.pend))
	if s.benc.cut > 0 {
		s.warn(fmt.Sprintf("%s: %d drop reasons longer than %d bytes were cut", p.dir, s.benc.cut, maxStrLen))
	}
	if s.benc.cutEnr > 0 {
		s.warn(fmt.Sprintf("%s: %d workload or service strings longer than %d bytes were cut", p.dir, s.benc.cutEnr, maxLongStr))
	}
	if s.benc.cutRule > 0 {
		s.warn(fmt.Sprintf("%s: %d rules longer than %d bytes were cut", p.dir, s.benc.cutRule, maxStrLen))
	}
	x := p.idx
	_, err := p.f.WriteAt(s.buf, x.dataLen)
	if err == nil && !s.cfg.NoSync {
		err = p.f.Sync()
	}
	nx := &index{epoch: x.epoch, gen: x.gen + 1, dataLen: x.dataLen + int64(len(s.buf)), iface: x.iface}
	nx.entries = append(x.entries[:len(x.entries):len(x.entries)], indexEntryT{off: x.dataLen,
		blockLen: h.blockLen, headerLen: h.headerLen, rows: h.rows, minStart: h.minStart, maxEnd: h.maxEnd})
	var isz int
	if err == nil {
		isz, err = writeIndex(p.dir, nx, !s.cfg.NoSync)
	}
	if err != nil {
		p.close() // reopening truncates to the committed length
		return fmt.Errorf("store: writeout %s: %w", p.dir, err)
	}
	oldIdx := 0
	if x.gen > 0 {
		oldIdx = len(x.marshal())
	}
	p.idx = nx
	p.written = true
	p.pend = p.pend[:0]
	s.blocksWritten.Add(1)
	s.rowsWritten.Add(int64(h.rows))
	s.bytesWritten.Add(int64(len(s.buf)))
	s.bytesOnDisk.Add(int64(len(s.buf) + isz - oldIdx))
	return nil
}

// Close flushes buffered rows and releases the store.
func (s *Store) Close() error {
	if s.readOnly {
		s.rmu.Lock()
		s.rparts = map[string]*readPart{}
		s.rmu.Unlock()
		return nil
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	err := s.flushLocked()
	s.closed = true
	for _, p := range s.parts {
		p.close()
	}
	s.mu.Unlock()
	close(s.stop)
	<-s.done
	if cerr := s.lock.Close(); err == nil {
		err = cerr
	}
	return err
}

// Stats returns a snapshot of the counters.
func (s *Store) Stats() Stats {
	s.wmu.Lock()
	w := append([]string(nil), s.warnings...)
	s.wmu.Unlock()
	return Stats{
		BlocksWritten: s.blocksWritten.Load(), RowsWritten: s.rowsWritten.Load(),
		BytesWritten: s.bytesWritten.Load(), BytesOnDisk: s.bytesOnDisk.Load(),
		CorruptBlocks: s.corruptBlocks.Load(), CorruptIndexes: s.corruptIndexes.Load(),
		DroppedRows: s.droppedRows.Load(), PrunedPartitions: s.prunedParts.Load(),
		PrunedBlocks: s.prunedBlocks.Load(), PrunedBytes: s.prunedBytes.Load(),
		Warnings: w,
	}
}

func (s *Store) warn(msg string) {
	s.wmu.Lock()
	if len(s.warnings) == maxWarnings {
		copy(s.warnings, s.warnings[1:])
		s.warnings = s.warnings[:maxWarnings-1]
	}
	s.warnings = append(s.warnings, msg)
	s.wmu.Unlock()
}

// markCorrupt counts a corrupt block once and records a warning.
func (s *Store) markCorrupt(dir string, off int64, why string) {
	s.wmu.Lock()
	_, seen := s.corrupt[blockID{dir, off}]
	if !seen && len(s.corrupt) < 1<<16 {
		s.corrupt[blockID{dir, off}] = struct{}{}
	}
	s.wmu.Unlock()
	if !seen {
		s.corruptBlocks.Add(1)
		s.warn(fmt.Sprintf("corrupt block skipped: %s offset %d: %s", dir, off, why))
	}
}

func newEpoch() uint64 { return rand.Uint64() | 1 }

// Pending calls fn with every record buffered for the next writeout (in
// no particular order): with the flows still in a capture's tables, they
// are what a query of the store does not see yet. The *Record is only
// valid during the call; fn must not call the Store. It holds the writer
// lock while it runs, so fn should only copy.
func (s *Store) Pending(fn func(*flow.Record)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.parts {
		for i := range p.pend {
			fn(&p.pend[i])
		}
	}
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }
