// The time chart: the top groups' series, stacked areas or lines, on uPlot
// (one canvas, ~50 kB, fast to compile and draw: the console's first useful
// paint waits for it). The legend is the top-N table (colors.ts gives both
// the same colours); the tooltip is built by tooltip.ts with textContent.

import uPlot from "uplot";

import { cssVar } from "./colors";
import { tooltipBox } from "./tooltip";

/** Series is one line of the chart. */
export interface Series {
  name: string;
  color: string;
  points: [number, number | null][]; // time (ms), value per second (null: nothing stored there, a gap)
}

/** withAlpha returns a #rrggbb colour with opacity a (0..1); other notations are returned as they are. */
function withAlpha(c: string, a: number): string {
  return /^#[0-9a-f]{6}$/i.test(c) ? c + Math.round(a * 255).toString(16).padStart(2, "0") : c;
}

const months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const pad2 = (n: number) => String(n).padStart(2, "0");

/** timeLabel labels a time axis tick in UTC: the day at midnight or when ticks are a day or more apart, else HH:MM. */
function timeLabel(ms: number, incr: number): string {
  const d = new Date(ms);
  if (incr >= 86400e3 || ms % 86400e3 === 0) return `${months[d.getUTCMonth()]} ${d.getUTCDate()}`;
  return incr < 60e3 ? `${pad2(d.getUTCHours())}:${pad2(d.getUTCMinutes())}:${pad2(d.getUTCSeconds())}`
    : `${pad2(d.getUTCHours())}:${pad2(d.getUTCMinutes())}`;
}

/**
 * binaryIncrs are the y axis' tick steps for bytes: 1, 2 and 5 times a power of ten in B, KiB, MiB … (decimal steps
 * would tick at 977 KiB/s and 4.77 MiB/s).
 */
const binaryIncrs = [0, 1, 2, 3, 4, 5].flatMap((k) =>
  [1, 2, 5, 10, 20, 50, 100, 200, 500].map((m) => m * 1024 ** k));
const binaryUnits = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
const en = new Intl.NumberFormat("en-US");

/** binaryTicks labels byte ticks in the unit of their step, so that each is a whole number: 0, 500, 1,000, 1,500 KiB/s. */
function binaryTicks(splits: number[], incr: number): string[] {
  const k = Math.min(Math.max(0, Math.floor(Math.log2(incr) / 10 + 1e-9)), binaryUnits.length - 1);
  return splits.map((v) => `${en.format(Math.round(v / 1024 ** k))} ${binaryUnits[k]}/s`);
}

/** tickLabel drops a label's trailing zeros after the point: "2.00 k/s" is "2 k/s" on an axis, "2.50" is "2.5". */
function tickLabel(s: string): string {
  return s.replace(/(\.\d*?)0+(?=\D|$)/, "$1").replace(/\.(?=\D|$)/, "");
}

/** axisSize is a y axis' width from its longest label (uPlot's is fixed otherwise). */
function axisSize(u: uPlot, values: string[] | null, axisIdx: number, cycleNum: number): number {
  const axis = u.axes[axisIdx];
  if (cycleNum > 1) return (axis as { _size?: number })._size ?? 50; // converged: keep the size of the last pass
  const longest = (values ?? []).reduce((a, v) => (v.length > a.length ? v : a), "");
  u.ctx.font = (axis.font as unknown as string[])[0];
  return Math.ceil((axis.ticks?.size ?? 10) + (axis.gap ?? 5) + u.ctx.measureText(longest).width / devicePixelRatio) + 4;
}

/**
 * heldTotal sums the per-second values uPlot holds over every bin and series (stacked: the top series, which holds
 * the sum of all): the browser test compares it with the API's totals.
 */
function heldTotal(u: uPlot, stacked: boolean): number {
  const cols = (stacked ? u.data.slice(-1) : u.data.slice(1)) as (number | null)[][];
  let sum = 0;
  if (u.data.length > 1) for (const col of cols) for (const v of col) sum += v ?? 0;
  return sum;
}

/**
 * TimeChart draws the series of a view: each render builds a new uPlot (a new view has other series, colours or
 * theme) and drops the last; a ResizeObserver keeps it the size of its element.
 */
export class TimeChart {
  private plot: uPlot | null = null;
  private tip: HTMLElement;

  constructor(private el: HTMLElement) {
    this.tip = document.createElement("div");
    this.tip.className = "chart-tip";
    this.tip.hidden = true;
    new ResizeObserver(() => this.plot?.setSize(this.size())).observe(el);
  }

  private size(): { width: number; height: number } {
    return { width: Math.max(this.el.clientWidth, 100), height: Math.max(this.el.clientHeight, 100) };
  }

