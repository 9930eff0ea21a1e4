// Package report presents weir bench results: a run as aligned tables
// (WriteRun), runs side by side as the before/after table of performance
// write-ups (Compare, WriteCompare), and as one self-contained HTML page
// with charts (WriteHTML).
package report

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// table is a block of aligned columns: the first left-aligned, the rest
// right-aligned.
type table struct {
	title string
	rows  [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) error {
	if len(t.rows) < 2 { // a header alone is no table
		return nil
	}
	widths := map[int]int{}
	for _, r := range t.rows {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	if t.title != "" {
		b.WriteString(t.title + "\n")
	}
	for _, r := range t.rows {
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i > 0 {
				b.WriteString("  ")
			}
			if i == 0 {
				b.WriteString(c)
				if len(r) > 1 {
					b.WriteString(pad)
				}
			} else {
				b.WriteString(pad + c)
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// dur formats a latency with three significant digits.
func dur(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	v := float64(d)
	switch {
	case v < 1e3:
		return fmt.Sprintf("%dns", d)
	case v < 1e6:
		return sig(v/1e3) + "µs"
	case v < 1e9:
		return sig(v/1e6) + "ms"
	}
	return sig(v/1e9) + "s"
}

// sig prints three significant digits.
func sig(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// si formats v with an SI prefix and unit ("9.41 Gbit/s").
func si(v float64, unit string) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	if v == 0 {
		return strings.TrimSpace("0 " + unit)
	}
	for _, p := range []struct {
		s string
		m float64
	}{{"T", 1e12}, {"G", 1e9}, {"M", 1e6}, {"k", 1e3}} {
		if math.Abs(v) >= p.m {
			return strings.TrimSpace(sig(v/p.m) + " " + p.s + unit)
		}
	}
	return strings.TrimSpace(sig(v) + " " + unit)
}

// iec formats a byte count with binary prefixes.
func iec(n uint64) string {
	v := float64(n)
	for _, p := range []struct {
		s string
		m float64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v >= p.m {
			return sig(v/p.m) + " " + p.s
		}
	}
	return fmt.Sprintf("%d B", n)
}

func count(n uint64) string { return fmt.Sprintf("%d", n) }

func secondsDur(s float64) time.Duration { return time.Duration(s * 1e9) }
