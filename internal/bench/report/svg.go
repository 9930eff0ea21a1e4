package report

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/weir-dev/weir/internal/bench/result"
)

// Chart geometry (SVG user units; the SVG scales to its panel's width).
const (
	chartW, chartH = 720, 280
	padL, padR     = 80, 16
	padT, padB     = 12, 40
)

// seriesColours is how many --series-N colours the console's stylesheet
// defines (web/src/style.css); run i is drawn in --series-(i mod 20), as
// the console draws its i-th group.
const seriesColours = 20

// colour is the CSS of run i's series colour, from the embedded console stylesheet.
func colour(i int) string { return fmt.Sprintf("var(--series-%d)", i%seriesColours) }

// svgEsc escapes text for SVG.
func svgEsc(s string) string { return template.HTMLEscapeString(s) }

// svgOpen starts a chart as the console draws one (uPlot, themed by the
// stylesheet): muted axis labels, grid-coloured split lines and x axis, no
// y axis line, no axis names (the panel's title says what is shown).
func svgOpen(b *strings.Builder, id, title string) {
	fmt.Fprintf(b, `<svg id="%s" class="rchart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" role="img">`, id, chartW, chartH)
	fmt.Fprintf(b, `<title>%s</title>`, svgEsc(title))
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" class="axis"/>`, padL, chartH-padB, chartW-padR, chartH-padB)
}

// yTicks draws four gridlines up to top and labels them and 0 with format.
func yTicks(b *strings.Builder, top float64, format func(float64) string) {
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		y := float64(chartH-padB) - float64(chartH-padB-padT)*float64(i)/4
		if i > 0 { // the x axis is the line at 0
			fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="grid"/>`, padL, y, chartW-padR, y)
		}
		label := "0"
		if i > 0 {
			label = format(v)
		}
		fmt.Fprintf(b, `<text x="%d" y="%.1f" class="tick" text-anchor="end">%s</text>`, padL-8, y+4, svgEsc(label))
	}
}

// chart is one panel of the report: its title, legend (if any) and SVG.
type chart struct {
	Title  string
	Legend template.HTML
	SVG    template.HTML
}

// legend is the runs' colours, as HTML above a chart (the console's swatches).
func legend(labels []string) template.HTML {
	var b strings.Builder
	b.WriteString(`<div class="legend">`)
	for i, l := range labels {
		fmt.Fprintf(&b, `<span><span class="swatch" style="background:%s"></span> %s</span>`, colour(i), svgEsc(l))
	}
	b.WriteString(`</div>`)
	return template.HTML(b.String())
}

func nice(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*e >= v {
			return m * e
		}
	}
	return 10 * e
}

// throughputChart: one bar per run.
func throughputChart(c *Comparison) chart {
	var b strings.Builder
	const title = "Throughput per run · payload bit/s"
	svgOpen(&b, "chart-throughput", title)
	vals := make([]float64, len(c.Runs))
	top := 0.0
	for i, r := range c.Runs {
		vals[i] = math.NaN()
		for _, m := range Metrics(r) {
			if m.Name == "throughput" {
				vals[i] = m.Value
			}
		}
		if !math.IsNaN(vals[i]) {
			top = math.Max(top, vals[i])
		}
	}
	top = nice(top)
	yTicks(&b, top, func(v float64) string { return si(v, "bit/s") })
	slot := float64(chartW-padL-padR) / float64(max(1, len(vals)))
	for i, v := range vals {
		if math.IsNaN(v) {
			v = 0
		}
		h := float64(chartH-padB-padT) * v / top
		x := float64(padL) + slot*float64(i) + slot*0.2
		fmt.Fprintf(&b, `<rect class="bar" data-run="%s" data-value="%g" x="%.1f" y="%.1f" width="%.1f" height="%.1f" style="fill:%s"><title>%s: %s</title></rect>`,
			c.Labels[i], v, x, float64(chartH-padB)-h, slot*0.6, h, colour(i), c.Labels[i], si(v, "bit/s"))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="tick" text-anchor="middle">%s</text>`, x+slot*0.3, chartH-padB+16, svgEsc(c.Labels[i]+" "+name(c.Runs[i])))
	}
	b.WriteString(`</svg>`)
	return chart{Title: title, SVG: template.HTML(b.String())}
}

