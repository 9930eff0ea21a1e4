package store

import (
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
)

const benchRows = 5000 // rows per 5-minute block, as in the 7-day goal

var (
	benchOnce    sync.Once
	benchWindows [][]flow.Record
)

// windows returns 12 pre-generated 5-minute windows of realistic rows.
func windows() [][]flow.Record {
	benchOnce.Do(func() {
		g := newGen(42)
		for w := 0; w < 12; w++ {
			benchWindows = append(benchWindows, g.window(nil, benchRows, t0+int64(w)*int64(5*time.Minute), "eth0"))
		}
	})
	return benchWindows
}

// shifted copies window w moved forward by i windows.
func shifted(dst []flow.Record, i int) []flow.Record {
	ws := windows()
	src := ws[i%len(ws)]
	dst = append(dst[:0], src...)
	d := int64(i/len(ws)*len(ws)) * int64(5*time.Minute)
	for j := range dst {
		dst[j].Start += d
		dst[j].End += d
	}
	return dst
}

func benchWrite(b *testing.B, noSync bool) { benchWriteMode(b, noSync, false) }

// benchWriteMode times Write and then Flush for each block, or, with
// async, Write and FlushAsync for each block and one Flush at the end
// (timed: every block is durable when the timer stops).
func benchWriteMode(b *testing.B, noSync, async bool) {
	windows()
	s := openT(b, Config{Dir: b.TempDir(), NoSync: noSync, Writeout: time.Hour})
	var batch []flow.Record
	var cpu time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		batch = shifted(batch, i)
		b.StartTimer()
		// Read inside StartTimer and StopTimer: those read the memory
		// statistics (a stop of the world), the harness's cost, not Write's.
		c0 := procCPU()
		if err := s.Write(batch); err != nil {
			b.Fatal(err)
		}
		flush := s.Flush
		if async {
			flush = s.FlushAsync
		}
		if err := flush(); err != nil {
			b.Fatal(err)
		}
		cpu += procCPU() - c0
		b.StopTimer()
		b.StartTimer()
	}
	if async {
		c0 := procCPU()
		if err := s.Flush(); err != nil {
			b.Fatal(err)
		}
		cpu += procCPU() - c0
	}
	b.StopTimer()
	st := s.Stats()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchRows), "ns/row")
	// CPU time of the process (both cores, user and system) per row: the
	// cost the agent pays, apart from waiting for the disk.
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*benchRows), "cpu-ns/row")
	b.ReportMetric(float64(st.BytesOnDisk)/float64(st.RowsWritten), "B/row")
	s.Close()
}

// BenchmarkWrite measures the production write path, rows in → durable
// block on disk, one 5000-row writeout per iteration: Write (copy into the
// partition's buffer), then Flush (round and sort by Start, encode,
// append, fsync the block file, append a record to the index and fsync
// it; the first writeout writes the index whole: temp, fsync, rename,
// directory fsync). ns/row is wall time (waiting for the disk included),
// cpu-ns/row the process's CPU time; B/row is everything on disk (blocks,
// summaries, index).
func BenchmarkWrite(b *testing.B) { benchWrite(b, false) }

// BenchmarkWriteNoSync is BenchmarkWrite without fsync: the encoding cost.
func BenchmarkWriteNoSync(b *testing.B) { benchWrite(b, true) }

// BenchmarkWritePipelined is BenchmarkWrite with the blocks handed to the
// commit pipeline (Write, FlushAsync) and one Flush at the end, timed: the
// same durability for every block, the next block's encoding overlapping
// the last one's fsyncs.
func BenchmarkWritePipelined(b *testing.B) { benchWriteMode(b, false, true) }

// readStore builds a store of n blocks for the read benchmarks.
func readStore(b *testing.B, n int) (*Store, []BlockInfo) {
	windows()
	s := openT(b, Config{Dir: b.TempDir(), NoSync: true, Writeout: time.Hour})
	var batch []flow.Record
	for i := 0; i < n; i++ {
		batch = shifted(batch, i)
		s.Write(batch)
		s.Flush()
	}
	bl, err := s.Blocks(0, 0, nil)
	if err != nil || len(bl) != n {
		b.Fatal(len(bl), err)
	}
	return s, bl
}

// BenchmarkReadBlock decodes the columns a "bytes by source address" query
// needs, one block per iteration.
func BenchmarkReadBlock(b *testing.B) {
	s, bl := readStore(b, 12)
	defer s.Close()
	var c Columns
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.ReadBlock(&bl[i%len(bl)], ColSrcAddr|ColBytes|ColRevBytes, &c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchRows), "ns/row")
}

// BenchmarkAggregateBySrc decodes blocks on GOMAXPROCS goroutines and sums
// bytes per source address, as the query engine would.
func BenchmarkAggregateBySrc(b *testing.B) {
	s, bl := readStore(b, 48)
	defer s.Close()
	workers := runtime.GOMAXPROCS(0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var wg sync.WaitGroup
		parts := make([]map[[16]byte]uint64, workers)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				var c Columns
				m := make(map[[16]byte]uint64, 16384)
				for j := w; j < len(bl); j += workers {
					if err := s.ReadBlock(&bl[j], ColSrcAddr|ColBytes|ColRevBytes, &c); err != nil {
						b.Error(err)
						return
					}
					for k := 0; k < c.N; k++ {
						m[c.SrcAddr[k]] += c.Bytes[k] + c.RevBytes[k]
					}
				}
				parts[w] = m
			}(w)
		}
		wg.Wait()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(bl)*benchRows), "ns/row")
}

