package metrics

import (
	"bytes"
	"io"
	"math"
	"strings"
	"sync"
	"testing"
)

// funcCollector is a test collector: fixed descs, a function to collect.
type funcCollector struct {
	descs   []*Desc
	collect func(w *Writer)
}

func (c *funcCollector) Describe() []*Desc { return c.descs }
func (c *funcCollector) Collect(w *Writer) { c.collect(w) }

var (
	tRequests = &Desc{Name: "test_requests_total", Help: "Requests by code and path.\nA \\ second line.", Type: Counter, Labels: []string{"code", "path"}}
	tTemp     = &Desc{Name: "test_temperature", Help: `Temperature, "quoted".`, Type: Gauge}
	tValues   = &Desc{Name: "test_values", Help: "Special values.", Type: Gauge, Labels: []string{"kind"}}
)

// newTestRegistry registers one collector that writes the test families,
// interleaved, so rendering has to group them.
func newTestRegistry(t testing.TB) *Registry {
	r := NewRegistry()
	c := &funcCollector{
		descs: []*Desc{tValues, tTemp, tRequests},
		collect: func(w *Writer) {
			w.Sample(tValues, math.NaN(), "nan")
			w.Sample(tRequests, 3, "200", "/a")
			w.Sample(tValues, math.Inf(1), "+inf")
			w.Sample(tTemp, 21.5)
			w.Sample(tValues, math.Inf(-1), "-inf")
			w.Sample(tRequests, 1e6, "500", "/x\"y\\z\n")
			w.Sample(tValues, 1<<53, "2^53")
			w.Sample(tValues, 1<<53+2, "2^53+2")
			w.Sample(tValues, 0.25, "quarter")
			w.Sample(tValues, math.Copysign(0, -1), "-0")
			w.Sample(tValues, 1e-7, "tiny")
			w.Sample(tValues, -3, "neg")
			w.Sample(tValues, 1.5e300, "huge")
		},
	}
	if err := r.Register(c); err != nil {
		t.Fatal(err)
	}
	return r
}

// wantTestText is newTestRegistry's rendering, written by hand from the
// format's rules: families sorted by name, help escapes only \ and newline,
// label values also escape ", integers up to 2^53 without exponent,
// shortest round-trip form otherwise, samples in the order written.
const wantTestText = `# HELP test_requests_total Requests by code and path.\nA \\ second line.
# TYPE test_requests_total counter
test_requests_total{code="200",path="/a"} 3
test_requests_total{code="500",path="/x\"y\\z\n"} 1000000
# HELP test_temperature Temperature, "quoted".
# TYPE test_temperature gauge
test_temperature 21.5
# HELP test_values Special values.
# TYPE test_values gauge
test_values{kind="nan"} NaN
test_values{kind="+inf"} +Inf
test_values{kind="-inf"} -Inf
test_values{kind="2^53"} 9007199254740992
test_values{kind="2^53+2"} 9.007199254740994e+15
test_values{kind="quarter"} 0.25
test_values{kind="-0"} 0
test_values{kind="tiny"} 1e-07
test_values{kind="neg"} -3
test_values{kind="huge"} 1.5e+300
# HELP weir_metrics_errors_total Samples dropped or collectors failed while rendering metrics, by reason.
# TYPE weir_metrics_errors_total counter
weir_metrics_errors_total{reason="label_count"} 0
weir_metrics_errors_total{reason="unregistered"} 0
weir_metrics_errors_total{reason="duplicate"} 0
weir_metrics_errors_total{reason="invalid_utf8"} 0
weir_metrics_errors_total{reason="collector_panic"} 0
weir_metrics_errors_total{reason="collector_read"} 0
`

func TestWriteToExact(t *testing.T) {
	r := newTestRegistry(t)
	for scrape := range 2 { // the second scrape reuses the buffers and must not repeat anything
		var b bytes.Buffer
		n, err := r.WriteTo(&b)
		if err != nil {
			t.Fatal(err)
		}
		if got := b.String(); got != wantTestText {
			t.Fatalf("scrape %d:\n%s\nwant:\n%s", scrape, got, wantTestText)
		}
		if n != int64(len(wantTestText)) {
			t.Errorf("WriteTo returned %d, wrote %d bytes", n, len(wantTestText))
		}
	}
}

