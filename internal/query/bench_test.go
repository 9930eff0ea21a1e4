package query

import (
	"context"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/flow"
	"github.com/weir-dev/weir/internal/format"
	"github.com/weir-dev/weir/internal/gendb"
	"github.com/weir-dev/weir/internal/sink"
	"github.com/weir-dev/weir/internal/store"
)

var (
	benchOnce  sync.Once
	benchStore *store.Store
	benchRows  int64
	benchErr   error
	benchDir   string
)

// genStore builds one day of gendb data (1.44M rows; WEIR_QUERY_WEEK=1:
// the 10.08M-row week) once per test binary.
func genStore(b *testing.B) (*store.Store, int64) {
	benchOnce.Do(func() {
		cfg := gendb.Config{Days: 1}
		if os.Getenv("WEIR_QUERY_WEEK") != "" {
			cfg.Days = 7
		}
		benchDir, benchErr = os.MkdirTemp("", "weir-query-bench-")
		if benchErr != nil {
			return
		}
		s, err := store.Open(store.Config{Dir: benchDir, NoSync: true, Writeout: 24 * time.Hour})
		if err != nil {
			benchErr = err
			return
		}
		benchErr = gendb.Generate(cfg, func(_ int64, recs []flow.Record) error {
			if err := s.Write(recs); err != nil {
				return err
			}
			return s.Flush()
		})
		benchRows = s.Stats().RowsWritten
		s.Close()
		if benchErr == nil {
			benchStore, benchErr = store.OpenReadOnly(benchDir)
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchStore, benchRows
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// BenchmarkQuery times whole queries (top 10 by bytes) over a gendb store:
// ns/row is per stored row, cpu-ns/row the process's CPU time per stored
// row (all threads: on a loaded machine the steadier figure), groups the
// distinct groups aggregated.
func BenchmarkQuery(b *testing.B) {
	for _, c := range []struct{ name, group, cond string }{
		{"sip", "sip", ""},
		{"sip,dip", "sip,dip", ""},
		{"sip,dip,dport,proto", "sip,dip,dport,proto", ""},
		{"sip,dip/dport=443", "sip,dip", "dport = 443"},
		{"sip,dip/sip=rare", "sip,dip", "sip = 10.0.62.253"},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, rows := genStore(b)
			g, _ := ParseGroupBy(c.group)
			cond, err := ParseCondition(c.cond)
			if err != nil {
				b.Fatal(err)
			}
			res := timeQuery(b, s, &Query{Group: g, Cond: cond, Limit: 10}, rows)
			b.ReportMetric(float64(res.Stats.BlocksSkipped)/float64(res.Stats.Blocks), "skipped/block")
		})
	}
}

// discardSink takes records and drops them: the engine alone.
type discardSink struct{}

func (discardSink) Write([]flow.Record) error { return nil }
func (discardSink) Close() error              { return nil }

// BenchmarkExport times exporting a whole gendb store (one day, 1.44M
// records; WEIR_QUERY_WEEK=1: 10.08M): the engine alone (decoding every
// column and building records), and into JSON lines and CSV written to
// io.Discard. ns/row is per exported record, cpu-ns/row the process's
// CPU time per record (all threads: the garbage collector's too).
func BenchmarkExport(b *testing.B) {
	for _, c := range []struct {
		name string
		sink func() sink.Sink
	}{
		{"records", func() sink.Sink { return discardSink{} }},
		{"json", func() sink.Sink { return format.NewJSON(io.Discard) }},
		{"csv", func() sink.Sink { return NewRecordCSV(io.Discard) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, rows := genStore(b)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			for b.Loop() {
				dst := c.sink()
				st, err := ExportRecords(context.Background(), s, &Export{}, dst)
				if err != nil || st.Records != rows {
					b.Fatalf("%d of %d records: %v", st.Records, rows, err)
				}
				dst.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*rows), "ns/row")
			b.ReportMetric(float64(cpuTime()-cpu)/float64(int64(b.N)*rows), "cpu-ns/row")
		})
	}
}

// timeQuery runs q over s for the benchmark's iterations and reports wall
// and CPU time per stored row (rows) and the groups of the last answer,
// which it returns.
func timeQuery(b *testing.B, s *store.Store, q *Query, rows int64) *Result {
	b.Helper()
	var res *Result
	var err error
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for b.Loop() {
		if res, err = Run(context.Background(), s, q, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*rows), "ns/row")
	b.ReportMetric(float64(cpuTime()-cpu)/float64(int64(b.N)*rows), "cpu-ns/row")
	b.ReportMetric(float64(res.Stats.Groups), "groups")
	return res
}
