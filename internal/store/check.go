package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Damage is one damaged stretch of a partition's files.
type Damage struct {
	File   string // the block or index file
	Offset int64  // byte offset in File; -1: the file as a whole
	Size   int64  // bytes concerned; 0 when not known
	Rows   int    // records lost, from the index; -1 when no index lists them
	Reason string
}

// String is the damage as one line: file, offset, size, what is wrong and
// the records lost (for a newer weir's block: not read here, not lost).
func (d Damage) String() string {
	var b strings.Builder
	b.WriteString(safePath(d.File))
	if d.Offset >= 0 {
		fmt.Fprintf(&b, " offset %d", d.Offset)
	}
	if d.Size > 0 {
		fmt.Fprintf(&b, " (%s bytes)", commas(d.Size))
	}
	b.WriteString(": ")
	b.WriteString(d.Reason)
	switch {
	case d.Newer(): // not lost: the weir that wrote it reads it
		if d.Rows > 0 {
			fmt.Fprintf(&b, "; %s records not read here", commas(int64(d.Rows)))
		}
	case d.Rows > 0:
		fmt.Fprintf(&b, "; %s records lost", commas(int64(d.Rows)))
	case d.Rows < 0:
		b.WriteString("; records lost: unknown (no index lists them)")
	}
	return b.String()
}

// CheckOptions say what Check does besides verifying.
type CheckOptions struct {
	// Repair fixes each damaged partition: the index is rebuilt from its
	// intact blocks (every one, also those after a damaged stretch) and
	// the data file is cut after the last of them. It takes the writer
	// lock: ErrLocked while a capture writes to the store.
	Repair bool
	// Problem, when set, is called with each problem as it is found.
	Problem func(Damage)
	// Action, when set, is called with each thing Repair did.
	Action func(string)
}

// CheckReport is what Check found (and did).
type CheckReport struct {
	Partitions    int
	Blocks        int   // intact blocks (committed, or found by scanning a damaged index's file)
	Rows          int64 // records in them
	DamagedBlocks int   // damaged blocks and stretches
	DamagedRows   int64 // records in them, as far as an index lists them
	NewerBlocks   int   // blocks of a format newer than this weir reads: not damage, left as they are
	NewerRows     int64 // records in them, as far as an index lists them
	UnknownRows   int   // damaged stretches no index lists (records unknown)
	BadIndexes    int   // indexes missing, failing their checksum or unreadable
	Tails         int   // data files with bytes after their last committed block
	Problems      []Damage
	Repaired      int  // partitions repaired
	WriterRunning bool // a writer held the lock during a check without Repair
}

// Newer reports whether the problem is a block of a format newer than
// this weir reads: not damage, and left as it is by a repair.
func (d Damage) Newer() bool { return strings.HasPrefix(d.Reason, newerWhy) }

// Clean reports whether Check found nothing wrong.
func (r *CheckReport) Clean() bool { return len(r.Problems) == 0 }

// Check verifies the store in dir: every block (header and column CRCs,
// and that every column decodes) and every index against its data file,
// independently of what the index says (a scan of each data file). With
// opts.Repair it also repairs; see CheckOptions.
func Check(dir string, opts CheckOptions) (*CheckReport, error) {
	root, err := openRoot(dir, false, 0)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	defer root.close()
	s := newStore(dir)
	s.root = root
	s.dirPerm, s.fPerm = ModePrivate.perms()
	c := &checker{s: s, opts: opts, rep: &CheckReport{}}
	if opts.Repair {
		lock, err := lockDir(root, s.fPerm)
		if err != nil {
			return nil, err
		}
		defer lock.Close()
		s.finishInterrupted()
	} else {
		c.rep.WriterRunning = writerRunning(root)
	}
	s.cfg.Log = func(msg string) { c.problem(Damage{File: dir, Offset: -1, Reason: msg}) }
	pds, err := s.walkParts(nil)
	if err != nil {
		return nil, err
	}
	for _, pd := range pds {
		c.rep.Partitions++
		if err := c.part(pd); err != nil {
			return c.rep, err
		}
	}
	return c.rep, nil
}

