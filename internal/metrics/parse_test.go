package metrics

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseTextRoundTrip(t *testing.T) {
	got, err := ParseText(strings.NewReader(wantTestText))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		`test_requests_total{code="200",path="/a"}`:         3,
		`test_requests_total{code="500",path="/x\"y\\z\n"}`: 1e6,
		`test_temperature`:                                    21.5,
		`test_values{kind="nan"}`:                             math.NaN(),
		`test_values{kind="+inf"}`:                            math.Inf(1),
		`test_values{kind="-inf"}`:                            math.Inf(-1),
		`test_values{kind="2^53"}`:                            1 << 53,
		`test_values{kind="2^53+2"}`:                          1<<53 + 2,
		`test_values{kind="quarter"}`:                         0.25,
		`test_values{kind="-0"}`:                              0,
		`test_values{kind="tiny"}`:                            1e-7,
		`test_values{kind="neg"}`:                             -3,
		`test_values{kind="huge"}`:                            1.5e300,
		`weir_metrics_errors_total{reason="label_count"}`:     0,
		`weir_metrics_errors_total{reason="unregistered"}`:    0,
		`weir_metrics_errors_total{reason="duplicate"}`:       0,
		`weir_metrics_errors_total{reason="invalid_utf8"}`:    0,
		`weir_metrics_errors_total{reason="collector_panic"}`: 0,
		`weir_metrics_errors_total{reason="collector_read"}`:  0,
	}
	if len(got) != len(want) {
		t.Errorf("%d series, want %d: %v", len(got), len(want), got)
	}
	for k, v := range want {
		g, ok := got[k]
		if !ok || !sameFloat(g, v) {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
}

// sameFloat is == that also matches NaN with NaN.
func sameFloat(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

func TestParseTextAccepts(t *testing.T) {
	in := "# a plain comment\n" +
		"\n" +
		"#   TYPE spaced gauge\n" +
		"spaced\t 1  \n" +
		"# HELP h_total\n" + // HELP without text
		"h_total 2 1700000000000\n" + // timestamp ignored
		`l{b="2",a="1",} 3` + "\n" + // labels sorted, trailing comma allowed
		"e{} 4\n" +
		"# TYPE hist histogram\n" +
		`hist_bucket{le="+Inf"} 5` + "\n" +
		"hist_sum 6\n" +
		"hist_count 5\n" +
		"x 1e3\n" +
		"y -Inf\n"
	got, err := ParseText(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"spaced": 1, "h_total": 2, `l{a="1",b="2"}`: 3, "e": 4,
		`hist_bucket{le="+Inf"}`: 5, "hist_sum": 6, "hist_count": 5, "x": 1000, "y": math.Inf(-1)}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

func TestParseTextRejects(t *testing.T) {
	for _, tc := range []struct{ in, line string }{
		{"a 1\nb\n", "line 2:"},                          // no value
		{"a 1", "line 1: no final newline"},              // truncated
		{"a 1\n1a 2\n", "line 2:"},                       // bad name
		{"a{b=\"c\" 1\n", "line 1:"},                     // unterminated labels
		{"a{b=\"c} 1\n", "line 1:"},                      // unterminated value
		{"a{b=c} 1\n", "line 1:"},                        // unquoted value
		{"a{9b=\"c\"} 1\n", "line 1:"},                   // bad label name
		{"a{b=\"c\"d=\"e\"} 1\n", "line 1:"},             // missing comma
		{"a{b=\"c\",b=\"d\"} 1\n", "line 1: a: label b"}, // label twice
		{"a{b=\"\\t\"} 1\n", "line 1:"},                  // unknown escape
		{"a{b=\"\\\"} 1\n", "line 1:"},                   // escape eats the quote
		{"a one\n", "line 1:"},                           // bad value
		{"a 1 2 3\n", "line 1:"},                         // junk after timestamp
		{"a 1 1.5\n", "line 1:"},                         // bad timestamp
		{"a{b=\"c\"}1\n", "line 1:"},                     // no blank before value
		{" a 1\n", "line 1:"},                            // leading blank
		{"a 1\na 2\n", "line 2: duplicate series a"},     // same series
		{"a 1\nb 1\na{x=\"y\"} 2\n", "line 3: family a"}, // not grouped
		{"# TYPE a gauge\n# TYPE a gauge\n", "line 2:"},  // second TYPE
		{"# HELP a x\n# HELP a y\n", "line 2:"},          // second HELP
		{"a 1\n# HELP a x\n", "line 2:"},                 // HELP after samples
		{"# TYPE a fancy\n", "line 1:"},                  // unknown type
		{"# TYPE a gauge extra\n", "line 1:"},            // junk after type
		{"# TYPE 1a gauge\n", "line 1:"},                 // bad name
		{"# HELP\n", "line 1:"},                          // no name
		{"# HELP a bad \\q escape\n", "line 1:"},         // bad help escape
		{"a{b=\"\xff\"} 1\n", "line 1: not valid UTF-8"}, // invalid UTF-8
		{"ok 1\n" + strings.Repeat("x", MaxParseLine) + " 1\n", "line 2: longer than"},
		{"a 1\r\n", "line 1:"}, // CR is not a blank
	} {
		_, err := ParseText(strings.NewReader(tc.in))
		if err == nil || !strings.HasPrefix(err.Error(), tc.line) {
			t.Errorf("ParseText(%q) = %v, want an error starting %q", trim([]byte(tc.in)), err, tc.line)
		}
	}
}

func TestParseTextLongLines(t *testing.T) {
	long := strings.Repeat("v", 10000) // longer than the reader's 4 KiB buffer
	m, err := ParseText(strings.NewReader("a 1\nb{l=\"" + long + "\"} 2\nc 3\n"))
	if err != nil || len(m) != 3 || m[`b{l="`+long+`"}`] != 2 || m["c"] != 3 {
		t.Errorf("long line: %v, %d series", err, len(m))
	}
	comment := "#" + strings.Repeat("c", MaxParseLine-2) + "\n" // exactly MaxParseLine bytes
	if _, err := ParseText(strings.NewReader(comment + "a 1\n")); err != nil {
		t.Errorf("a line of MaxParseLine bytes: %v", err)
	}
	_, err = ParseText(strings.NewReader("a 1\n#" + strings.Repeat("c", MaxParseLine-1) + "\n"))
	if want := "line 2: longer than 65536 bytes"; err == nil || err.Error() != want {
		t.Errorf("a line of MaxParseLine+1 bytes: %v, want %q", err, want)
	}
	_, err = ParseText(strings.NewReader("a 1\n" + long))
	if want := "line 2: no final newline (truncated input?)"; err == nil || err.Error() != want {
		t.Errorf("a long unterminated line: %v, want %q", err, want)
	}
}

func TestParseTextLimits(t *testing.T) {
	var b bytes.Buffer
	for i := range MaxParseSamples + 1 {
		b.WriteString("s{i=\"")
		b.WriteString(strconv.Itoa(i))
		b.WriteString("\"} 1\n")
	}
	_, err := ParseText(&b)
	if want := "line 100001: more than 100000 samples"; err == nil || err.Error() != want {
		t.Errorf("too many samples: %v, want %q", err, want)
	}
	big := bytes.Repeat([]byte("# just a comment line that is 64 bytes long......................\n"), MaxParseBytes/64+1)
	_, err = ParseText(bytes.NewReader(big))
	if err == nil || !strings.Contains(err.Error(), "input longer than") {
		t.Errorf("too much input: %v", err)
	}
}

// FuzzParseText: ParseText never panics; what it accepts is within its
// limits, and printing its map back as text (keys are canonical series)
// parses to the same map.
func FuzzParseText(f *testing.F) {
	f.Add([]byte(wantTestText))
	f.Add([]byte("# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_count 2\nh_sum 1.5\n"))
	f.Add([]byte("a{b=\"c\\\\d\\\"e\\nf\",} 1 123\n"))
	f.Add([]byte("a 1\na 2\n"))
	f.Add([]byte("# HELP a x\\ny\n# TYPE a counter\na 1e400\n"))
	f.Add([]byte("a{b=\"c\"d} 1\n"))
	f.Add([]byte("x NaN\ny +Inf\nz -inf\nw 0x1p-2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseText(bytes.NewReader(data))
		if err != nil {
			return
		}
		if len(m) > MaxParseSamples {
			t.Fatalf("%d samples accepted", len(m))
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		nameOf := func(k string) string { n, _, _ := strings.Cut(k, "{"); return n }
		slices.SortFunc(keys, func(a, b string) int { // grouped by name
			if c := strings.Compare(nameOf(a), nameOf(b)); c != 0 {
				return c
			}
			return strings.Compare(a, b)
		})
		var b bytes.Buffer
		for _, k := range keys {
			b.WriteString(k)
			b.WriteByte(' ')
			b.Write(appendValue(nil, m[k]))
			b.WriteByte('\n')
		}
		m2, err := ParseText(bytes.NewReader(b.Bytes()))
		if err != nil {
			t.Fatalf("reparse: %v\n%s", err, b.String())
		}
		if len(m2) != len(m) {
			t.Fatalf("reparse: %d series, want %d", len(m2), len(m))
		}
		for k, v := range m {
			if v2, ok := m2[k]; !ok || !sameFloat(v, v2) {
				t.Fatalf("reparse: %s = %v, want %v", k, v2, v)
			}
		}
	})
}

// escapeLabel is the format's label value escaping, written independently
// of the package's.
var escapeLabel = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace

// FuzzRender: any label value and float value renders to text that ParseText
// reads back to the same series and value (or, for a label value that is
// not UTF-8, is dropped and counted).
func FuzzRender(f *testing.F) {
	f.Add("plain", 1.0)
	f.Add("quo\"te\\back\nline", math.NaN())
	f.Add("", math.Inf(-1))
	f.Add("\xff", 0.1)
	f.Add("ünï\u2028code", 1e21)
	f.Add("}{,=", -9007199254740993.0)
	d := &Desc{Name: "fz", Help: "Fuzz.", Type: Gauge, Labels: []string{"v"}}
	f.Fuzz(func(t *testing.T, label string, v float64) {
		r := NewRegistry()
		if err := r.Register(&funcCollector{descs: []*Desc{d}, collect: func(w *Writer) { w.Sample(d, v, label) }}); err != nil {
			t.Fatal(err)
		}
		m := scrape(t, r)
		key := `fz{v="` + escapeLabel(label) + `"}`
		if !utf8.ValidString(label) {
			if m[errorsKey("invalid_utf8")] != 1 || len(m) != 6 {
				t.Fatalf("invalid UTF-8 label: %v", m)
			}
			return
		}
		got, ok := m[key]
		if !ok || !sameFloat(got, v) {
			t.Fatalf("%s = %v (present %v), want %v; all: %v", key, got, ok, v, m)
		}
	})
}