func TestDescs(t *testing.T) {
	r := newTestRegistry(t)
	var names []string
	for _, d := range r.Descs() {
		names = append(names, d.Name)
	}
	want := "test_requests_total test_temperature test_values weir_metrics_errors_total"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("Descs = %s, want %s", got, want)
	}
}

func TestRegisterValidation(t *testing.T) {
	bad := []*Desc{
		nil,
		{Name: "", Help: "h", Type: Gauge},
		{Name: "1abc", Help: "h", Type: Gauge},
		{Name: "a-b", Help: "h", Type: Gauge},
		{Name: "a b", Help: "h", Type: Gauge},
		{Name: "héllo", Help: "h", Type: Gauge},
		{Name: strings.Repeat("a", maxNameLen+1), Help: "h", Type: Gauge},
		{Name: "requests", Help: "h", Type: Counter},
		{Name: "requests_totals", Help: "h", Type: Counter},
		{Name: "x", Help: "h", Type: 0},
		{Name: "x", Help: "h", Type: 4},
		{Name: "x", Help: "", Type: Gauge},
		{Name: "x", Help: "bad \xff utf-8", Type: Gauge},
		{Name: "x", Help: "h", Type: Gauge, Labels: []string{"__reserved"}},
		{Name: "x", Help: "h", Type: Gauge, Labels: []string{"9lives"}},
		{Name: "x", Help: "h", Type: Gauge, Labels: []string{"a:b"}},
		{Name: "x", Help: "h", Type: Gauge, Labels: []string{""}},
		{Name: "x", Help: "h", Type: Gauge, Labels: []string{"a", "b", "a"}},
		{Name: "weir_metrics_errors_total", Help: "h", Type: Counter}, // the registry's own
		{Name: "test_temperature", Help: "h", Type: Gauge},            // taken by newTestRegistry
	}
	for _, d := range bad {
		r := newTestRegistry(t)
		before := len(r.Descs())
		ok := &Desc{Name: "fine_total", Help: "h", Type: Counter}
		if err := r.Register(&funcCollector{descs: []*Desc{ok, d}, collect: func(*Writer) {}}); err == nil {
			t.Errorf("Register(%+v) succeeded", d)
		} else if !strings.HasPrefix(err.Error(), "metrics: ") {
			t.Errorf("error %q does not say where it comes from", err)
		}
		if got := len(r.Descs()); got != before {
			t.Errorf("a failed Register left %d descs, want %d (nothing registered)", got, before)
		}
	}
	good := []*Desc{
		{Name: "_total", Help: "h", Type: Counter},
		{Name: "a:b_c9", Help: "h", Type: Gauge, Labels: []string{"_x", "Y9", "le"}},
	}
	r := NewRegistry()
	if err := r.Register(&funcCollector{descs: good, collect: func(*Writer) {}}); err != nil {
		t.Errorf("Register(valid descs): %v", err)
	}
}

func TestRegisterCollectors(t *testing.T) {
	r := NewRegistry()
	d := &Desc{Name: "a_total", Help: "h", Type: Counter}
	c := &funcCollector{descs: []*Desc{d}, collect: func(w *Writer) { w.Sample(d, 1) }}
	if err := r.Register(nil); err == nil {
		t.Error("Register(nil) succeeded")
	}
	if err := r.Register(c); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(c); err == nil {
		t.Error("registering a collector twice succeeded")
	}
	twice := &funcCollector{descs: []*Desc{{Name: "b", Help: "h", Type: Gauge}, {Name: "b", Help: "h2", Type: Gauge}}}
	if err := r.Register(twice); err == nil {
		t.Error("a collector describing one name twice was registered")
	}
	if err := r.Register(sliceCollector{}); err == nil {
		t.Error("a non-comparable collector was registered")
	}
	r.Unregister(sliceCollector{}) // must not panic
	other := &funcCollector{descs: []*Desc{d}}
	if err := r.Register(other); err == nil {
		t.Error("another collector with the same Desc was registered")
	}
	if got := scrape(t, r)["a_total"]; got != 1 {
		t.Errorf("a_total = %v, want 1", got)
	}
	r.Unregister(c)
	if _, ok := scrape(t, r)["a_total"]; ok {
		t.Error("a_total still rendered after Unregister")
	}
	if err := r.Register(other); err != nil { // the name is free again
		t.Errorf("Register after Unregister: %v", err)
	}
}