type checker struct {
	s    *Store
	opts CheckOptions
	rep  *CheckReport
	bad  bool // the partition being checked has a problem
	// the damaged blocks (stretches) of the partition, and the records
	// its index lists in them
	lostBlocks int
	lostRows   int64
}

func (c *checker) problem(d Damage) {
	c.bad = true
	c.rep.Problems = append(c.rep.Problems, d)
	if c.opts.Problem != nil {
		c.opts.Problem(d)
	}
}

func (c *checker) action(msg string) {
	if c.opts.Action != nil {
		c.opts.Action(msg)
	}
}

// part checks (and repairs) one partition.
func (c *checker) part(pd partDir) error {
	c.bad = false
	dataPath, idxPath := filepath.Join(pd.path, dataName), filepath.Join(pd.path, indexName)
	d, err := c.s.openPartDir(pd, false)
	if err != nil {
		c.problem(Damage{File: pd.path, Offset: -1, Reason: whyNot(err)})
		return nil
	}
	defer d.close()
	x, idxWhy := c.index(d)
	flag := os.O_RDONLY
	if c.opts.Repair {
		flag = os.O_RDWR
	}
	f, err := d.open(dataName, flag, 0)
	var size int64
	perm := c.s.fPerm
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		c.problem(Damage{File: dataPath, Offset: -1, Reason: whyNot(err)})
		return nil
	default:
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		if links(st) > 1 {
			c.problem(Damage{File: dataPath, Offset: -1, Reason: fmt.Sprintf("has %d hard links: not a file the store made; move it away (not repaired)", links(st))})
			return nil
		}
		size, perm = st.Size(), st.Mode().Perm()
	}
	var blocks []indexEntryT
	var gaps []gap
	if f != nil {
		sc := scanner{r: f, size: size, decode: true}
		blocks, gaps = sc.scan()
	}
	before := *c.rep
	keep := c.judge(pd, x, idxWhy, blocks, gaps, size)
	c.lostBlocks, c.lostRows = c.rep.DamagedBlocks-before.DamagedBlocks, c.rep.DamagedRows-before.DamagedRows
	if !c.bad || !c.opts.Repair {
		return nil
	}
	for _, g := range gaps {
		if strings.HasPrefix(g.why, newerWhy) { // not damage: cutting it away would lose a newer weir's records
			c.action(fmt.Sprintf("left %s as it is: it holds blocks a newer weir wrote; check and repair it with that weir", safePath(pd.path)))
			return nil
		}
	}
	return c.repair(pd, d, f, x, keep, size, perm, idxPath)
}

// index reads d's index; why is "" when it is sound.
func (c *checker) index(d *dirH) (x *index, why string) {
	x, perr, err := loadIndex(d)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, "missing"
	case err != nil:
		return nil, whyNot(err)
	case errors.Is(perr, errTornIndex):
		return nil, "cut short inside its last record (a crash while committing, or a file cut)"
	case perr != nil && perr != errBadIndex:
		return nil, strings.TrimPrefix(perr.Error(), errBadIndex.Error()+": ")
	case perr != nil:
		return nil, "checksum or structure damaged"
	}
	return x, ""
}

