package report

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"time"

	"github.com/weir-dev/weir/internal/bench/result"
)

// Chart geometry (SVG user units).
const (
	chartW, chartH = 720, 300
	padL, padR     = 80, 20
	padT, padB     = 30, 50
)

var palette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"}

// svgEsc escapes text for SVG.
func svgEsc(s string) string { return template.HTMLEscapeString(s) }

// svgOpen starts a chart with its title and axis labels.
func svgOpen(b *strings.Builder, id, title, xLabel, yLabel string) {
	fmt.Fprintf(b, `<svg id="%s" class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img">`, id, chartW, chartH, chartW, chartH)
	fmt.Fprintf(b, `<title>%s</title>`, svgEsc(title))
	fmt.Fprintf(b, `<text x="%d" y="18" class="ctitle">%s</text>`, padL, svgEsc(title))
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" class="axis"/>`, padL, chartH-padB, chartW-padR, chartH-padB)
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" class="axis"/>`, padL, padT, padL, chartH-padB)
	fmt.Fprintf(b, `<text x="%d" y="%d" class="xlabel" text-anchor="middle">%s</text>`, (padL+chartW-padR)/2, chartH-8, svgEsc(xLabel))
	fmt.Fprintf(b, `<text x="14" y="%d" class="ylabel" text-anchor="middle" transform="rotate(-90 14 %d)">%s</text>`, (padT+chartH-padB)/2, (padT+chartH-padB)/2, svgEsc(yLabel))
}

// yTicks draws four gridlines up to top, labelled with format.
func yTicks(b *strings.Builder, top float64, format func(float64) string) {
	for i := 1; i <= 4; i++ {
		v := top * float64(i) / 4
		y := float64(chartH-padB) - float64(chartH-padB-padT)*float64(i)/4
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="grid"/><text x="%d" y="%.1f" class="tick" text-anchor="end">%s</text>`,
			padL, y, chartW-padR, y, padL-4, y+4, svgEsc(format(v)))
	}
}

func legend(b *strings.Builder, labels []string) {
	for i, l := range labels {
		x := padL + 10 + i*110
		fmt.Fprintf(b, `<g class="legend"><rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text></g>`,
			x, padT-2, palette[i%len(palette)], x+14, padT+7, svgEsc(l))
	}
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
func throughputChart(c *Comparison) string {
	var b strings.Builder
	svgOpen(&b, "chart-throughput", "Throughput per run", "run", "payload bit/s")
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
		fmt.Fprintf(&b, `<rect class="bar" data-run="%s" data-value="%g" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %s</title></rect>`,
			c.Labels[i], v, x, float64(chartH-padB)-h, slot*0.6, h, palette[i%len(palette)], c.Labels[i], si(v, "bit/s"))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="tick" text-anchor="middle">%s</text>`, x+slot*0.3, chartH-padB+16, svgEsc(c.Labels[i]+" "+name(c.Runs[i])))
	}
	b.WriteString(`</svg>`)
	return b.String()
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
func latencyChart(c *Comparison) string {
	var b strings.Builder
	g, t, ok := mainTxn(c.Runs[0])
	title := "Latency of one iteration"
	if ok {
		title += fmt.Sprintf(" (g%d/t%d)", g, t)
	}
	svgOpen(&b, "chart-latency", title, "avg, p50, p99 per run", "latency")
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
	legend(&b, c.Labels)
	slot := float64(chartW-padL-padR) / float64(max(1, len(bars)))
	for k, x := range bars {
		h := float64(chartH-padB-padT) * float64(x.v) / top
		px := float64(padL) + slot*float64(k) + slot*0.15
		fmt.Fprintf(&b, `<rect class="bar" data-run="%s" data-stat="%s" data-value="%d" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s</title></rect>`,
			x.run, x.stat, int64(x.v), px, float64(chartH-padB)-h, slot*0.7, h, palette[x.i%len(palette)], x.run, x.stat, dur(x.v))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="tick" text-anchor="middle">%s</text>`, px+slot*0.35, chartH-padB+16, x.stat)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// timelineChart: throughput per interval, one line per run.
func timelineChart(c *Comparison) string {
	var b strings.Builder
	svgOpen(&b, "chart-timeline", "Throughput over time", "seconds into the run", "payload bit/s")
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
	legend(&b, c.Labels)
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
			fmt.Fprintf(&dots, `<circle class="point" data-run="%s" data-value="%g" cx="%.1f" cy="%.1f" r="2" fill="%s"/>`, c.Labels[i], v, x, y, palette[i%len(palette)])
		}
		fmt.Fprintf(&b, `<polyline class="line" data-run="%s" points="%s" fill="none" stroke="%s" stroke-width="1.5"/>%s`, c.Labels[i], strings.Join(pts, " "), palette[i%len(palette)], dots.String())
	}
	b.WriteString(`</svg>`)
	return b.String()
}

var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>weir bench compare</title>
<style>
body{font:14px system-ui,sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;margin:12px 0}td,th{padding:3px 10px;border-bottom:1px solid #ddd;text-align:right}
td:first-child,th:first-child{text-align:left}.better{color:#2a7d2a}.worse{color:#b22}.noise{color:#888}
.chart{display:block;margin:16px 0;background:#fafafa}.axis{stroke:#333}.grid{stroke:#ddd}
.tick,.legend text{font-size:11px}.ctitle{font-weight:bold}.warn{color:#b60}
</style></head><body>
<h1>weir bench compare</h1>
<ul>{{range $i, $r := .Runs}}<li><b>{{index $.Labels $i}}</b>: {{$r.Name}} ({{$r.File}}), weir {{$r.Version}}, {{$r.Started}}; noise {{$r.Noise}}</li>{{end}}</ul>
{{range .Warnings}}<p class="warn">warning: {{.}}</p>{{end}}
{{.Throughput}}
{{.Latency}}
{{.Timeline}}
<table id="comparison"><thead><tr><th>metric</th>{{range .Labels}}<th>{{.}}</th>{{end}}{{range .Deltas}}<th>Δ{{.}}</th>{{end}}<th>note</th></tr></thead><tbody>
{{range .Rows}}<tr class="metric"><td>{{.Name}}</td>{{range .Values}}<td>{{.}}</td>{{end}}{{range .Changes}}<td>{{.}}</td>{{end}}<td class="{{.Class}}">{{.Note}}</td></tr>
{{end}}</tbody></table>
{{if .Noisy}}<p class="noise">* the change is smaller than twice the runs' own spread (coefficient of variation of the traffic per interval, first and last left out).</p>{{end}}
</body></html>
`))