// BenchmarkAggregateBySrcIdx is BenchmarkAggregateBySrc through the
// dictionary form: rows are summed into an array indexed by SrcIdx and the
// 16-byte keys reach the map once per distinct address per block.
func BenchmarkAggregateBySrcIdx(b *testing.B) {
	s, bl := readStore(b, 48)
	defer s.Close()
	workers := runtime.GOMAXPROCS(0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var wg sync.WaitGroup
		parts := make([]map[[16]byte]uint64, workers)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				var c Columns
				var acc []uint64
				m := make(map[[16]byte]uint64, 16384)
				for j := w; j < len(bl); j += workers {
					if err := s.ReadBlock(&bl[j], ColSrcAddrIdx|ColBytes|ColRevBytes, &c); err != nil {
						b.Error(err)
						return
					}
					acc = append(acc[:0], make([]uint64, len(c.SrcDict))...)
					by, rby := c.Bytes[:c.N], c.RevBytes[:c.N]
					for k, x := range c.SrcIdx[:c.N] {
						acc[x] += by[k] + rby[k]
					}
					for x, v := range acc {
						if v != 0 {
							m[c.SrcDict[x]] += v
						}
					}
				}
				parts[w] = m
			}(w)
		}
		wg.Wait()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(bl)*benchRows), "ns/row")
}

// TestWeekScale writes the 7 days × 288 blocks × 5000 rows of the goal
// (10.08M rows) and reports bytes/row and µs/row. It takes about a minute:
// WEIR_STORE_WEEK=1 enables it.
func TestWeekScale(t *testing.T) {
	if os.Getenv("WEIR_STORE_WEEK") == "" {
		t.Skip("set WEIR_STORE_WEEK=1")
	}
	windows()
	s := openT(t, Config{Dir: t.TempDir(), Writeout: time.Hour, NoSync: os.Getenv("WEIR_STORE_NOSYNC") != ""})
	var batch []flow.Record
	var spent time.Duration
	for i := 0; i < 7*288; i++ {
		batch = shifted(batch, i)
		start := time.Now()
		s.Write(batch)
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		spent += time.Since(start)
	}
	st := s.Stats()
	t.Logf("%d rows, %d blocks: %.2f B/row on disk, %.3f µs/row to write", st.RowsWritten, st.BlocksWritten,
		float64(st.BytesOnDisk)/float64(st.RowsWritten), spent.Seconds()*1e6/float64(st.RowsWritten))
	bl, _ := s.Blocks(0, 0, nil)
	start := time.Now()
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			var c Columns
			m := make(map[[16]byte]uint64, 16384)
			for j := w; j < len(bl); j += workers {
				s.ReadBlock(&bl[j], ColSrcAddr|ColBytes|ColRevBytes, &c)
				for k := 0; k < c.N; k++ {
					m[c.SrcAddr[k]] += c.Bytes[k] + c.RevBytes[k]
				}
			}
		}(w)
	}
	wg.Wait()
	t.Logf("aggregate bytes by source over %d blocks on %d goroutines: %v", len(bl), workers, time.Since(start))
	s.Close()
}

// BenchmarkEncodeBlock is the CPU cost of turning 5000 rows into a block
// (both goroutines: cpu-ns/row is the process's CPU time).
func BenchmarkEncodeBlock(b *testing.B) {
	recs := windows()[0]
	e := newTestEncoder(b)
	var buf []byte
	b.ReportAllocs()
	b.ResetTimer()
	c0 := procCPU()
	for i := 0; i < b.N; i++ {
		buf, _ = e.encode(buf[:0], recs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchRows), "ns/row")
	b.ReportMetric(float64((procCPU()-c0).Nanoseconds())/float64(b.N*benchRows), "cpu-ns/row")
}

// BenchmarkEncodeRanked is the write path's encoding of 5000 rows in
// random Start order: the sort (order) and the block from its
// permutation (encodeRanked), both goroutines' CPU in cpu-ns/row.
func BenchmarkEncodeRanked(b *testing.B) {
	recs := slices.Clone(windows()[0])
	lo, hi := recs[0].Start, recs[0].Start
	for i := range recs {
		lo, hi = min(lo, recs[i].Start), max(hi, recs[i].Start)
	}
	s := &Store{cfg: Config{TimePrecision: DefaultTimePrecision}}
	e := newTestEncoder(b)
	var buf []byte
	b.ReportAllocs()
	b.ResetTimer()
	c0 := procCPU()
	for i := 0; i < b.N; i++ {
		rows, perm, rank := s.order(recs, false, lo, hi)
		buf, _ = e.encodeRanked(buf[:0], rows, perm, rank)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchRows), "ns/row")
	b.ReportMetric(float64((procCPU()-c0).Nanoseconds())/float64(b.N*benchRows), "cpu-ns/row")
}

// BenchmarkAddrTableBuild is the address dictionary's build of one
// block's source and destination addresses (5000 rows each).
func BenchmarkAddrTableBuild(b *testing.B) {
	recs := windows()[0]
	src, dst := make([][16]byte, len(recs)), make([][16]byte, len(recs))
	for i := range recs {
		src[i], dst[i] = recs[i].Key.SrcAddr, recs[i].Key.DstAddr
	}
	var t, t2 addrTable
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t.build(src)
		t2.build(dst)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2*len(recs)), "ns/addr")
}