// sliceCollector is not comparable: == on it would panic.
type sliceCollector []int

func (sliceCollector) Describe() []*Desc { return nil }
func (sliceCollector) Collect(*Writer)   {}

// scrape renders r and parses the result.
func scrape(t testing.TB, r *Registry) map[string]float64 {
	t.Helper()
	var b bytes.Buffer
	if _, err := r.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	m, err := ParseText(&b)
	if err != nil {
		t.Fatalf("ParseText: %v\n%s", err, b.String())
	}
	return m
}

func errorsKey(reason string) string { return `weir_metrics_errors_total{reason="` + reason + `"}` }

func TestScrapeErrorsCounted(t *testing.T) {
	r := NewRegistry()
	g := &Desc{Name: "g", Help: "h", Type: Gauge, Labels: []string{"a"}}
	stranger := &Desc{Name: "stranger", Help: "h", Type: Gauge}
	good := &funcCollector{descs: []*Desc{g}, collect: func(w *Writer) {
		w.Sample(g, 1, "x")
		w.Sample(g, 2)                // too few label values
		w.Sample(g, 3, "y", "z")      // too many
		w.Sample(g, 4, "x")           // series already written
		w.Sample(g, 5, "bad\xffutf8") // not UTF-8
		w.Sample(stranger, 6)         // never described
		w.Sample(nil, 7)              // nil Desc
		var nilW *Writer
		nilW.Sample(g, 8, "x") // nil Writer: nothing
	}}
	panicky := &funcCollector{descs: []*Desc{{Name: "p", Help: "h", Type: Gauge}}, collect: func(w *Writer) {
		w.Sample(g, 9, "from_panicky")
		panic("collector bug")
	}}
	for _, c := range []Collector{good, panicky} {
		if err := r.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]float64{
		`g{a="x"}`:                   1,
		`g{a="from_panicky"}`:        9, // written before the panic: kept
		errorsKey("label_count"):     2,
		errorsKey("unregistered"):    2,
		errorsKey("duplicate"):       1,
		errorsKey("invalid_utf8"):    1,
		errorsKey("collector_panic"): 1,
		errorsKey("collector_read"):  0,
	}
	for scrapeNo := 1; scrapeNo <= 2; scrapeNo++ {
		got := scrape(t, r)
		if len(got) != len(want) {
			t.Errorf("scrape %d: %d series, want %d: %v", scrapeNo, len(got), len(want), got)
		}
		for k, v := range want {
			if strings.HasPrefix(k, "weir_") {
				v *= float64(scrapeNo) // the error counters are cumulative
			}
			if got[k] != v {
				t.Errorf("scrape %d: %s = %v, want %v", scrapeNo, k, got[k], v)
			}
		}
	}
}