// WriteHTML writes the comparison as one self-contained HTML page: the
// throughput, latency and over-time charts as inline SVG, and the table.
func WriteHTML(w io.Writer, c *Comparison) error {
	if len(c.Runs) == 0 {
		return fmt.Errorf("report: no runs")
	}
	type runInfo struct{ Name, File, Version, Started, Noise string }
	type row struct {
		Name            string
		Values, Changes []string
		Note, Class     string
	}
	d := struct {
		Runs                          []runInfo
		Labels, Deltas, Warnings      []string
		Throughput, Latency, Timeline template.HTML
		Rows                          []row
		Noisy                         bool
	}{Labels: c.Labels, Deltas: c.Labels[1:], Warnings: c.Warnings,
		Throughput: template.HTML(throughputChart(c)), Latency: template.HTML(latencyChart(c)), Timeline: template.HTML(timelineChart(c))}
	for i, r := range c.Runs {
		n := "unknown"
		if !math.IsNaN(c.CV[i]) {
			n = fmt.Sprintf("±%.1f%% per interval", 100*c.CV[i])
		}
		d.Runs = append(d.Runs, runInfo{name(r), r.ProfileFile, r.WeirVersion, r.Started.Format(time.RFC3339), n})
	}
	for _, r := range c.Rows {
		x := row{Name: r.Metric.Name, Note: r.Note, Class: strings.ReplaceAll(r.Note, " ", "-")}
		if r.Noise {
			x.Class, x.Note, d.Noisy = "noise", r.Note+" *", true
		}
		for _, v := range r.Values {
			x.Values = append(x.Values, value(v, r.Metric.Unit))
		}
		for _, ch := range r.Change {
			x.Changes = append(x.Changes, pct(ch))
		}
		d.Rows = append(d.Rows, x)
	}
	return page.Execute(w, d)
}