// judge compares the index with the blocks the scan found, reports each
// problem, and returns the blocks a repair keeps.
func (c *checker) judge(pd partDir, x *index, idxWhy string, blocks []indexEntryT, gaps []gap, size int64) []indexEntryT {
	dataPath := filepath.Join(pd.path, dataName)
	rep := c.rep
	gapAt := func(off int64) string {
		for _, g := range gaps {
			if off >= g.off && off < g.end {
				return g.why
			}
		}
		return "does not match its index entry"
	}
	if x == nil {
		if idxWhy == "missing" && len(blocks) == 0 && len(gaps) == 0 {
			return nil // an empty partition
		}
		rep.BadIndexes++
		c.problem(Damage{File: filepath.Join(pd.path, indexName), Offset: -1, Reason: "index " + idxWhy + fmt.Sprintf("; the data file holds %d intact blocks", len(blocks))})
		for _, b := range blocks {
			rep.Blocks++
			rep.Rows += int64(b.rows)
		}
		for _, g := range gaps {
			if strings.HasPrefix(g.why, newerWhy) {
				rep.NewerBlocks++
			} else {
				rep.DamagedBlocks++
				rep.UnknownRows++
			}
			c.problem(Damage{File: dataPath, Offset: g.off, Size: g.end - g.off, Rows: -1, Reason: g.why})
		}
		return blocks
	}
	good := make(map[int64]indexEntryT, len(blocks))
	for _, b := range blocks {
		good[b.off] = b
	}
	var keep []indexEntryT
	for _, e := range x.entries {
		if g, ok := good[e.off]; ok && g == e {
			keep = append(keep, e)
			rep.Blocks++
			rep.Rows += int64(e.rows)
			continue
		}
		why := gapAt(e.off)
		if e.off+int64(e.blockLen) > size {
			why = fmt.Sprintf("past the end of the file (%d bytes): cut off", size)
		}
		if strings.HasPrefix(why, newerWhy) {
			rep.NewerBlocks++
			rep.NewerRows += int64(e.rows)
		} else {
			rep.DamagedBlocks++
			rep.DamagedRows += int64(e.rows)
		}
		c.problem(Damage{File: dataPath, Offset: e.off, Size: int64(e.blockLen), Rows: e.rows, Reason: why})
	}
	if size > x.dataLen {
		rep.Tails++
		tail := Damage{File: dataPath, Offset: x.dataLen, Size: size - x.dataLen, Reason: "bytes after the last committed block (an interrupted write, or appended)"}
		if rep.WriterRunning {
			return keep // the writer's block in flight, or cut off when it reopens the partition
		}
		c.problem(tail)
	}
	return keep
}

// repair commits an index of keep and cuts the data file after its last
// block (freeing the damaged stretches between blocks where it can).
func (c *checker) repair(pd partDir, d *dirH, f *os.File, x *index, keep []indexEntryT, size int64, perm os.FileMode, idxPath string) error {
	if len(keep) == 0 {
		if err := c.s.removePart(pd); err != nil {
			return err
		}
		c.rep.Repaired++
		c.action(fmt.Sprintf("removed %s: no intact block in it", safePath(pd.path)))
		return nil
	}
	nx := &index{epoch: newEpoch(), gen: 1, entries: keep}
	nx.iface = unescapeIface(pd.iname)
	if x != nil {
		nx.gen, nx.iface = x.gen+1, x.iface
	}
	last := keep[len(keep)-1]
	nx.dataLen = last.off + int64(last.blockLen)
	if _, err := writeIndex(d, nx, true, perm); err != nil {
		return err
	}
	if err := f.Truncate(nx.dataLen); err != nil {
		return err
	}
	var at, freed int64
	for _, e := range keep {
		if punchHole(f, at, e.off-at) == nil {
			freed += e.off - at
		}
		at = e.off + int64(e.blockLen)
	}
	if err := f.Sync(); err != nil {
		return err
	}
	c.rep.Repaired++
	var rows int64
	for _, e := range keep {
		rows += int64(e.rows)
	}
	c.action(fmt.Sprintf("repaired %s: kept %d intact blocks (%s records); removed %d damaged blocks (%s records), cut %s bytes after the last intact block, freed %s bytes between them; index %s rebuilt",
		safePath(pd.path), len(keep), commas(rows), c.lostBlocks, commas(c.lostRows), commas(max(size-nx.dataLen, 0)), commas(freed), safePath(idxPath)))
	return nil
}

// whyNot says why check could not open a store file or directory.
func whyNot(err error) string {
	if errors.Is(err, ErrSymlink) {
		return "a symbolic link: never followed, not repaired; remove it"
	}
	return errText(err) + " (not repaired)"
}