func TestWriteToError(t *testing.T) {
	r := newTestRegistry(t)
	if _, err := r.WriteTo(failWriter{}); err != io.ErrClosedPipe {
		t.Errorf("WriteTo to a failing writer: %v, want io.ErrClosedPipe", err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

// TestConcurrentScrapes: scrapes from many goroutines (run with -race) each
// get the whole, exact rendering.
func TestConcurrentScrapes(t *testing.T) {
	r := newTestRegistry(t)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Go(func() {
			for range 50 {
				var b bytes.Buffer
				if _, err := r.WriteTo(&b); err != nil || b.String() != wantTestText {
					errs <- b.String()
					return
				}
			}
		})
	}
	wg.Go(func() { // registrations during scrapes
		for range 50 {
			c := &funcCollector{descs: []*Desc{{Name: "zz_extra", Help: "h", Type: Gauge}}, collect: func(*Writer) {}}
			if err := r.Register(c); err != nil {
				errs <- err.Error()
				return
			}
			r.Unregister(c)
		}
	})
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatalf("concurrent scrape got:\n%s", e)
	}
}

// TestWriteToAllocs: after the first scrape, rendering allocates nothing.
func TestWriteToAllocs(t *testing.T) {
	r := newBenchRegistry(t)
	if _, err := r.WriteTo(io.Discard); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(50, func() { _, _ = r.WriteTo(io.Discard) }); a != 0 {
		t.Errorf("WriteTo: %v allocations per scrape, want 0", a)
	}
}

func TestTypeString(t *testing.T) {
	for typ, want := range map[Type]string{Counter: "counter", Gauge: "gauge", 7: "type(7)"} {
		if got := typ.String(); got != want {
			t.Errorf("Type(%d).String() = %q, want %q", int(typ), got, want)
		}
	}
}

func TestZeroRegistry(t *testing.T) {
	var r Registry
	if got := scrape(t, &r); len(got) != numReasons || got[errorsKey("duplicate")] != 0 {
		t.Errorf("zero Registry rendered %v", got)
	}
	d := &Desc{Name: "z", Help: "h", Type: Gauge}
	var r2 Registry
	if err := r2.Register(&funcCollector{descs: []*Desc{d}, collect: func(w *Writer) { w.Sample(d, 2) }}); err != nil {
		t.Fatal(err)
	}
	if got := scrape(t, &r2); got["z"] != 2 || len(got) != 1+numReasons {
		t.Errorf("zero Registry after Register rendered %v", got)
	}
	var w Writer
	w.Sample(d, 1) // a Writer not from a Registry: counted, no panic
	if w.errs[reasonUnregistered] != 1 {
		t.Errorf("zero Writer: unregistered = %d, want 1", w.errs[reasonUnregistered])
	}
}

// TestHistogram: buckets are cumulative, +Inf equals _count, the text
// parses back, and misuse is counted rather than rendered.
func TestHistogram(t *testing.T) {
	h := &Desc{Name: "x_seconds", Help: "x.", Type: Histogram, Labels: []string{"src"}}
	c := &funcCollector{descs: []*Desc{h}, collect: func(w *Writer) {
		w.Histogram(h, []float64{0.5, 1}, []uint64{2, 3, 1}, 4.25, "a")
		w.Histogram(h, []float64{0.5, 1}, []uint64{2, 3}, 1, "b")    // wrong length
		w.Histogram(h, []float64{0.5, 1}, []uint64{0, 0, 0}, 0, "a") // same series again
		w.Sample(h, 1, "c")                                          // not a sample
	}}
	r := NewRegistry()
	if err := r.Register(c); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := r.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"# TYPE x_seconds histogram\n",
		`x_seconds_bucket{src="a",le="0.5"} 2` + "\n",
		`x_seconds_bucket{src="a",le="1"} 5` + "\n",
		`x_seconds_bucket{src="a",le="+Inf"} 6` + "\n",
		`x_seconds_sum{src="a"} 4.25` + "\n",
		`x_seconds_count{src="a"} 6` + "\n",
		`weir_metrics_errors_total{reason="label_count"} 2` + "\n",
		`weir_metrics_errors_total{reason="duplicate"} 1` + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, `src="b"`) || strings.Contains(out, `src="c"`) {
		t.Errorf("a bad series was rendered:\n%s", out)
	}
	if _, err := ParseText(strings.NewReader(out)); err != nil {
		t.Errorf("does not parse: %v", err)
	}
	for _, bad := range []*Desc{
		{Name: "y_total", Help: "y.", Type: Histogram},
		{Name: "y", Help: "y.", Type: Histogram, Labels: []string{"le"}},
	} {
		if bad.validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}
