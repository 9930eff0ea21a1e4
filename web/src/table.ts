// The top-N table and the live flows table. Every value is set with
// textContent.

import { Counters, Row } from "./api";
import { bytes, cell, count, Direction, exact, Metric, protoName, rate, total } from "./format";

/** value is a row's counter for metric m in direction d. */
export function value(c: Counters, m: Metric, d: Direction): number {
  if (m === "flows") return c.flows;
  const out = m === "bytes" ? c.bytes_out : c.packets_out;
  const inn = m === "bytes" ? c.bytes_in : c.packets_in;
  return d === "out" ? out : d === "in" ? inn : out + inn;
}

function td(text: string, cls?: string): HTMLTableCellElement {
  const c = document.createElement("td");
  c.textContent = text;
  if (cls) c.className = cls;
  return c;
}

function th(text: string, cls?: string, title?: string): HTMLTableCellElement {
  const c = document.createElement("th");
  c.scope = "col";
  c.textContent = text;
  if (cls) c.className = cls;
  if (title) c.title = title;
  return c;
}

export interface TopTable {
  group: string[];
  rows: Row[];
  totals: Counters;
  colors: string[];
  metric: Metric;
  dir: Direction;
  seconds: number; // the time range's length, for average rates
  onDrill: (row: Row) => void;
}

/** renderTop fills table with the top groups: attributes, average rate, total, share, exact counters. */
export function renderTop(table: HTMLTableElement, t: TopTable): void {
  const head = document.createElement("thead");
  const hr = document.createElement("tr");
  hr.append(th("", "swatch-col"));
  for (const a of t.group) hr.append(th(a));
  const unit = t.metric === "bytes" ? "bytes" : t.metric;
  hr.append(th(`avg ${unit}/s`, "num"), th(`${unit}`, "num"), th("share", "share-col"), th("flows", "num"),
    th("bytes out", "num", "sent by the initiator (sip)"), th("bytes in", "num", "received by the initiator"),
    th("pkts out", "num"), th("pkts in", "num"));
  head.append(hr);
  const body = document.createElement("tbody");
  const whole = value(t.totals, t.metric, t.dir);
  const widest = Math.max(1, ...t.rows.map((r) => value(r, t.metric, t.dir))); // bars relative to the first row
  t.rows.forEach((r, i) => {
    const tr = document.createElement("tr");
    tr.tabIndex = 0;
    tr.className = "drill";
    tr.title = "Filter on this row (Enter)";
    const sw = document.createElement("td");
    sw.className = "swatch-col";
    const dot = document.createElement("span");
    dot.className = "swatch";
    dot.style.background = t.colors[i] ?? "transparent";
    sw.append(dot);
    tr.append(sw);
    for (const a of t.group) tr.append(td(cell(a, r[a]), "attr"));
    const v = value(r, t.metric, t.dir);
    const share = whole > 0 ? (100 * v) / whole : 0;
    tr.append(td(rate(t.metric, v / t.seconds), "num"), td(total(t.metric, v), "num"));
    const sc = document.createElement("td");
    sc.className = "share-col";
    const bar = document.createElement("span");
    bar.className = "bar";
    bar.style.width = `${((100 * v) / widest).toFixed(1)}%`;
    const pct = document.createElement("span");
    pct.className = "pct";
    pct.textContent = `${share.toFixed(share < 10 ? 2 : 1)}%`;
    sc.append(bar, pct);
    tr.append(sc, td(count(r.flows), "num"), td(bytes(r.bytes_out), "num"), td(bytes(r.bytes_in), "num"),
      td(count(r.packets_out), "num"), td(count(r.packets_in), "num"));
    tr.addEventListener("click", () => t.onDrill(r));
    tr.addEventListener("keydown", (e) => {
      if (e.key === "Enter") t.onDrill(r);
    });
    body.append(tr);
  });
  const foot = document.createElement("tfoot");
  const fr = document.createElement("tr");
  fr.append(td(""), td("total", "attr"));
  for (let i = 1; i < t.group.length; i++) fr.append(td(""));
  fr.append(td(rate(t.metric, whole / t.seconds), "num"), td(total(t.metric, whole), "num"), td(""), td(count(t.totals.flows), "num"),
    td(bytes(t.totals.bytes_out), "num"), td(bytes(t.totals.bytes_in), "num"), td(count(t.totals.packets_out), "num"),
    td(count(t.totals.packets_in), "num"));
  foot.append(fr);
  table.replaceChildren(head, body, foot);
  table.dataset.rows = String(t.rows.length);
}

/** renderLive fills table with live flow records (docs/record.md). */
export function renderLive(table: HTMLTableElement, recs: Record<string, unknown>[]): void {
  const cols: [string, string, (r: Record<string, unknown>) => string][] = [
    ["src_ip", "", (r) => String(r.src_ip ?? "")],
    ["sport", "num", (r) => String(r.src_port ?? "")],
    ["dst_ip", "", (r) => String(r.dst_ip ?? "")],
    ["dport", "num", (r) => String(r.dst_port ?? "")],
    ["proto", "", (r) => (typeof r.proto === "number" ? protoName(r.proto) : String(r.proto ?? ""))],
    ["iface", "", (r) => String(r.iface ?? "")],
    ["pkts", "num", (r) => exact(Number(r.packets ?? 0))],
    ["bytes", "num", (r) => bytes(Number(r.bytes ?? 0))],
    ["rev pkts", "num", (r) => exact(Number(r.rev_packets ?? 0))],
    ["rev bytes", "num", (r) => bytes(Number(r.rev_bytes ?? 0))],
    ["since", "", (r) => String(r.start ?? "").replace("T", " ").replace(/\.\d+Z$/, "Z")],
  ];
  const head = document.createElement("thead");
  const hr = document.createElement("tr");
  for (const [name, cls] of cols) hr.append(th(name, cls));
  head.append(hr);
  const body = document.createElement("tbody");
  for (const r of recs) {
    const tr = document.createElement("tr");
    for (const [, cls, f] of cols) tr.append(td(f(r), cls));
    body.append(tr);
  }
  table.replaceChildren(head, body);
  table.dataset.rows = String(recs.length);
}
