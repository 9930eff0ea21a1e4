// weir's console: wires the options, the filter bar, the charts and the
// tables to the HTTP API, and keeps the whole view in the URL.

import { ApiError, getJSON, liveRecords, Meta, onTokenRequired, QueryResult, Row, setToken, TopSeries } from "./api";
import type { Link, Sankey } from "./sankey";
import { Series, TimeChart } from "./timechart";
import { otherColor, palette } from "./colors";
import { FilterBar } from "./filter";
import { cell, condValue, exact, rate } from "./format";
import { fromURL, limits, ranges, resolution, span, toURL, View } from "./state";
import { renderLive, renderTop, value } from "./table";

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

let meta: Meta;
let view: View;
let filterBar: FilterBar;
let timeChart: TimeChart;
/** sankeyP resolves to the Sankey once its chunk (ECharts) is loaded (loadSankey starts it). */
let sankeyP: Promise<Sankey> | null = null;

/**
 * loadSankey imports the Sankey's chunk (ECharts, most of the console's code) once: after the table and the time
 * chart are drawn, while the server works on the Sankey's query, so the first useful paint needs neither its
 * download nor its compile.
 */
function loadSankey(): Promise<Sankey> {
  sankeyP ??= handled(import("./sankey").then((c) => new c.Sankey($("sankey"))));
  return sankeyP;
}
let loadSeq = 0;
let inflight: AbortController | null = null;
let refreshTimer = 0;
let liveTimer = 0;
let hint = ""; // a notice kept until the user changes the view

/** when renders an RFC 3339 time to the minute, in UTC. */
const when = (s: string) => `${s.slice(0, 16).replace("T", " ")} UTC`;

const refreshSeconds = 30;

function option(value: string, text: string): HTMLOptionElement {
  const o = document.createElement("option");
  o.value = value;
  o.textContent = text;
  return o;
}

function fill(sel: HTMLSelectElement, opts: [string, string][], current: string): void {
  sel.replaceChildren(...opts.map(([v, t]) => option(v, t)));
  sel.value = current;
}

/** localInput renders ms as a datetime-local value in UTC. */
const localInput = (ms: number) => new Date(ms).toISOString().slice(0, 16);

function syncControls(): void {
  const attrs = meta.attributes.group.filter((a) => a !== "time");
  fill($("range"), [...ranges.map((r): [string, string] => [r, `Last ${r}`]), ["", "Custom…"]], view.range);
  $("custom").hidden = view.range !== "";
  const [f, t] = span(view, Date.now());
  $<HTMLInputElement>("from").value = localInput(f);
  $<HTMLInputElement>("to").value = localInput(t);
  fill($("group1"), attrs.map((a) => [a, a]), view.group[0]);
  fill($("group2"), [["", "—"], ...attrs.filter((a) => a !== view.group[0]).map((a): [string, string] => [a, a])], view.group[1] ?? "");
  fill($("metric"), [["bytes", "Bytes/s"], ["packets", "Packets/s"], ["flows", "Flows/s"]], view.metric);
  fill($("dir"), [["sum", "In + out"], ["out", "Out (sent by sip)"], ["in", "In (received by sip)"]], view.dir);
  $<HTMLSelectElement>("dir").disabled = view.metric === "flows";
  fill($("limit"), limits.map((n) => [String(n), `Top ${n}`]), String(view.limit));
  fill($("iface"), [["", "All interfaces"], ...meta.interfaces.map((i): [string, string] => [i.iface, i.iface])], view.iface);
  // Nodes are chosen by a condition on node: shown when the backend has nodes and the query language knows the attribute.
  $("node-wrap").hidden = meta.nodes.length === 0 || !meta.attributes.condition.includes("node");
  fill($("node"), [["", "All nodes"], ...meta.nodes.map((n): [string, string] => [n, n])], view.node);
  fill($("chart-type"), [["stacked", "Stacked areas"], ["lines", "Lines"]], view.chart);
  fill($("sankey-a"), attrs.map((a) => [a, a]), view.sankey[0]);
  fill($("sankey-b"), attrs.map((a) => [a, a]), view.sankey[1]);
  $<HTMLInputElement>("refresh").checked = view.refresh;
  $<HTMLInputElement>("other").checked = view.other;
  filterBar.value = view.filter;
  for (const tab of ["traffic", "live"] as const) {
    $(`tab-${tab}`).setAttribute("aria-selected", String(view.tab === tab));
    $(tab).hidden = view.tab !== tab;
  }
}

