// Charts: a stacked time series of the top groups and a Sankey of two
// attributes, on ECharts' canvas renderer (only the parts used are
// bundled). Tooltips are built as DOM nodes with textContent: no string
// from the API is ever parsed as HTML. main.ts imports this module
// dynamically: ECharts is its own chunk, fetched and parsed while the
// first queries run rather than before the first request.

import * as echarts from "echarts/core";
import { LineChart, SankeyChart } from "echarts/charts";
import { GridComponent, TooltipComponent } from "echarts/components";
import { CanvasRenderer } from "echarts/renderers";

import { cssVar, otherColor, palette, seriesCount } from "./colors";

echarts.use([LineChart, SankeyChart, GridComponent, TooltipComponent, CanvasRenderer]);

function tooltipBox(title: string, lines: { color: string; name: string; value: string }[]): HTMLElement {
  const box = document.createElement("div");
  box.className = "tip";
  const h = document.createElement("div");
  h.className = "tip-title";
  h.textContent = title;
  box.append(h);
  for (const l of lines) {
    const row = document.createElement("div");
    row.className = "tip-row";
    const dot = document.createElement("span");
    dot.className = "dot";
    dot.style.background = l.color;
    const name = document.createElement("span");
    name.className = "tip-name";
    name.textContent = l.name;
    const val = document.createElement("span");
    val.className = "tip-value";
    val.textContent = l.value;
    row.append(dot, name, val);
    box.append(row);
  }
  return box;
}

export interface Series {
  name: string;
  color: string;
  points: [number, number | null][]; // time (ms), value per second (null: nothing stored there, a gap)
}

function tooltipStyle() {
  return {
    backgroundColor: cssVar("--panel"),
    borderColor: cssVar("--border"),
    textStyle: { color: cssVar("--text") },
    extraCssText: "box-shadow: 0 2px 8px rgba(0,0,0,.25); border-radius: 6px;",
  };
}

export class TimeChart {
  private chart: echarts.ECharts;
  constructor(private el: HTMLElement) {
    this.chart = echarts.init(el, undefined, { renderer: "canvas" });
    new ResizeObserver(() => this.chart.resize()).observe(el);
  }

  render(series: Series[], stacked: boolean, format: (v: number) => string, range: [number, number]): void {
    this.chart.setOption(timeOption(series, stacked, format, range), { notMerge: true });
    this.el.dataset.series = String(series.length);
    const drawn = series.flatMap((s) => s.points.filter((p) => p[1] !== null)); // zeros too: a gap is null
    this.el.dataset.points = String(drawn.filter((p) => p[1]! > 0).length);
    this.el.dataset.first = String(Math.min(...drawn.map((p) => p[0]))); // the first and last times drawn (ms)
    this.el.dataset.last = String(Math.max(...drawn.map((p) => p[0])));
  }

  /**
   * warm draws a made-up chart of the first view's shape (n stacked series of bins points over a time axis) on a
   * canvas of the chart's size outside the page, then drops it: ECharts' first drawing runs its code cold (compiled
   * on first use: 250-440 ms against 77-101 ms warm on a loaded 2-core machine), and this pays for that while the
   * server works, not after the answer.
   */
  warm(n: number, bins: number): void {
    const box = document.createElement("div");
    const chart = echarts.init(box, undefined, { renderer: "canvas", width: this.el.clientWidth || 800, height: this.el.clientHeight || 300 });
    const t0 = Date.UTC(2026, 0, 1), step = 600e3;
    const series = Array.from({ length: n }, (_, i): Series => ({
      name: `warm ${i}`, color: palette()[i % seriesCount],
      points: Array.from({ length: bins }, (_, b): [number, number | null] => [t0 + b * step, b === 0 ? null : (i + 1) * (1 + Math.sin(b / 7))]),
    }));
    chart.setOption(timeOption(series, true, (v) => v.toFixed(0), [t0, t0 + bins * step]), { notMerge: true });
    chart.dispose();
  }
}

