package metrics

import (
	"bytes"
	"io"
	"strconv"
	"testing"
)

// benchCollector writes 10 families × 28 label values = 280 samples, about
// what weir capture renders for a host with a few interfaces and sinks.
type benchCollector struct {
	descs  []*Desc
	labels []string
	n      uint64
}

func newBenchCollector() *benchCollector {
	c := &benchCollector{}
	for i := range 10 {
		name := "bench_family_" + strconv.Itoa(i) + "_total"
		c.descs = append(c.descs, &Desc{Name: name, Help: "A benchmark counter.", Type: Counter, Labels: []string{"iface", "reason"}})
	}
	for i := range 28 {
		c.labels = append(c.labels, "eth"+strconv.Itoa(i))
	}
	return c
}

func (c *benchCollector) Describe() []*Desc { return c.descs }

func (c *benchCollector) Collect(w *Writer) {
	c.n += 12345 // values change between scrapes, as real counters do
	for i, d := range c.descs {
		for j, l := range c.labels {
			w.Sample(d, float64(c.n+uint64(i*j)), l, "some_reason")
		}
	}
}

// newBenchRegistry: the benchmark collector plus the Go and process
// collectors, about 300 samples.
func newBenchRegistry(t testing.TB) *Registry {
	r := NewRegistry()
	for _, c := range []Collector{newBenchCollector(), NewGoCollector(), NewProcessCollector()} {
		if err := r.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// BenchmarkScrape: one WriteTo of ~300 samples (no HTTP).
func BenchmarkScrape(b *testing.B) {
	r := newBenchRegistry(b)
	n, err := r.WriteTo(io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(n)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = r.WriteTo(io.Discard)
	}
}

// BenchmarkScrapeSynthetic: the 280 synthetic samples alone, without the
// system calls of the Go and process collectors.
func BenchmarkScrapeSynthetic(b *testing.B) {
	r := NewRegistry()
	if err := r.Register(newBenchCollector()); err != nil {
		b.Fatal(err)
	}
	n, _ := r.WriteTo(io.Discard)
	b.SetBytes(n)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = r.WriteTo(io.Discard)
	}
}

// BenchmarkProcessCollector: the process collector alone (/proc reads).
func BenchmarkProcessCollector(b *testing.B) {
	r := NewRegistry()
	if err := r.Register(NewProcessCollector()); err != nil {
		b.Fatal(err)
	}
	_, _ = r.WriteTo(io.Discard)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = r.WriteTo(io.Discard)
	}
}

// BenchmarkParseText: parsing a ~300 sample scrape (a test helper, but
// other packages' tests call it often).
func BenchmarkParseText(b *testing.B) {
	r := newBenchRegistry(b)
	var buf bytes.Buffer
	_, _ = r.WriteTo(&buf)
	text := buf.Bytes()
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseText(bytes.NewReader(text)); err != nil {
			b.Fatal(err)
		}
	}
}
