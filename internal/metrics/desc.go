// Package metrics renders weir's own metrics in the Prometheus text
// exposition format (version 0.0.4) without third-party dependencies.
//
// Hot paths keep their counters as plain fields owned by one goroutine and
// publish snapshots; a [Collector] reads those snapshots at scrape time and
// writes samples through a [Writer]. A [Registry] holds the collectors,
// renders them (families sorted by name, one # HELP and # TYPE each) and
// serves them over HTTP. Counters, gauges and histograms exist (histograms
// whose buckets the collector counts itself); no summaries.
//
// Every mistake a collector can make at scrape time (wrong number of label
// values, a Desc it never described, the same series twice, label values that
// are not UTF-8, a panic) drops the offending sample and is counted in
// weir_metrics_errors_total{reason=...}; nothing panics.
package metrics

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Type is the type of a metric family.
type Type int

// Metric types.
const (
	// Counter is a cumulative value that only goes up (or resets to 0 when
	// the process restarts). Its name must end in _total.
	Counter Type = iota + 1
	// Gauge is a value that can go up and down.
	Gauge
	// Histogram is a distribution of observations into buckets, written
	// with Writer.Histogram as name_bucket{le=...}, name_sum and
	// name_count. Its name must not end in _total, and "le" is not a label.
	Histogram
)

// String returns the type's name as written on a # TYPE line.
func (t Type) String() string {
	switch t {
	case Counter:
		return "counter"
	case Gauge:
		return "gauge"
	case Histogram:
		return "histogram"
	}
	return fmt.Sprintf("type(%d)", int(t))
}

// Desc describes one metric family: its name, help text, type and label
// names. A Desc must not be changed once it has been registered; the same
// *Desc may be used by several registries.
type Desc struct {
	// Name is the family name: [a-zA-Z_:][a-zA-Z0-9_:]*; a counter's ends in
	// _total.
	Name string
	// Help is a one-line description (valid UTF-8, not empty).
	Help string
	// Type is Counter, Gauge or Histogram.
	Type Type
	// Labels are the label names, in the order Writer.Sample takes their
	// values: [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__", no repeats.
	Labels []string
}

// maxNameLen caps metric and label name lengths: names are code, not data,
// and a cap keeps a mistaken Desc from producing absurd output.
const maxNameLen = 200

// validate reports what is wrong with d, or nil.
func (d *Desc) validate() error {
	if d == nil {
		return errors.New("nil Desc")
	}
	if !validMetricName(d.Name) {
		return fmt.Errorf("metric name %q is not valid: want [a-zA-Z_:][a-zA-Z0-9_:]* of at most %d bytes", d.Name, maxNameLen)
	}
	switch d.Type {
	case Counter:
		if !strings.HasSuffix(d.Name, "_total") {
			return fmt.Errorf("counter %s: name must end in _total", d.Name)
		}
	case Gauge:
	case Histogram:
		if strings.HasSuffix(d.Name, "_total") {
			return fmt.Errorf("histogram %s: name must not end in _total", d.Name)
		}
		for _, l := range d.Labels {
			if l == "le" {
				return fmt.Errorf("histogram %s: le is not a label name it may use", d.Name)
			}
		}
	default:
		return fmt.Errorf("%s: unknown type %d (want Counter, Gauge or Histogram)", d.Name, int(d.Type))
	}
	if d.Help == "" {
		return fmt.Errorf("%s: empty help", d.Name)
	}
	if !utf8.ValidString(d.Help) {
		return fmt.Errorf("%s: help is not valid UTF-8", d.Name)
	}
	for i, l := range d.Labels {
		if !validLabelName(l) {
			return fmt.Errorf("%s: label name %q is not valid: want [a-zA-Z_][a-zA-Z0-9_]* of at most %d bytes, not starting with __", d.Name, l, maxNameLen)
		}
		for _, prev := range d.Labels[:i] {
			if prev == l {
				return fmt.Errorf("%s: label %q appears twice", d.Name, l)
			}
		}
	}
	return nil
}

// validMetricName reports whether s matches [a-zA-Z_:][a-zA-Z0-9_:]*.
func validMetricName(s string) bool {
	if s == "" || len(s) > maxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == ':' || isLetter(c) || (i > 0 && isDigit(c))) {
			return false
		}
	}
	return true
}

// validLabelName reports whether s matches [a-zA-Z_][a-zA-Z0-9_]* and does
// not start with the reserved "__".
func validLabelName(s string) bool {
	if s == "" || len(s) > maxNameLen || (len(s) >= 2 && s[0] == '_' && s[1] == '_') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || isLetter(c) || (i > 0 && isDigit(c))) {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return (c|0x20) >= 'a' && (c|0x20) <= 'z' } // c|0x20 folds ASCII upper to lower case
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
