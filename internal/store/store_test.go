package store

import (
	"cmp"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

const day = int64(24 * time.Hour)

// t0 is 2025-03-01 00:00 UTC.
var t0 = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()

func openT(t testing.TB, cfg Config) *Store {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = tempDir(t)
	}
	if cfg.CloseTimeout == 0 {
		cfg.CloseTimeout = time.Minute // a loaded machine under -race: the bound has its own tests
	}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readAll reads every block with all columns and returns the rows and the
// number of blocks that failed.
func readAll(t testing.TB, s *Store) (rows []flow.Record, failed int) {
	t.Helper()
	bl, err := s.Blocks(-1<<63, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var c Columns
	for i := range bl {
		if err := s.ReadBlock(&bl[i], ColAll, &c); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ReadBlock: %v", err)
			}
			failed++
			continue
		}
		if c.N != bl[i].Rows {
			t.Fatalf("N %d, info says %d", c.N, bl[i].Rows)
		}
		for j := 0; j < c.N; j++ {
			rows = append(rows, rowOf(&c, j))
		}
	}
	return rows, failed
}

func sortRecs(r []flow.Record) {
	slices.SortFunc(r, func(a, b flow.Record) int {
		if a.Iface != b.Iface {
			return strings.Compare(a.Iface, b.Iface)
		}
		if a.Start != b.Start {
			return int(min(max(a.Start-b.Start, -1), 1))
		}
		return int(int64(a.Packets) - int64(b.Packets))
	})
}

func sameRows(t *testing.T, got, want []flow.Record) {
	t.Helper()
	got, want = slices.Clone(got), slices.Clone(want)
	sortRecs(got)
	sortRecs(want)
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for i := range got {
		if !recEq(got[i], want[i]) {
			t.Fatalf("row %d:\n got %+v\nwant %+v", i, flat(got[i]), flat(want[i]))
		}
	}
}

// mkRecs makes n distinct records (Packets = first+i) on iface at time at.
func mkRecs(n int, first uint64, iface string, at int64) []flow.Record {
	recs := make([]flow.Record, n)
	for i := range recs {
		seq := first + uint64(i)
		recs[i] = flow.Record{Key: flow.Key{SrcAddr: v4(10, byte(seq>>16), byte(seq>>8), byte(seq)), DstAddr: v4(192, 0, 2, 1),
			SrcPort: uint16(seq), DstPort: 443, Proto: 6, IPVersion: 4},
			Packets: seq, Bytes: seq*3 + 1, Start: at + int64(i), End: at + int64(i) + 1000, Iface: iface}
	}
	return recs
}

func TestStoreWriteRead(t *testing.T) {
	dir := tempDir(t)
	s := openT(t, Config{Dir: dir, TimePrecision: time.Nanosecond})
	var all []flow.Record
	evil := "../../evil/x"
	batches := [][]flow.Record{
		mkRecs(100, 0, "eth0", t0+10),
		mkRecs(50, 1000, "eth0", t0+day+5), // next day
		mkRecs(70, 2000, evil, t0+20),
		mkRecs(1, 3000, "", t0+30),
	}
	for _, b := range batches {
		if err := s.Write(b); err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	rows, failed := readAll(t, s)
	if failed != 0 {
		t.Fatalf("%d blocks failed", failed)
	}
	sameRows(t, rows, all)
	st := s.Stats()
	if st.BlocksWritten != 4 || st.RowsWritten != 221 || st.CorruptBlocks != 0 {
		t.Fatalf("stats %+v", st)
	}
	// Everything stays under dir; the evil name is one escaped directory.
	if _, err := os.Stat(filepath.Join(dir, "%2E.%2F..%2Fevil%2Fx", "2025-03-01", indexName)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "eth0", "2025-03-02", dataName)); err != nil {
		t.Fatal(err)
	}
	ifs, _ := s.Ifaces()
	if !slices.Equal(ifs, []string{"", evil, "eth0"}) {
		t.Fatalf("ifaces %q", ifs)
	}
	first, last, _ := s.Span()
	if first != t0+10 || last != t0+day+5+49+1000 {
		t.Fatalf("span %d..%d", first-t0, last-t0)
	}
	// Time and interface filters.
	bl, _ := s.Blocks(t0+day, 0, []string{"eth0"})
	if len(bl) != 1 || bl[0].Day != "2025-03-02" || bl[0].Rows != 50 {
		t.Fatalf("filtered blocks %+v", bl)
	}
	bl, _ = s.Blocks(0, t0+15, nil)
	if len(bl) != 1 || bl[0].Iface != "eth0" || bl[0].Rows != 100 {
		t.Fatalf("blocks before t0+15: %d", len(bl))
	}
	// A second writer is refused; a reader is fine.
	if _, err := Open(Config{Dir: dir}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v", err)
	}
	r, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	rows, _ = readAll(t, r)
	sameRows(t, rows, all)
	if err := r.Write(all); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only Write: %v", err)
	}
	// Close flushes; reopening appends to the same partitions.
	more := mkRecs(10, 5000, "eth0", t0+50)
	s.Write(more)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	all = append(all, more...)
	s = openT(t, Config{Dir: dir, TimePrecision: time.Nanosecond})
	more = mkRecs(5, 6000, "eth0", t0+60)
	s.Write(more)
	all = append(all, more...)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rows, _ = readAll(t, r)
	sameRows(t, rows, all)
	if bl, _ := r.Blocks(t0, t0+day-1, []string{"eth0"}); len(bl) != 3 {
		t.Fatalf("eth0 day 1 has %d blocks, want 3", len(bl))
	}
}