  /**
   * render draws series over range (ms) and resolves once uPlot has drawn them on its canvas (uPlot draws in a
   * microtask after it is built: the console's first-paint mark must come after that). binary: the values are
   * bytes, ticked at binary steps.
   */
  render(series: Series[], stacked: boolean, format: (v: number) => string, range: [number, number],
    binary = false): Promise<void> {
    this.plot?.destroy();
    this.plot = null;
    this.el.dataset.series = String(series.length);
    const drawn = series.flatMap((s) => s.points.filter((p) => p[1] !== null)); // zeros too: a gap is null
    this.el.dataset.points = String(drawn.filter((p) => p[1]! > 0).length);
    this.el.dataset.first = String(Math.min(...drawn.map((p) => p[0]))); // the first and last times drawn (ms)
    this.el.dataset.last = String(Math.max(...drawn.map((p) => p[0])));

    // uPlot takes columns: the times, then one array per series. Every series of a view has the same bins.
    const times = series.length > 0 ? series[0].points.map((p) => p[0]) : [];
    const raw = series.map((s) => s.points.map((p) => p[1]));
    // Stacked: each series is drawn at the sum of itself and those below it (the first at the bottom), and
    // filled down to the one below (a band); the tooltip shows the series' own values.
    const acc = new Float64Array(times.length);
    const shown = stacked ? raw.map((vs) => vs.map((v, i) => (v === null ? null : (acc[i] += v)))) : raw;
    const text = cssVar("--muted"), grid = cssVar("--grid");
    const font = `11px ${getComputedStyle(this.el).fontFamily}`;
    const axis = { stroke: text, font, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1, size: 4 } };
    const opts: uPlot.Options = {
      ...this.size(),
      ms: 1,
      tzDate: (ts) => uPlot.tzDate(new Date(ts), "Etc/UTC"), // ticks on UTC hours and days, as the labels
      legend: { show: false }, // the table is the legend
      padding: [16, 16, 0, 0],
      cursor: { y: false, drag: { x: false, y: false }, points: { size: 7 } }, // a vertical line, no zoom
      scales: {
        x: { time: true, range: () => [range[0], range[1]] },
        y: { range: (_u, _min, max) => [0, uPlot.rangeNum(0, max > 0 ? max : 1, 0.1, true)[1]] },
      },
      axes: [
        { ...axis, size: 32, values: (_u, splits, _ai, _space, incr) => splits.map((v) => timeLabel(v, incr)) },
        { ...axis, size: axisSize, incrs: binary ? binaryIncrs : undefined,
          values: (_u, splits, _ai, _space, incr) => {
            const labels = binary ? binaryTicks(splits, incr) : splits.map((v) => tickLabel(format(v)));
            this.el.dataset.yticks = labels.join("|"); // for the browser test: the canvas holds no text
            return labels;
          } },
      ],
      series: [{}, ...series.map((s): uPlot.Series => ({
        label: s.name, stroke: s.color, width: stacked ? 0.8 : 1.6, points: { show: false },
        fill: stacked ? withAlpha(s.color, s.name === "Other" ? 0.35 : 0.85) : undefined,
      }))],
      bands: stacked ? series.slice(1).map((_, i): uPlot.Band => ({ series: [i + 2, i + 1] })) : undefined,
    };
    const data = [times, ...shown] as uPlot.AlignedData;
    return new Promise((resolve) => {
      opts.hooks = {
        ready: [(u) => { // after the first commit: the canvas is drawn
          this.el.dataset.total = String(heldTotal(u, stacked));
          resolve();
        }],
        setCursor: [(u) => this.showTip(u, series, format)],
      };
      this.plot = new uPlot(opts, data, this.el);
      this.plot.over.append(this.tip);
    });
  }

  /** showTip shows the values of the bin under the cursor, largest first, beside it (or hides the tooltip). */
  private showTip(u: uPlot, series: Series[], format: (v: number) => string): void {
    const i = u.cursor.idx, left = u.cursor.left ?? -1;
    if (i === null || i === undefined || left < 0) {
      this.tip.hidden = true;
      return;
    }
    const lines = series.map((s) => ({ s, v: s.points[i][1] })).filter((x) => x.v !== null && x.v > 0)
      .sort((a, b) => b.v! - a.v!).map((x) => ({ color: x.s.color, name: x.s.name, value: format(x.v!) }));
    if (lines.length === 0) {
      this.tip.hidden = true;
      return;
    }
    const t = new Date(series[0].points[i][0]).toISOString().replace(".000Z", "Z").replace("T", " ");
    this.tip.replaceChildren(tooltipBox(t, lines));
    this.tip.hidden = false;
    // Beside the cursor, on the side with room.
    const w = this.tip.offsetWidth, room = u.over.clientWidth;
    this.tip.style.left = `${left + 16 + w > room ? Math.max(0, left - 16 - w) : left + 16}px`;
    this.tip.style.top = `${Math.max(0, Math.min((u.cursor.top ?? 0) - 20, u.over.clientHeight - this.tip.offsetHeight))}px`;
  }
}
