// The Sankey of two attributes, on ECharts' canvas renderer (only the parts
// used are bundled). Its tooltip is tooltip.ts' (textContent: no string
// from the API is ever parsed as HTML). main.ts imports this module
// dynamically once the time chart and the table are drawn: ECharts (most
// of the console's code) is its own chunk, and the first useful paint
// needs neither its download nor its compile.

import * as echarts from "echarts/core";
import { SankeyChart } from "echarts/charts";
import { TooltipComponent } from "echarts/components";
import { CanvasRenderer } from "echarts/renderers";

import { cssVar, otherColor, palette, seriesCount } from "./colors";
import { tooltipBox } from "./tooltip";

echarts.use([SankeyChart, TooltipComponent, CanvasRenderer]);

/** tooltipStyle is the box ECharts draws around tooltip.ts' content, in the console's colours. */
function tooltipStyle() {
  return {
    backgroundColor: cssVar("--panel"),
    borderColor: cssVar("--border"),
    textStyle: { color: cssVar("--text") },
    extraCssText: "box-shadow: 0 2px 8px rgba(0,0,0,.25); border-radius: 6px;",
  };
}

/** Link is one flow of the Sankey: from a value of the left attribute to one of the right, per second. */
export interface Link {
  source: string;
  target: string;
  value: number;
}

/** Sankey draws the links of a view on an ECharts canvas that follows its element's size. */
export class Sankey {
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