func TestReadBlockColumnSubset(t *testing.T) {
	s := openT(t, Config{Writeout: time.Hour, TimePrecision: time.Nanosecond})
	defer s.Close()
	g := newGen(3)
	recs := g.window(nil, 2000, t0, "eth1")
	s.Write(recs)
	s.Flush()
	bl, _ := s.Blocks(0, 0, nil)
	if len(bl) != 1 {
		t.Fatalf("%d blocks", len(bl))
	}
	var c Columns
	if err := s.ReadBlock(&bl[0], ColEnd|ColDstPort, &c); err != nil {
		t.Fatal(err)
	}
	if c.N != 2000 || len(c.End) != 2000 || len(c.DstPort) != 2000 || len(c.Start) != 0 || len(c.SrcAddr) != 0 || len(c.Bytes) != 0 {
		t.Fatalf("lens N %d end %d dport %d start %d src %d", c.N, len(c.End), len(c.DstPort), len(c.Start), len(c.SrcAddr))
	}
	// Rows come back in Start order (stable for equal Starts).
	slices.SortStableFunc(recs, func(a, b flow.Record) int { return cmp.Compare(a.Start, b.Start) })
	for i := range recs {
		if c.End[i] != recs[i].End || c.DstPort[i] != recs[i].Key.DstPort {
			t.Fatalf("row %d differs", i)
		}
	}
	// Steady state: no allocations.
	allocs := testing.AllocsPerRun(50, func() {
		if err := s.ReadBlock(&bl[0], ColSrcAddr|ColBytes|ColRevBytes|ColEnd, &c); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 && !raceEnabled {
		t.Fatalf("ReadBlock allocates %.1f times per call", allocs)
	}
}

func TestSummaries(t *testing.T) {
	e := newTestEncoder(t)
	r := rand.New(rand.NewPCG(5, 6))
	var falseAddr, falsePort, absentTries int
	for round := 0; round < 40; round++ {
		g := newGen(uint64(round))
		n := 1 + r.IntN(5000)
		recs := g.window(nil, n, t0, "x")
		if round%5 == 0 { // few distinct ports: bloom filters instead of buckets
			for i := range recs {
				recs[i].Key.SrcPort = uint16(r.IntN(40))
			}
		}
		b, _ := e.encode(nil, recs)
		h, err := parseHeader(b, true)
		if err != nil {
			t.Fatal(err)
		}
		bi := &BlockInfo{h: h, Rows: n}
		in := map[[16]byte]bool{}
		inPort := map[uint16]bool{}
		for i := range recs {
			k := &recs[i].Key
			if !bi.MayContainSrc(k.SrcAddr) || !bi.MayContainDst(k.DstAddr) || !bi.MayContainAddr(k.SrcAddr) {
				t.Fatalf("round %d: address of row %d reported absent", round, i)
			}
			if !bi.MayContainSrcPort(k.SrcPort) || !bi.MayContainDstPort(k.DstPort) || !bi.MayContainPort(k.DstPort) {
				t.Fatalf("round %d: port of row %d reported absent", round, i)
			}
			in[k.SrcAddr], in[k.DstAddr] = true, true
			inPort[k.DstPort] = true
		}
		for try := 0; try < 2000; try++ {
			a := v4(172, byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)))
			if in[a] {
				continue
			}
			absentTries++
			if bi.MayContainAddr(a) {
				falseAddr++
			}
			p := uint16(r.IntN(1024)) // well-known range: never a random ephemeral port
			if !inPort[p] && bi.MayContainDstPort(p) {
				falsePort++
			}
		}
	}
	// Two filters of 8 bits per entry, 5 probes: ~2.2% false positives each.
	if rate := float64(falseAddr) / float64(absentTries); rate > 0.06 {
		t.Fatalf("address false-positive rate %.3f", rate)
	}
	if rate := float64(falsePort) / float64(absentTries); rate > 0.06 {
		t.Fatalf("port false-positive rate %.3f", rate)
	}
	t.Logf("false positives: addr %.4f port %.4f", float64(falseAddr)/float64(absentTries), float64(falsePort)/float64(absentTries))
}