// mainTxn picks the baseline's transaction with the most iterations.
func mainTxn(r *result.Run) (g, t int, ok bool) {
	var most uint64
	for _, x := range r.Txns {
		if x.Latency.Count > most {
			most, g, t, ok = x.Latency.Count, x.Group, x.Txn, true
		}
	}
	return
}

// latencyChart: avg, p50, p99 of the main transaction, grouped per run.
func latencyChart(c *Comparison) chart {
	var b strings.Builder
	g, t, ok := mainTxn(c.Runs[0])
	title := "Latency of one iteration"
	if ok {
		title += fmt.Sprintf(" (g%d/t%d)", g, t)
	}
	title += " · avg, p50 and p99 per run"
	svgOpen(&b, "chart-latency", title)
	type bar struct {
		run, stat string
		v         time.Duration
		i         int
	}
	var bars []bar
	var top float64
	for i, r := range c.Runs {
		for _, x := range r.Txns {
			if ok && x.Group == g && x.Txn == t {
				for _, s := range []struct {
					n string
					v time.Duration
				}{{"avg", x.Latency.Avg}, {"p50", x.Latency.P50}, {"p99", x.Latency.P99}} {
					bars = append(bars, bar{c.Labels[i], s.n, s.v, i})
					top = math.Max(top, float64(s.v))
				}
			}
		}
	}
	top = nice(top)
	yTicks(&b, top, func(v float64) string { return dur(time.Duration(v)) })
	slot := float64(chartW-padL-padR) / float64(max(1, len(bars)))
	for k, x := range bars {
		h := float64(chartH-padB-padT) * float64(x.v) / top
		px := float64(padL) + slot*float64(k) + slot*0.15
		fmt.Fprintf(&b, `<rect class="bar" data-run="%s" data-stat="%s" data-value="%d" x="%.1f" y="%.1f" width="%.1f" height="%.1f" style="fill:%s"><title>%s %s: %s</title></rect>`,
			x.run, x.stat, int64(x.v), px, float64(chartH-padB)-h, slot*0.7, h, colour(x.i), x.run, x.stat, dur(x.v))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="tick" text-anchor="middle">%s</text>`, px+slot*0.35, chartH-padB+16, x.stat)
	}
	b.WriteString(`</svg>`)
	return chart{Title: title, Legend: legend(c.Labels), SVG: template.HTML(b.String())}
}

// timelineChart: throughput per interval, one line per run.
func timelineChart(c *Comparison) chart {
	var b strings.Builder
	const title = "Throughput over time · payload bit/s per interval, by seconds into the run"
	svgOpen(&b, "chart-timeline", title)
	var top, end float64
	for _, r := range c.Runs {
		for _, iv := range r.Intervals {
			if iv.Len > 0 {
				top = math.Max(top, float64(iv.Bytes)*8/iv.Len.Seconds())
			}
			end = math.Max(end, (iv.Start + iv.Len).Seconds())
		}
	}
	top, end = nice(top), math.Max(end, 1e-3)
	yTicks(&b, top, func(v float64) string { return si(v, "bit/s") })
	for i := 0; i <= 4; i++ { // x axis: seconds into the run
		sec := end * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="tick" text-anchor="middle">%s s</text>`,
			float64(padL)+float64(chartW-padL-padR)*float64(i)/4, chartH-padB+16, strconv.FormatFloat(sec, 'g', 3, 64))
	}
	for i, r := range c.Runs {
		var pts []string
		var dots strings.Builder
		for _, iv := range r.Intervals {
			if iv.Len <= 0 {
				continue
			}
			v := float64(iv.Bytes) * 8 / iv.Len.Seconds()
			x := float64(padL) + float64(chartW-padL-padR)*(iv.Start+iv.Len/2).Seconds()/end
			y := float64(chartH-padB) - float64(chartH-padB-padT)*v/top
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
			fmt.Fprintf(&dots, `<circle class="point" data-run="%s" data-value="%g" cx="%.1f" cy="%.1f" r="3" style="fill:%s"><title>%s: %s</title></circle>`, c.Labels[i], v, x, y, colour(i), c.Labels[i], si(v, "bit/s"))
		}
		fmt.Fprintf(&b, `<polyline class="line" data-run="%s" points="%s" style="stroke:%s"/>%s`, c.Labels[i], strings.Join(pts, " "), colour(i), dots.String())
	}
	b.WriteString(`</svg>`)
	return chart{Title: title, Legend: legend(c.Labels), SVG: template.HTML(b.String())}
}