/** timeOption is the time chart's ECharts option. */
function timeOption(series: Series[], stacked: boolean, format: (v: number) => string, range: [number, number]): echarts.EChartsCoreOption {
  const text = cssVar("--muted"), grid = cssVar("--grid");
  return {
    animation: false,
    useUTC: true,
    grid: { left: 8, right: 16, top: 16, bottom: 8, containLabel: true },
    tooltip: {
      trigger: "axis",
      ...tooltipStyle(),
      formatter: (params: unknown) => {
        const ps = (params as { seriesIndex: number; value: [number, number] }[]).filter((p) => p.value[1] > 0);
        const t = ps.length > 0 ? new Date(ps[0].value[0]) : null;
        const lines = ps.sort((a, b) => b.value[1] - a.value[1]).map((p) => ({
          color: series[p.seriesIndex].color, name: series[p.seriesIndex].name, value: format(p.value[1]),
        }));
        return tooltipBox(t ? t.toISOString().replace(".000Z", "Z").replace("T", " ") : "", lines);
      },
    },
    xAxis: {
      type: "time", min: range[0], max: range[1],
      axisLabel: {
        color: text, hideOverlap: true,
        formatter: { year: "{MMM} {d}", month: "{MMM} {d}", day: "{MMM} {d}", hour: "{HH}:{mm}", minute: "{HH}:{mm}", second: "{HH}:{mm}:{ss}" },
      }, axisLine: { lineStyle: { color: grid } }, splitLine: { show: false },
    },
    yAxis: {
      type: "value", axisLabel: { color: text, formatter: (v: number) => format(v) },
      splitLine: { lineStyle: { color: grid } },
    },
    series: series.map((s) => ({
      type: "line", name: s.name, data: s.points, showSymbol: false, step: false, color: s.color,
      stack: stacked ? "total" : undefined,
      lineStyle: { width: stacked ? 0.8 : 1.6 },
      areaStyle: stacked ? { opacity: s.name === "Other" ? 0.35 : 0.85 } : undefined,
      emphasis: { focus: "series" },
    })),
  };
}

export interface Link {
  source: string;
  target: string;
  value: number;
}

export class SankeyChart_ {
  private chart: echarts.ECharts;
  constructor(private el: HTMLElement) {
    this.chart = echarts.init(el, undefined, { renderer: "canvas" });
    new ResizeObserver(() => this.chart.resize()).observe(el);
  }

  /** render draws links from the left attribute's values to the right's (names are kept apart by side). */
  render(links: Link[], format: (v: number) => string, colorOf: (v: string) => string | undefined): void {
    const left = new Map<string, number>(), right = new Map<string, number>();
    for (const l of links) {
      left.set(l.source, (left.get(l.source) ?? 0) + l.value);
      right.set(l.target, (right.get(l.target) ?? 0) + l.value);
    }
    const id = (side: string, v: string) => `${side}\u0000${v}`;
    const label = (n: string) => n.slice(n.indexOf("\u0000") + 1);
    const nodes = [
      ...[...left.keys()].map((v, i) => ({ name: id("L", v), itemStyle: { color: colorOf(v) ?? palette()[(i + 10) % seriesCount] } })),
      ...[...right.keys()].map((v) => ({ name: id("R", v), itemStyle: { color: otherColor() } })),
    ];
    this.chart.setOption(
      {
        animation: false,
        tooltip: {
          trigger: "item",
          ...tooltipStyle(),
          formatter: (p: unknown) => {
            const d = (p as { dataType: string; data: { source?: string; target?: string; name?: string; value?: number }; value: number });
            if (d.dataType === "edge") {
              return tooltipBox(`${label(d.data.source!)} → ${label(d.data.target!)}`, [{ color: otherColor(), name: "", value: format(d.value) }]);
            }
            return tooltipBox(label(d.data.name!), [{ color: otherColor(), name: "", value: format(d.value) }]);
          },
        },
        series: [{
          type: "sankey", left: 8, right: 160, top: 8, bottom: 8, nodeGap: 6, nodeWidth: 12, draggable: false,
          layoutIterations: 16,
          emphasis: { focus: "adjacency" },
          label: { color: cssVar("--text"), formatter: (p: { name: string }) => label(p.name), fontSize: 11 },
          lineStyle: { color: "gradient", opacity: 0.35, curveness: 0.5 },
          data: nodes,
          links: links.map((l) => ({ source: id("L", l.source), target: id("R", l.target), value: l.value })),
        }],
      },
      { notMerge: true },
    );
    this.el.dataset.links = String(links.length);
  }
}