/** setView changes the view, writes it to the URL (a new history entry when push), and reloads. */
function setView(change: Partial<View>, push = false, keepHint = false): void {
  if (!keepHint) hint = "";
  view = { ...view, ...change };
  const url = toURL(view);
  if (push) history.pushState(null, "", url);
  else history.replaceState(null, "", url);
  void load(); // its queries go out first, the controls follow while the server works
  syncControls();
}

/** condition is the filter and the node selector together. */
function condition(): string {
  const parts = [view.filter.trim(), view.node ? `node = ${condValue("node", view.node)}` : ""].filter((p) => p !== "");
  return parts.length > 1 ? parts.map((p) => `(${p})`).join(" and ") : (parts[0] ?? "");
}

function rowCondition(group: string[], r: Row): string {
  return group.map((a) => `${a} = ${condValue(a, r[a])}`).join(" and ");
}

function rowName(group: string[], r: Row): string {
  return group.map((a) => cell(a, r[a])).join(" → ");
}

function params(extra: Record<string, string>, from: number, to: number, cond: string): URLSearchParams {
  const p = new URLSearchParams({ from: new Date(from).toISOString(), to: new Date(to).toISOString(), ...extra });
  if (cond) p.set("condition", cond);
  if (view.iface) p.set("iface", view.iface);
  if (meta.live && view.range && view.refresh) p.set("live", "true");
  return p;
}

function notice(text: string, action?: [string, () => void]): void {
  const n = $("notice");
  n.replaceChildren();
  n.hidden = text === "";
  if (!text) return;
  const span_ = document.createElement("span");
  span_.textContent = text;
  n.append(span_);
  if (action) {
    const b = document.createElement("button");
    b.textContent = action[0];
    b.addEventListener("click", action[1]);
    n.append(" ", b);
  }
}

/** storedDay is the view of the store's last day (a little more, to show all of it), when it holds flows. */
function storedDay(): Partial<View> | null {
  if (!meta.last) return null;
  const to = Math.ceil(Date.parse(meta.last) / 3600e3) * 3600e3;
  const first = meta.first ? Math.floor(Date.parse(meta.first) / 3600e3) * 3600e3 : to;
  const from = Math.max(Math.min(first, to - 86400e3), to - 86400e3 - 3 * 3600e3);
  return { range: "", from: new Date(from).toISOString(), to: new Date(to).toISOString() };
}

function showStoredDay(): void {
  const day = storedDay();
  if (day) setView(day, true, true);
}

