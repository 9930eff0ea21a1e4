package metrics

import (
	"hash/maphash"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Scrape error reasons, the values of weir_metrics_errors_total's reason
// label. Every reason is always rendered, 0 included.
const (
	reasonLabelCount     = iota // Sample got a different number of label values than the Desc has labels
	reasonUnregistered          // Sample got a Desc no registered collector described
	reasonDuplicate             // the same series (Desc and label values) was sampled twice in one scrape
	reasonInvalidUTF8           // a label value was not valid UTF-8
	reasonCollectorPanic        // a collector's Collect panicked (samples it wrote before are kept)
	reasonCollectorRead         // a built-in collector could not read its source (e.g. /proc)
	numReasons
)

var reasonNames = [numReasons]string{"label_count", "unregistered", "duplicate", "invalid_utf8", "collector_panic", "collector_read"}

// errorsDesc is the registry's own error counter, present in every registry.
var errorsDesc = &Desc{
	Name:   "weir_metrics_errors_total",
	Help:   "Samples dropped or collectors failed while rendering metrics, by reason.",
	Type:   Counter,
	Labels: []string{"reason"},
}

// family is a registered Desc as the Writer renders it. The Desc's fields are
// copied at registration so a later change to the Desc cannot desynchronise
// the header from the samples.
type family struct {
	desc   *Desc
	name   string
	labels []string
	header []byte // "# HELP ...\n# TYPE ...\n", built once at registration
	buf    []byte // this scrape's sample lines; reused across scrapes
}

// Writer receives the samples of one scrape from the collectors. It is only
// valid during Collect, and only on the goroutine Collect was called on. It
// groups samples by family, so a collector may write families in any order.
// Its buffers are kept between scrapes: after the first scrape, rendering
// the same set of series allocates nothing.
type Writer struct {
	fams  []family
	index map[*Desc]int // Desc → fams index; pointer keys: lookups do not allocate
	errs  [numReasons]uint64
	seen  map[uint64]struct{} // hashes of the series sampled this scrape; clear() keeps its buckets
	h     maphash.Hash
}

// Sample writes one sample of the family d with the given label values, in
// the order of d.Labels. A sample that cannot be rendered (label count
// mismatch, a Desc that no registered collector described, a series already
// sampled in this scrape, a label value that is not UTF-8) is dropped and
// counted in weir_metrics_errors_total with the matching reason.
func (w *Writer) Sample(d *Desc, v float64, labelValues ...string) {
	if w == nil {
		return
	}
	i, ok := w.index[d]
	if !ok {
		w.errs[reasonUnregistered]++
		return
	}
	f := &w.fams[i]
	if len(labelValues) != len(f.labels) || d.Type == Histogram {
		w.errs[reasonLabelCount]++
		return
	}
	if !w.once(f, labelValues) {
		return
	}
	f.buf = appendSample(f.buf, f.name, f.labels, labelValues, v)
}

// Histogram writes one series of the histogram family d: counts[i] is
// the number of observations in bucket i (not cumulative), where bucket i
// holds values ≤ bounds[i] and above bounds[i-1]; counts has one more
// element than bounds, the +Inf bucket. sum is the sum of all
// observations. Errors are counted as for Sample; so is a counts slice of
// the wrong length (label_count) or a Desc that is not a Histogram.
func (w *Writer) Histogram(d *Desc, bounds []float64, counts []uint64, sum float64, labelValues ...string) {
	if w == nil {
		return
	}
	i, ok := w.index[d]
	if !ok || d.Type != Histogram {
		w.errs[reasonUnregistered]++
		return
	}
	f := &w.fams[i]
	if len(labelValues) != len(f.labels) || len(counts) != len(bounds)+1 {
		w.errs[reasonLabelCount]++
		return
	}
	if !w.once(f, labelValues) {
		return
	}
	labels := append(f.labels[:len(f.labels):len(f.labels)], "le")
	values := append(labelValues[:len(labelValues):len(labelValues)], "")
	var cum uint64
	var le []byte
	for j, c := range counts {
		cum += c
		le = le[:0]
		if j < len(bounds) {
			le = appendValue(le, bounds[j])
		} else {
			le = append(le, "+Inf"...)
		}
		values[len(values)-1] = string(le)
		f.buf = appendSample(f.buf, f.name+"_bucket", labels, values, float64(cum))
	}
	f.buf = appendSample(f.buf, f.name+"_sum", f.labels, labelValues, sum)
	f.buf = appendSample(f.buf, f.name+"_count", f.labels, labelValues, float64(cum))
}

// once checks a series' label values and that it was not written before
// in this scrape, counting the error if either fails.
func (w *Writer) once(f *family, labelValues []string) bool {
	w.h.Reset()
	w.h.WriteString(f.name)
	for _, lv := range labelValues {
		if !utf8.ValidString(lv) {
			w.errs[reasonInvalidUTF8]++
			return false
		}
		w.h.WriteByte(0xff) // never occurs in UTF-8: separates values unambiguously
		w.h.WriteString(lv)
	}
	sum := w.h.Sum64()
	if _, dup := w.seen[sum]; dup {
		w.errs[reasonDuplicate]++
		return false
	}
	w.seen[sum] = struct{}{}
	return true
}

// fail counts an error of the given reason (for the built-in collectors).
func (w *Writer) fail(reason int) {
	if w != nil {
		w.errs[reason]++
	}
}

// reset prepares the Writer for a new scrape, keeping its buffers.
func (w *Writer) reset() {
	for i := range w.fams {
		w.fams[i].buf = w.fams[i].buf[:0]
	}
	clear(w.seen)
}

// appendSample appends `name{l1="v1",...} value\n`.
func appendSample(b []byte, name string, labels, values []string, v float64) []byte {
	b = append(b, name...)
	if len(labels) > 0 {
		b = append(b, '{')
		for i, l := range labels {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, l...)
			b = append(b, '=', '"')
			b = appendEscaped(b, values[i], true)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = appendValue(b, v)
	return append(b, '\n')
}

// appendHeader appends the # HELP and # TYPE lines of d.
func appendHeader(b []byte, d *Desc) []byte {
	b = append(b, "# HELP "...)
	b = append(b, d.Name...)
	b = append(b, ' ')
	b = appendEscaped(b, d.Help, false)
	b = append(b, "\n# TYPE "...)
	b = append(b, d.Name...)
	b = append(b, ' ')
	b = append(b, d.Type.String()...)
	return append(b, '\n')
}

// appendEscaped appends s with backslash and line feed escaped as \\ and \n,
// and, in label values (quote), double quotes as \".
func appendEscaped(b []byte, s string, quote bool) []byte {
	if !strings.ContainsAny(s, "\\\n\"") { // common case: copy in one go
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, '\\', '\\')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '"' && quote:
			b = append(b, '\\', '"')
		default:
			b = append(b, c)
		}
	}
	return b
}

// maxExactInt is 2^53: every integer up to it is exactly representable.
const maxExactInt = 1 << 53

// appendValue formats v as Prometheus does: +Inf, -Inf, NaN; integers of
// magnitude up to 2^53 in plain decimal (no exponent); anything else in the
// shortest form that parses back to the same float64.
func appendValue(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case v == math.Trunc(v) && v >= -maxExactInt && v <= maxExactInt:
		return strconv.AppendInt(b, int64(v), 10) // -0 renders as 0
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}