func TestRetention(t *testing.T) {
	dir := tempDir(t)
	s := openT(t, Config{Dir: dir, Retention: 3 * 24 * time.Hour, NoSync: true, TimePrecision: time.Nanosecond})
	now := time.Unix(0, t0+10*day+12*int64(time.Hour))
	for d := int64(0); d < 10; d++ { // days 0..9, two ifaces
		s.Write(mkRecs(20, uint64(d*100), "a", t0+d*day))
		s.Write(mkRecs(10, uint64(d*100+50), "b", t0+d*day))
	}
	if err := s.Flush(); err != nil { // wall-clock retention: 2025 is long ago → but Flush uses time.Now
		t.Fatal(err)
	}
	if bl, _ := s.Blocks(0, 0, nil); len(bl) != 0 {
		t.Fatalf("%d blocks survived wall-clock retention", len(bl))
	}
	if st := s.Stats(); st.PrunedPartitions != 20 || st.PrunedBlocks != 20 || st.BytesOnDisk != 0 {
		t.Fatalf("stats %+v", st)
	}
	s.Close()

	s = openT(t, Config{Dir: dir, NoSync: true, TimePrecision: time.Nanosecond})
	for d := int64(0); d < 10; d++ {
		s.Write(mkRecs(20, uint64(d*100), "a", t0+d*day))
		s.Write(mkRecs(10, uint64(d*100+50), "b", t0+d*day))
	}
	s.Flush()
	s.cfg.Retention = 3 * 24 * time.Hour
	ps, err := s.Prune(now) // cutoff day 7 12:00: the blocks of days 0..7 ended before it
	if err != nil {
		t.Fatal(err)
	}
	if ps.Partitions != 16 || ps.Blocks != 16 || ps.Rows != 8*30 {
		t.Fatalf("age prune %+v", ps)
	}
	rows, _ := readAll(t, s)
	if len(rows) != 2*30 {
		t.Fatalf("%d rows left", len(rows))
	}
	for _, r := range rows {
		if r.Start < t0+8*day {
			t.Fatalf("row from day %d survived", (r.Start-t0)/day)
		}
	}
	// Size: keep at most what the newest two partitions take.
	parts, total, _ := s.survey()
	if len(parts) != 4 {
		t.Fatalf("%d partitions", len(parts))
	}
	var newest int64
	for _, pp := range parts {
		if pp.pd.dname == "2025-03-10" {
			newest += pp.size
		}
	}
	s.cfg.Retention = 0
	s.cfg.MaxSize = newest
	ps, _ = s.Prune(now)
	if ps.Partitions != 2 || ps.Rows != 30 || ps.Bytes != total-newest {
		t.Fatalf("size prune %+v (freed %d expected)", ps, total-newest)
	}
	rows, _ = readAll(t, s)
	if len(rows) != 30 || s.Stats().BytesOnDisk != s.cfg.MaxSize {
		t.Fatalf("%d rows, %d bytes left", len(rows), s.Stats().BytesOnDisk)
	}
	for _, r := range rows {
		if r.Start < t0+9*day {
			t.Fatalf("row from day %d survived", (r.Start-t0)/day)
		}
	}
	s.Close()
	// Nothing but partitions and the lock file is left behind.
	ents, _ := os.ReadDir(filepath.Join(dir, "a"))
	if len(ents) != 1 || ents[0].Name() != "2025-03-10" {
		t.Fatalf("left in a/: %v", ents)
	}
}

// writeIndexAt writes x as the index of partition directory dir.
func writeIndexAt(dir string, x *index) error {
	d, err := openRoot(dir, false, 0)
	if err != nil {
		return err
	}
	defer d.close()
	_, err = writeIndex(d, x, false, 0o600)
	return err
}

// tempDir is a private temporary directory (0700, as the store makes
// its own): t.TempDir's 0755 would draw the store's mode warning.
func tempDir(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	if err := os.Chmod(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}
