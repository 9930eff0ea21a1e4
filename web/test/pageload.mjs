// Page load of weir's console, measured in Debian's Chromium (headless,
// playwright-core): WEIR_LOADS first visits of WEIR_URL, each in a fresh
// browser context (empty cache, as a first visit), timed by the page's own
// performance marks from navigation start: the top-N table drawn
// (weir-table), the chart drawn (weir-chart; with the table: the first
// useful paint), everything (weir-ready, the Sankey too). Also the
// browser's own timing of the top-N request (Resource Timing; since
// /api/v1/topseries it also carries the series and the totals per bin). Run by
// BenchmarkConsoleDay (web/bench_test.go); prints each load's request
// waterfall (start, end, the server's own time from Server-Timing) and one
// "LOAD {json}" line per load, with the first paint split into the time
// the server was working on any of the page's requests before it and the
// rest (the browser: loading, parsing and running the scripts, drawing,
// and loopback), and the renderer's main thread CPU time up to the first
// paint and up to ready (DevTools' Performance metrics), and exits non-zero on a failure or a console error. Every wait
// is bounded.
import { chromium } from "playwright-core";

const base = process.env.WEIR_URL, loads = Number(process.env.WEIR_LOADS || "1");
if (!base || !(loads >= 1)) throw new Error("set WEIR_URL and WEIR_LOADS");
const wait = { timeout: 300000 }; // generous: a loaded machine, a day of rows
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
});
try {
  for (let i = 0; i < loads; i++) {
    const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    const page = await ctx.newPage();
    const errors = [];
    page.on("console", (m) => m.type() === "error" && errors.push(`console: ${m.text()}`));
    page.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
    // The renderer's main thread CPU time (DevTools' Performance metrics in thread ticks: what the page's scripts,
    // style, layout and paint cost, without the time the thread waited for the network or for a core).
    const cdp = await ctx.newCDPSession(page);
    await cdp.send("Performance.enable", { timeDomain: "threadTicks" });
    const cpu = async () => {
      const ms = Object.fromEntries((await cdp.send("Performance.getMetrics")).metrics.map((x) => [x.name, x.value * 1000]));
      return { task: ms.TaskDuration, script: ms.ScriptDuration };
    };
    await page.goto(base + "/", wait);
    await page.waitForFunction(() => performance.getEntriesByName("weir-chart").length > 0, null, { ...wait, polling: 5 });
    const cpuPaint = await cpu(); // polled: up to a few ms of work after the mark may be in it
    await page.waitForFunction(() => document.body.dataset.state === "ready", null, wait);
    const cpuReady = await cpu();
    const m = await page.evaluate(() => {
      const at = (n) => performance.getEntriesByName(n)[0]?.startTime;
      const res = performance.getEntriesByType("resource");
      // The top-N table's request: /api/v1/topseries (the top, their series and the totals per bin in one answer), or,
      // on a console from before it, the first /api/v1/query without a time resolution.
      const q = res.find((r) => r.name.includes("/api/v1/topseries?")) ?? res.find((r) => r.name.includes("/api/v1/query?") && !r.name.includes("resolution="));
      // The waterfall: each request's start and end (ms from navigation start) and the server's own time (Server-Timing).
      const waterfall = res.map((r) => ({ path: new URL(r.name).pathname + (new URL(r.name).searchParams.get("group") ? `?group=${new URL(r.name).searchParams.get("group")}` : "") +
        (r.name.includes("resolution=") ? "&resolution" : ""), start: r.startTime, end: r.responseEnd,
        server: r.serverTiming.reduce((s, t) => s + t.duration, 0) }));
      return { table: at("weir-table"), chart: at("weir-chart"), ready: at("weir-ready"), top_query: q?.duration, rows: document.querySelectorAll("#table tbody tr").length, waterfall };
    });
    await ctx.close();
    if (errors.length > 0) throw new Error(`console errors:\n${errors.join("\n")}`);
    if (!(m.table > 0 && m.chart > 0 && m.ready > 0 && m.top_query > 0) || m.rows === 0) throw new Error(`load ${i}: marks or rows missing: ${JSON.stringify(m)}`);
    const r = (v) => Math.round(v * 10) / 10;
    const paint = Math.max(m.table, m.chart);
    // The server's share of the first paint: the time before it during which the server worked on at least one of
    // the page's requests (the union of [end - Server-Timing total, end] over them); the rest is the browser's.
    const spans = m.waterfall.filter((w) => w.server > 0 && w.end - w.server < paint)
      .map((w) => [w.end - w.server, Math.min(w.end, paint)]).sort((a, b) => a[0] - b[0]);
    let server = 0, upTo = 0;
    for (const [a, b] of spans) {
      if (b > upTo) server += b - Math.max(a, upTo);
      upTo = Math.max(upTo, b);
    }
    for (const w of m.waterfall) console.log(`  ${r(w.start).toFixed(0).padStart(6)} → ${r(w.end).toFixed(0).padStart(6)} ms  server ${r(w.server).toFixed(1).padStart(7)} ms  ${w.path}`);
    console.log("LOAD " + JSON.stringify({ first_paint_ms: r(paint), table_ms: r(m.table), ready_ms: r(m.ready), top_query_ms: r(m.top_query),
      paint_server_ms: r(server), paint_browser_ms: r(paint - server), paint_cpu_ms: r(cpuPaint.task), paint_script_cpu_ms: r(cpuPaint.script),
      ready_cpu_ms: r(cpuReady.task) }));
  }
} finally {
  await browser.close();
}
