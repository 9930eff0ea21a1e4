// The whole view in the URL: every choice the page offers is a query
// parameter, so a URL reopens the same view.

import { Direction, Metric, parseDuration } from "./format";

export interface View {
  tab: "traffic" | "live";
  range: string; // relative: 15m, 1h, 6h, 24h, 7d, 30d; "" when from/to are set
  from: string; // RFC 3339, when range is ""
  to: string;
  group: string[]; // one or two attributes
  filter: string;
  metric: Metric;
  dir: Direction;
  limit: number;
  iface: string; // "" all
  node: string; // "" all
  chart: "stacked" | "lines";
  sankey: [string, string];
  refresh: boolean; // re-query every refreshSeconds
  other: boolean; // the chart shows the rest of the traffic as "Other"
}

export const ranges = ["15m", "1h", "6h", "24h", "7d", "30d"];
export const limits = [5, 10, 15, 20, 30];

export function defaults(): View {
  return {
    tab: "traffic", range: "24h", from: "", to: "", group: ["sip"], filter: "", metric: "bytes", dir: "sum",
    limit: 10, iface: "", node: "", chart: "stacked", sankey: ["sip", "dip"], refresh: false, other: true,
  };
}

/** fromURL reads a view from a query string, keeping defaults for what is missing or wrong. */
export function fromURL(search: string, attrs: string[]): View {
  const p = new URLSearchParams(search);
  const v = defaults();
  const attr = (s: string | null) => (s !== null && attrs.includes(s) ? s : null);
  if (p.get("tab") === "live") v.tab = "live";
  const from = p.get("from"), to = p.get("to");
  if (from && to && !isNaN(Date.parse(from)) && !isNaN(Date.parse(to)) && Date.parse(from) < Date.parse(to)) {
    v.range = "";
    v.from = new Date(from).toISOString();
    v.to = new Date(to).toISOString();
  } else if (p.get("range") && !isNaN(parseDuration(p.get("range")!))) {
    v.range = p.get("range")!;
  }
  const g = (p.get("group") ?? "").split(",").map(attr).filter((a): a is string => a !== null && a !== "time");
  if (g.length > 0) v.group = g.slice(0, 2);
  v.filter = p.get("filter") ?? "";
  const m = p.get("metric");
  if (m === "bytes" || m === "packets" || m === "flows") v.metric = m;
  const d = p.get("dir");
  if (d === "sum" || d === "out" || d === "in") v.dir = d;
  const n = Number(p.get("limit"));
  if (Number.isInteger(n) && n >= 1 && n <= 50) v.limit = n;
  v.iface = p.get("iface") ?? "";
  v.node = p.get("node") ?? "";
  if (p.get("chart") === "lines") v.chart = "lines";
  const s = (p.get("sankey") ?? "").split(",").map(attr);
  if (s.length === 2 && s[0] && s[1] && s[0] !== s[1]) v.sankey = [s[0], s[1]];
  v.refresh = p.get("refresh") === "1";
  v.other = p.get("other") !== "0";
  return v;
}

/** toURL writes a view as a query string, leaving out defaults. */
export function toURL(v: View): string {
  const d = defaults();
  const p = new URLSearchParams();
  if (v.tab !== d.tab) p.set("tab", v.tab);
  if (v.range) {
    if (v.range !== d.range) p.set("range", v.range);
  } else {
    p.set("from", v.from);
    p.set("to", v.to);
  }
  if (v.group.join(",") !== d.group.join(",")) p.set("group", v.group.join(","));
  if (v.filter) p.set("filter", v.filter);
  if (v.metric !== d.metric) p.set("metric", v.metric);
  if (v.dir !== d.dir) p.set("dir", v.dir);
  if (v.limit !== d.limit) p.set("limit", String(v.limit));
  if (v.iface) p.set("iface", v.iface);
  if (v.node) p.set("node", v.node);
  if (v.chart !== d.chart) p.set("chart", v.chart);
  if (v.sankey.join(",") !== d.sankey.join(",")) p.set("sankey", v.sankey.join(","));
  if (v.refresh) p.set("refresh", "1");
  if (!v.other) p.set("other", "0");
  const s = p.toString();
  return s ? `?${s}` : location.pathname;
}

/** span resolves a view's time range to absolute times (ms). */
export function span(v: View, now: number): [number, number] {
  if (!v.range) return [Date.parse(v.from), Date.parse(v.to)];
  return [now - parseDuration(v.range) * 1000, now];
}

/** Time bins, in seconds: the chart gets about 60 to 200 points. */
const steps = [10, 30, 60, 300, 600, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400];

export function resolution(fromMs: number, toMs: number): number {
  const want = (toMs - fromMs) / 1000 / 150;
  return steps.find((s) => s >= want) ?? 86400;
}
