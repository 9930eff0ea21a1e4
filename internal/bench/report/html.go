package report

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/weir-dev/weir/web"
)

// reportCSS is what the report adds to the console's stylesheet: its own
// layout and chart parts, in the console's variables only (no colour of
// its own), so both themes apply.
const reportCSS = `
.report { max-width: 1100px; margin: 0 auto; padding: 16px; display: flex; flex-direction: column; gap: 16px; }
.report-name { color: var(--muted); font-weight: 600; }
.runs { margin: 0; padding-left: 18px; line-height: 1.7; }
.runs b { font-family: ui-monospace, Menlo, Consolas, monospace; }
.legend { display: flex; flex-wrap: wrap; gap: 14px; font-size: 12px; color: var(--muted); margin-bottom: 4px; }
.rchart { display: block; width: 100%; height: auto; max-height: 340px; }
.rchart text { fill: var(--muted); font-size: 12px; }
.rchart .grid { stroke: var(--grid); }
.rchart .axis { stroke: var(--border); }
.rchart .line { fill: none; stroke-width: 1.6; }
.rchart .point { opacity: 0; }
.rchart .point:hover { opacity: 1; }
.rchart .bar:hover { opacity: .85; }
.top-table td:not(:first-child), .top-table th:not(:first-child) { text-align: right; }
.better { color: var(--good); } .worse { color: var(--error); } .noise, .noise-unknown, .within-noise { color: var(--muted); }
`

// themeJS picks the theme as the console does (the saved choice under the
// same key, else the system's) and makes the button switch it.
const themeJS = `(() => {
  const root = document.documentElement, key = "weir-theme";
  let choice = null;
  try { choice = localStorage.getItem(key); } catch (e) { /* storage off (file:// in some browsers): in memory */ }
  const apply = () => {
    const dark = choice ? choice === "dark" : matchMedia("(prefers-color-scheme: dark)").matches;
    root.dataset.theme = dark ? "dark" : "light";
    const btn = document.getElementById("theme");
    if (btn) {
      btn.setAttribute("aria-pressed", String(dark));
      btn.title = dark ? "Switch to the light theme" : "Switch to the dark theme";
    }
  };
  apply();
  matchMedia("(prefers-color-scheme: dark)").addEventListener("change", apply);
  addEventListener("DOMContentLoaded", () => {
    apply();
    document.getElementById("theme").addEventListener("click", () => {
      choice = root.dataset.theme === "dark" ? "light" : "dark";
      try { localStorage.setItem(key, choice); } catch (e) { /* in memory only */ }
      apply();
    });
  });
})();`

var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>weir bench compare</title>
<style id="console-css">{{.ConsoleCSS}}</style>
<style id="report-css">{{.ReportCSS}}</style>
<script>{{.ThemeJS}}</script>
</head><body data-state="ready">
<header class="top">
  <div class="brand" aria-label="weir"><span class="logo" aria-hidden="true"></span>weir</div>
  <span class="report-name">bench compare</span>
  <span class="spacer"></span>
  <span id="span-info" class="muted">{{len .Runs}} runs</span>
  <button id="theme" class="icon" aria-label="Dark theme" aria-pressed="false"><span aria-hidden="true">◐</span></button>
</header>
<main class="report">
<div class="panel"><h2>Runs</h2><ul class="runs">{{range $i, $r := .Runs}}<li><b>{{index $.Labels $i}}</b> <span class="swatch" style="background:{{$r.Colour}}"></span> {{$r.Name}} ({{$r.File}}), weir {{$r.Version}}, {{$r.Started}}; noise {{$r.Noise}}</li>{{end}}</ul></div>
{{range .Warnings}}<div class="notice warn" role="status">warning: {{.}}</div>{{end}}
{{range .Charts}}<div class="panel"><h2>{{.Title}}</h2>{{.Legend}}{{.SVG}}</div>
{{end}}
<div class="panel table-panel"><h2>Metrics</h2>
<table id="comparison" class="top-table"><thead><tr><th>metric</th>{{range .Labels}}<th>{{.}}</th>{{end}}{{range .Deltas}}<th>Δ{{.}}</th>{{end}}<th>note</th></tr></thead><tbody>
{{range .Rows}}<tr class="metric"><td>{{.Name}}</td>{{range .Values}}<td>{{.}}</td>{{end}}{{range .Changes}}<td>{{.}}</td>{{end}}<td class="{{.Class}}">{{.Note}}</td></tr>
{{end}}</tbody></table>
{{if .Noisy}}<p class="muted stats">* the change is smaller than twice the runs' own spread (coefficient of variation of the traffic per interval, first and last left out).</p>{{end}}
</div>
</main>
</body></html>
`))

// WriteHTML writes the comparison as one self-contained HTML page in the
// console's look: the console's stylesheet (web.Stylesheet) embedded
// verbatim, its light and dark themes, the throughput, latency and
// over-time charts as inline SVG in the console's series colours, and the
// table.
func WriteHTML(w io.Writer, c *Comparison) error {
	if len(c.Runs) == 0 {
		return fmt.Errorf("report: no runs")
	}
	type runInfo struct {
		Name, File, Version, Started, Noise string
		Colour                              template.CSS
	}
	type row struct {
		Name            string
		Values, Changes []string
		Note, Class     string
	}
	d := struct {
		ConsoleCSS, ReportCSS    template.CSS
		ThemeJS                  template.JS
		Runs                     []runInfo
		Labels, Deltas, Warnings []string
		Charts                   []chart
		Rows                     []row
		Noisy                    bool
	}{ConsoleCSS: template.CSS(web.Stylesheet()), ReportCSS: reportCSS, ThemeJS: themeJS,
		Labels: c.Labels, Deltas: c.Labels[1:], Warnings: c.Warnings,
		Charts: []chart{throughputChart(c), latencyChart(c), timelineChart(c)}}
	for i, r := range c.Runs {
		n := "unknown"
		if !math.IsNaN(c.CV[i]) {
			n = fmt.Sprintf("±%.1f%% per interval", 100*c.CV[i])
		}
		d.Runs = append(d.Runs, runInfo{name(r), r.ProfileFile, r.WeirVersion, r.Started.Format(time.RFC3339), n, template.CSS(colour(i))})
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

// WriteHTMLFile writes the HTML report (WriteHTML) to the file at path,
// created or truncated.
func WriteHTMLFile(path string, c *Comparison) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = WriteHTML(f, c)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