async function load(): Promise<void> {
  if (view.tab === "live") {
    void loadLive();
    return;
  }
  const seq = ++loadSeq;
  inflight?.abort();
  const ctl = new AbortController();
  inflight = ctl;
  document.body.dataset.state = "loading";
  const [f0, t0] = span(view, Date.now());
  const step = resolution(f0, t0);
  const from = Math.floor(f0 / (step * 1000)) * step * 1000, to = Math.ceil(t0 / (step * 1000)) * step * 1000;
  const cond = condition();
  const sort = view.metric === "flows" ? "flows" : `${view.metric}:${view.dir}`;
  const fmt = (v: number) => rate(view.metric, v);
  const res = `${step}s`;
  // One request for the top N, their series and the totals per bin (for "Other"): the server reads the blocks once
  // for the top and the totals, and asks the series as soon as it knows the top, without a round trip.
  const viewP = handled(getJSON<TopSeries>("/api/v1/topseries",
    params({ group: view.group.join(","), limit: String(view.limit), sort, resolution: res }, from, to, cond), ctl.signal));
  try {
    const { top, series, totals } = await viewP;
    if (seq !== loadSeq) return;
    filterBar.showError(null);
    const colors = top.rows.map((_, i) => palette()[i % palette().length]);
    const seconds = (to - from) / 1000;
    renderTop($("table"), { group: view.group, rows: top.rows, totals: top.totals, colors, metric: view.metric, dir: view.dir, seconds,
      onDrill: (r) => drill(r) });
    if (performance.getEntriesByName("weir-table").length === 0) performance.mark("weir-table");
    const st = top.stats;
    $("stats").textContent = `${exact(top.rows.length)} of ${exact(st.groups)} groups · ${exact(st.rows_matched)} of ${exact(st.rows_scanned)} ` +
      `records matched · ${exact(st.blocks - st.blocks_skipped)} blocks read, ${exact(st.blocks_skipped)} skipped · ${st.elapsed_ms.toFixed(0)} ms`;
    $("chart-title").textContent = `${view.metric === "bytes" ? "Bytes" : view.metric === "packets" ? "Packets" : "Flows"} per second` +
      `${view.metric === "flows" ? "" : view.dir === "sum" ? ", in + out" : `, ${view.dir}`} · top ${view.limit} by ${view.group.join(", ")} · ${step >= 60 ? `${step / 60} min` : `${step} s`} bins`;
    if (top.totals.flows === 0 && meta.last && !cond) {
      notice(`No flows in this time range. The store holds flows from ${when(meta.first!)} to ${when(meta.last)}.`, ["Show the last stored day", showStoredDay]);
    } else if (top.totals.flows === 0 && !meta.last && !cond) {
      // A new user's first look: weir serve on the store a capture has not written to yet.
      notice(meta.backend === "store"
        ? "The store holds no flows yet. A capture writes its flows here every 5 minutes (--writeout) and at exit; tick \"Refresh every 30 s\" to see them arrive."
        : "The database holds no flows yet.");
    } else if (top.totals.flows === 0) {
      notice("No flows match in this time range.");
    } else {
      notice(hint);
    }
    const groupCond = top.rows.map((r) => `(${rowCondition(view.group, r)})`).join(" or ");
    await drawSeries(top, series, totals, colors, step, from, to, fmt);
    if (seq !== loadSeq) return;
    if (performance.getEntriesByName("weir-chart").length === 0) performance.mark("weir-chart"); // with the table: first useful paint
    // The Sankey of the top groups when its left side is the grouping (fewer rows to aggregate), else of everything.
    // Asked once the chart is drawn: on a small machine its query (on every core) would slow the chart's drawing.
    const ofTop = view.group.length === 1 && view.group[0] === view.sankey[0] && top.rows.length > 0;
    const sankeyCond = ofTop ? (cond ? `(${cond}) and (${groupCond})` : groupCond) : cond;
    const pairsP = handled(getJSON<QueryResult>("/api/v1/query",
      params({ group: view.sankey.join(","), limit: String(view.limit * 2), sort }, from, to, sankeyCond), ctl.signal));
    const [pairs, sankey] = await Promise.all([pairsP, loadSankey()]);
    if (seq !== loadSeq) return;
    sankey.render(pairs.rows.map((r): Link => ({
      source: cell(view.sankey[0], r[view.sankey[0]]), target: cell(view.sankey[1], r[view.sankey[1]]),
      value: value(r, view.metric, view.dir) / seconds,
    })).filter((l) => l.value > 0), fmt, (v) => {
      // The Sankey's left side uses the table's colours where it shows the same attribute.
      if (view.group.length !== 1 || view.group[0] !== view.sankey[0]) return undefined;
      const i = top.rows.findIndex((r) => cell(view.group[0], r[view.group[0]]) === v);
      return i >= 0 ? colors[i] : undefined;
    });
    $("sankey-title").textContent = `${view.sankey[0]} → ${view.sankey[1]} · top ${view.limit * 2} pairs${ofTop ? ` of the top ${view.limit} ${view.sankey[0]}` : ""}, average per second`;
    document.body.dataset.state = "ready";
    if (performance.getEntriesByName("weir-ready").length === 0) performance.mark("weir-ready");
  } catch (e) {
    if (seq !== loadSeq || (e instanceof DOMException && e.name === "AbortError")) return;
    document.body.dataset.state = "error";
    if (e instanceof ApiError && (e.body.param === "condition" || e.body.param === "group")) {
      filterBar.showError(e.body);
      return;
    }
    notice(e instanceof Error ? e.message : String(e));
  }
}

/** drawSeries draws the top groups' series (and Other) on the time chart; it resolves once they are drawn. */
function drawSeries(top: QueryResult, series: QueryResult | null, totals: QueryResult, colors: string[], step: number,
  from: number, to: number, fmt: (v: number) => string): Promise<void> {
  const bins = Math.round((to - from) / (step * 1000));
  const idx = (t: string) => Math.round((Date.parse(t) - from) / (step * 1000));
  const keyOf = (r: Row) => view.group.map((a) => JSON.stringify(r[a] ?? null)).join("|");
  const index = new Map(top.rows.map((r, i) => [keyOf(r), i]));
  const vals = top.rows.map(() => new Float64Array(bins));
  const sum = new Float64Array(bins);
  for (const r of series?.rows ?? []) {
    const i = index.get(keyOf(r)), b = idx(String(r.time));
    if (i === undefined || b < 0 || b >= bins) continue;
    const v = value(r, view.metric, view.dir) / step;
    vals[i][b] += v;
    sum[b] += v;
  }
  const other = new Float64Array(bins);
  for (const r of totals.rows) {
    const b = idx(String(r.time));
    if (b >= 0 && b < bins) other[b] = Math.max(0, value(r, view.metric, view.dir) / step - sum[b]);
  }
  // Bins before the first and after the last that hold any flow are gaps, not zero traffic: the store
  // holds nothing there (yet), and a drop to zero would say the traffic stopped.
  let first = bins, last = -1;
  for (const r of totals.rows) {
    const b = idx(String(r.time));
    if (b >= 0 && b < bins) [first, last] = [Math.min(first, b), Math.max(last, b)];
  }
  const t = (b: number) => from + b * step * 1000;
  const points = (vs: Float64Array) => Array.from(vs, (v, b): [number, number | null] => [t(b), b < first || b > last ? null : v]);
  const out: Series[] = top.rows.map((r, i) => ({ name: rowName(view.group, r), color: colors[i], points: points(vals[i]) }));
  if (view.other && other.some((v) => v > 0)) out.push({ name: "Other", color: otherColor(), points: points(other) });
  return timeChart.render(out, view.chart === "stacked", fmt, [from, to], view.metric === "bytes");
}

function drill(r: Row): void {
  const c = rowCondition(view.group, r);
  const f = view.filter.trim();
  setView({ filter: f ? `(${f}) and ${c}` : c }, true);
}

async function loadLive(): Promise<void> {
  window.clearTimeout(liveTimer);
  const msg = $("live-msg");
  try {
    const recs = await liveRecords(100);
    renderLive($("live-table"), recs);
    msg.textContent = `${exact(recs.length)} largest live flows · refreshed ${new Date().toISOString().slice(11, 19)} UTC, every 5 s`;
    document.body.dataset.state = "ready";
    if (view.tab === "live") liveTimer = window.setTimeout(() => void loadLive(), 5000);
  } catch (e) {
    renderLive($("live-table"), []);
    msg.textContent = e instanceof Error ? e.message : String(e);
    document.body.dataset.state = "ready";
  }
}

function scheduleRefresh(): void {
  window.clearInterval(refreshTimer);
  if (view.refresh) refreshTimer = window.setInterval(() => view.tab === "traffic" && void load(), refreshSeconds * 1000);
}

function theme(): void {
  const saved = localStorage.getItem("weir-theme");
  const dark = saved ? saved === "dark" : matchMedia("(prefers-color-scheme: dark)").matches;
  document.documentElement.dataset.theme = dark ? "dark" : "light";
  $("theme").setAttribute("aria-pressed", String(dark));
  $("theme").title = dark ? "Switch to the light theme" : "Switch to the dark theme";
}

function askToken(): Promise<void> {
  const dlg = $<HTMLDialogElement>("token-dialog");
  return new Promise((resolve, reject) => {
    dlg.addEventListener("close", () => {
      const tok = $<HTMLInputElement>("token").value.trim();
      if (dlg.returnValue === "ok" && tok) {
        setToken(tok);
        resolve();
      } else reject(new Error("This server needs a token (weir serve --api-token-file). Reload to enter it."));
    }, { once: true });
    dlg.showModal();
  });
}

function bind(): void {
  const on = (id: string, f: (el: HTMLSelectElement) => void) => $<HTMLSelectElement>(id).addEventListener("change", (e) => f(e.target as HTMLSelectElement));
  on("range", (s) => {
    if (s.value) setView({ range: s.value, from: "", to: "" });
    else {
      const [f, t] = span(view, Date.now());
      setView({ range: "", from: new Date(f).toISOString(), to: new Date(t).toISOString() });
    }
  });
  const custom = () => {
    const f = Date.parse($<HTMLInputElement>("from").value + "Z"), t = Date.parse($<HTMLInputElement>("to").value + "Z");
    if (!isNaN(f) && !isNaN(t) && f < t) setView({ range: "", from: new Date(f).toISOString(), to: new Date(t).toISOString() });
  };
  $("from").addEventListener("change", custom);
  $("to").addEventListener("change", custom);
  on("group1", (s) => setView({ group: [s.value, ...view.group.slice(1).filter((a) => a !== s.value)] }));
  on("group2", (s) => setView({ group: s.value ? [view.group[0], s.value] : [view.group[0]] }));
  on("metric", (s) => setView({ metric: s.value as View["metric"] }));
  on("dir", (s) => setView({ dir: s.value as View["dir"] }));
  on("limit", (s) => setView({ limit: Number(s.value) }));
  on("iface", (s) => setView({ iface: s.value }));
  on("node", (s) => setView({ node: s.value }));
  on("chart-type", (s) => setView({ chart: s.value as View["chart"] }));
  on("sankey-a", (s) => s.value !== view.sankey[1] && setView({ sankey: [s.value, view.sankey[1]] }));
  on("sankey-b", (s) => s.value !== view.sankey[0] && setView({ sankey: [view.sankey[0], s.value] }));
  $<HTMLInputElement>("refresh").addEventListener("change", (e) => {
    setView({ refresh: (e.target as HTMLInputElement).checked });
    scheduleRefresh();
  });
  $<HTMLInputElement>("other").addEventListener("change", (e) => setView({ other: (e.target as HTMLInputElement).checked }));
  for (const tab of ["traffic", "live"] as const) $(`tab-${tab}`).addEventListener("click", () => setView({ tab }, true));
  $("theme").addEventListener("click", () => {
    localStorage.setItem("weir-theme", document.documentElement.dataset.theme === "dark" ? "light" : "dark");
    theme();
    void load();
  });
  window.addEventListener("popstate", () => {
    view = fromURL(location.search, meta.attributes.group);
    syncControls();
    scheduleRefresh();
    void load();
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "/" && document.activeElement?.tagName !== "INPUT") {
      e.preventDefault();
      $<HTMLInputElement>("filter").focus();
    }
  });
}

/** handled marks p's rejection as handled (whoever awaits p still gets it): a query left behind by a failed one is no console error. */
function handled<T>(p: Promise<T>): Promise<T> {
  p.catch(() => undefined);
  return p;
}

/** inlineMeta is the copy of /api/v1/meta's answer the server put into the page (index.html's weir-meta), if any. */
function inlineMeta(): Meta | null {
  const text = document.getElementById("weir-meta")?.textContent;
  if (!text) return null;
  try {
    return JSON.parse(text) as Meta;
  } catch {
    return null; // ask the API instead
  }
}

async function main(): Promise<void> {
  onTokenRequired(askToken);
  // The page's critical path is meta → the view's query: with meta in the page (a server without a token puts it
  // there) the query goes out first thing, else meta's request does. The page's first rendering waits for this
  // script (index.html: blocking="render"), so the controls are filled by then and laid out once.
  const inline = inlineMeta();
  const metaP = inline ? null : getJSON<Meta>("/api/v1/meta");
  if (!inline) {
    theme(); // the page renders while meta is on its way
    try {
      meta = await metaP!;
    } catch (e) {
      notice(e instanceof Error ? e.message : String(e));
      document.body.dataset.state = "error";
      return;
    }
  } else meta = inline;
  view = fromURL(location.search, meta.attributes.group);
  const explicit = /[?&](range|from|to)=/.test(location.search);
  const day = storedDay();
  if (!explicit && day && Date.parse(meta.last!) < span(view, Date.now())[0]) {
    // Nothing in the default range: open on the data there is.
    hint = `Nothing stored in the last ${view.range}: the store's latest flow is at ${when(meta.last!)}, showing the last stored day.`;
    view = { ...view, ...day };
    history.pushState(null, "", toURL(view));
  }
  timeChart = new TimeChart($("chart"));
  const loaded = load(); // the queries go out before anything else is set up
  theme();
  matchMedia("(prefers-color-scheme: dark)").addEventListener("change", theme);
  filterBar = new FilterBar($("filter-bar"), (text) => setView({ filter: text }, true));
  filterBar.setNames(meta.attributes.condition_names);
  $("span-info").textContent = meta.first && meta.last
    ? `${meta.backend} · ${when(meta.first)} → ${when(meta.last)}`
    : `${meta.backend}: empty`;
  bind();
  scheduleRefresh();
  syncControls();
  await loaded;
}

void main();
