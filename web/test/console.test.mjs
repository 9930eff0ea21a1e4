// Browser test of weir's console: Debian's Chromium, headless, driven by
// playwright-core, against a running 'weir serve'. Run by web/browser_test.go:
//
//   WEIR_URL=http://127.0.0.1:PORT WEIR_EMPTY_URL=http://127.0.0.1:PORT2 WEIR_TOP_ALL=10.0.0.0 WEIR_TOP_DAY=10.0.0.0 \
//   WEIR_HOSTILE_URL=http://127.0.0.1:PORT3 WEIR_HOSTILE_NAME='<img ...>' \
//   WEIR_FROM=... WEIR_TO=... WEIR_ARTIFACTS=build/console node test/console.test.mjs
//
// Prints "ok NAME" per check, "RESULT {json}" with the timings, and exits
// non-zero on the first failure. Every wait is bounded.
import { mkdtempSync, rmSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const base = env("WEIR_URL"), topAll = env("WEIR_TOP_ALL"), topDay = env("WEIR_TOP_DAY");
const emptyURL = env("WEIR_EMPTY_URL"), hostileURL = env("WEIR_HOSTILE_URL"), hostileName = env("WEIR_HOSTILE_NAME");
const from = env("WEIR_FROM"), to = env("WEIR_TO"), artifacts = env("WEIR_ARTIFACTS");
const wait = { timeout: 90000 }; // generous: CI machines are loaded
mkdirSync(artifacts, { recursive: true });

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

const profile = mkdtempSync(join(tmpdir(), "weir-chromium-"));
const ctx = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
  viewport: { width: 1400, height: 1300 },
  colorScheme: "light",
  timezoneId: "Europe/Paris", // the console shows UTC whatever the browser's zone
});
const errors = [];
const results = {};
try {
  const page = await ctx.newPage();
  const watch = (p) => {
    p.on("console", (m) => m.type() === "error" && errors.push(`console: ${m.text()}`));
    p.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
    p.on("requestfailed", (r) => errors.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  };
  watch(page);
  const ready = (p) => p.waitForFunction(() => document.body.dataset.state === "ready", null, wait);
  const rows = (p) => p.$$eval("#table tbody tr", (trs) => trs.map((tr) => [...tr.querySelectorAll("td.attr")].map((td) => td.textContent).join(" ")));
  const canvasInk = (p, sel) => p.$eval(`${sel} canvas`, (c) => {
    // Pixels drawn in a series colour (saturated), not axis grey or background.
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) {
      const [r, g, b, a] = [d[i], d[i + 1], d[i + 2], d[i + 3]];
      if (a > 200 && Math.max(r, g, b) - Math.min(r, g, b) > 60) n++;
    }
    return n;
  });

  // 1. The default view: loads without errors, opens on the stored data, shows the top talker.
  const t0 = Date.now();
  await page.goto(base + "/", wait);
  await ready(page);
  results.load_wall_ms = Date.now() - t0;
  // Navigation start to the page's marks: the table drawn, the chart drawn (with the table: the first
  // useful paint), everything (the Sankey too).
  const marks = await page.evaluate(() => Object.fromEntries(["weir-table", "weir-chart", "weir-ready"].map(
    (n) => [n, performance.getEntriesByName(n)[0]?.startTime])));
  check(marks["weir-table"] > 0 && marks["weir-chart"] > 0 && marks["weir-ready"] > 0, `performance marks missing: ${JSON.stringify(marks)}`);
  results.first_table_ms = Math.round(marks["weir-table"]);
  results.first_paint_ms = Math.round(Math.max(marks["weir-table"], marks["weir-chart"]));
  results.ready_ms = Math.round(marks["weir-ready"]);
  // weir serve without a token puts meta into the page: its first request is the view's query, and no /api/v1/meta.
  const asked = await page.evaluate(() => performance.getEntriesByType("resource").map((r) => new URL(r.name).pathname).filter((p) => p.startsWith("/api/")));
  check(asked[0] === "/api/v1/topseries" && !asked.includes("/api/v1/meta"), `the page asked ${asked.join(", ")}; meta should be in the page`);
  let top = await rows(page);
  check(top.length === 10, `default view: ${top.length} rows, want 10`);
  check(top[0] === topAll, `default view: top talker ${top[0]}, the CLI says ${topAll}`);
  check(Number(await page.getAttribute("#chart", "data-points")) > 100, "the chart got no points");
  // The store ends at 00:04 on Jan 2 and the view at 01:00: the lines stop at the last stored bin,
  // they do not drop to zero after it (nor start before the first).
  const meta = await page.evaluate(() => fetch("/api/v1/meta").then((r) => r.json()));
  const [drawnFirst, drawnLast] = [Number(await page.getAttribute("#chart", "data-first")), Number(await page.getAttribute("#chart", "data-last"))];
  check(drawnLast <= Date.parse(meta.last) && drawnLast > Date.parse(meta.last) - 3600e3,
    `the chart draws up to ${new Date(drawnLast).toISOString()}, the store ends at ${meta.last}`);
  check(drawnFirst >= Date.parse(meta.first) - 3600e3, `the chart draws from ${new Date(drawnFirst).toISOString()}, the store starts at ${meta.first}`);
  const ink = await canvasInk(page, "#chart");
  check(ink > 5000, `the chart drew ${ink} coloured pixels`);
  // Bytes tick at binary steps, each label a whole number of one unit, evenly spaced (not 977 KiB/s, 1.91 MiB/s).
  const yticks = (await page.getAttribute("#chart", "data-yticks")).split("|");
  const tick = yticks.map((l) => /^([\d,]+) (B|KiB|MiB|GiB|TiB)\/s$/.exec(l));
  check(yticks.length >= 3 && tick.every((m) => m !== null && m[2] === tick[0][2]), `the byte axis is labelled ${yticks.join(", ")}`);
  const steps = tick.slice(1).map((m, i) => parseInt(m[1].replaceAll(",", ""), 10) - parseInt(tick[i][1].replaceAll(",", ""), 10));
  check(steps.every((d) => d === steps[0] && d > 0), `the byte axis' ticks ${yticks.join(", ")} are not evenly spaced`);
  // The values uPlot holds are the API's: with Other shown, the stack's top in each bin is the bin's total, so their
  // sum over the bins is the sum of the totals the server answers for the page's own request.
  const held = await page.evaluate(async () => {
    const req = new URL(performance.getEntriesByType("resource").find((e) => e.name.includes("/api/v1/topseries?")).name);
    const ans = await fetch(req).then((r) => r.json());
    const step = parseInt(req.searchParams.get("resolution"), 10);
    return { api: ans.totals.rows.reduce((s, r) => s + (r.bytes_in + r.bytes_out) / step, 0), chart: Number(document.querySelector("#chart").dataset.total) };
  });
  check(held.api > 0 && Math.abs(held.chart - held.api) <= 1e-9 * held.api, `the chart holds ${held.chart} bytes/s over its bins, the API's totals ${held.api}`);
  // Hover: the tooltip shows the bin's time and the values of the series under the cursor, largest first, named
  // as in the table (or Other).
  const over = await page.$("#chart .u-over");
  const box = await over.boundingBox();
  await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2);
  await page.waitForSelector("#chart .chart-tip:not([hidden])", wait);
  const tip = await page.$eval("#chart .chart-tip", (t) => ({
    title: t.querySelector(".tip-title").textContent,
    names: [...t.querySelectorAll(".tip-name")].map((n) => n.textContent),
    values: [...t.querySelectorAll(".tip-value")].map((n) => n.textContent),
  }));
  check(/^2026-01-0[12] \d\d:\d0:00Z$/.test(tip.title), `tooltip title ${tip.title}`);
  check(tip.names.length > 0 && tip.names.every((n) => n === "Other" || top.includes(n)), `tooltip names ${tip.names} not in the table ${top}`);
  check(tip.values.every((v) => /\d/.test(v)), `tooltip values ${tip.values}`);
  await page.screenshot({ path: join(artifacts, "console-tooltip.png"), clip: { x: box.x - 80, y: box.y - 20, width: box.width + 100, height: box.height + 60 } });
  await page.mouse.move(box.x + box.width / 2, box.y - 60); // off the chart: the tooltip goes
  await page.waitForSelector("#chart .chart-tip[hidden]", { ...wait, state: "attached" });
  check(Number(await page.getAttribute("#sankey", "data-links")) > 5, "the Sankey got no links");
  check((await canvasInk(page, "#sankey")) > 2000, "the Sankey drew nothing");
  check(await page.isHidden("#node-wrap"), "a node selector without nodes");
  check((await page.textContent("#notice")).includes("latest flow"), "no notice about the stored span");
  await page.screenshot({ path: join(artifacts, "console-light.png"), fullPage: true });
  check(errors.length === 0, `console errors on load:\n${errors.join("\n")}`);
  console.log("ok default view", JSON.stringify(results));

  // 2. A time range of the shared kind (absolute): the CLI's top talker of that day.
  await page.goto(`${base}/?from=${from}&to=${to}`, wait);
  await ready(page);
  top = await rows(page);
  check(top[0] === topDay, `range ${from}..${to}: top talker ${top[0]}, the CLI says ${topDay}`);
  const chartBefore = await page.$eval("#chart canvas", (c) => c.toDataURL());
  console.log("ok time range");

  // 3. Completion of attribute names, then a filter that changes table and chart.
  await page.keyboard.press("/");
  check(await page.evaluate(() => document.activeElement?.id === "filter"), "/ does not focus the filter");
  await page.keyboard.type("dpo");
  await page.waitForSelector("#filter-list li", wait);
  check((await page.textContent("#filter-list li")) === "dport", "completion does not offer dport");
  await page.keyboard.press("Tab");
  check((await page.inputValue("#filter")) === "dport ", `completion wrote ${await page.inputValue("#filter")}`);
  await page.keyboard.type("= 53");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => location.search.includes("filter="), null, wait);
  await ready(page);
  const filtered = await rows(page);
  check(filtered.join() !== top.join(), "the filter did not change the table");
  const chartAfter = await page.$eval("#chart canvas", (c) => c.toDataURL());
  check(chartAfter !== chartBefore, "the filter did not change the chart");
  check(Number(await page.getAttribute("#chart", "data-points")) > 10, "the filtered chart is empty");
  console.log("ok filter");

  check(errors.length === 0, `console errors:\n${errors.join("\n")}`);

  // 4. A mistake: the server's message under the bad token (Chromium logs the 400 it answers).
  await page.fill("#filter", "dport = 53 and dpor = 80");
  await page.press("#filter", "Enter");
  await page.waitForSelector("#filter-error:not([hidden])", wait);
  check((await page.textContent("#filter-error mark")) === "dpor", "the bad token is not marked");
  check((await page.textContent("#filter-error .carets")).trim() === "^^^^", "no carets under the bad token");
  check((await page.textContent("#filter-error .msg")).includes('did you mean "dport"'), "the message is missing");
  check((await page.getAttribute("#filter", "aria-invalid")) === "true", "the input is not marked invalid");
  await page.screenshot({ path: join(artifacts, "console-filter-error.png"), clip: { x: 0, y: 0, width: 1400, height: 300 } });
  console.log("ok filter error");
  const unexpected = (allowed) => errors.splice(0).filter((e) => !e.includes(`status of ${allowed}`));
  const bad = unexpected(400);
  check(bad.length === 0, `console errors:\n${bad.join("\n")}`);

  // 5. Drill-down by keyboard: a row, Enter, its condition added.
  await page.fill("#filter", "");
  await page.press("#filter", "Enter");
  await ready(page);
  await page.focus("#table tbody tr");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => document.querySelector("#filter").value.startsWith("sip = "), null, wait);
  await ready(page);
  const drilled = await rows(page);
  check(drilled.length === 1 && drilled[0] === topDay, `drill-down rows ${drilled}`);
  console.log("ok drill-down");

  // 6. Change the view, then reopen its URL in a new page: the same view.
  await page.fill("#filter", "proto udp");
  await page.press("#filter", "Enter");
  await ready(page);
  await page.selectOption("#group1", "dip");
  await ready(page);
  await page.selectOption("#metric", "packets");
  await ready(page);
  await page.selectOption("#limit", "5");
  await ready(page);
  await page.selectOption("#sankey-b", "dport");
  await ready(page);
  await page.uncheck("#other");
  await ready(page);
  check(Number(await page.getAttribute("#sankey", "data-links")) > 0, "the dip → dport Sankey is empty");
  const shared = page.url();
  const tableText = await page.textContent("#table");
  const page2 = await ctx.newPage();
  watch(page2);
  await page2.goto(shared, wait);
  await ready(page2);
  check((await page2.textContent("#table")) === tableText, "the shared URL shows another table");
  for (const [sel, want] of [["#group1", "dip"], ["#metric", "packets"], ["#limit", "5"], ["#sankey-b", "dport"], ["#range", ""]]) {
    check((await page2.inputValue(sel)) === want, `shared URL: ${sel} is ${await page2.inputValue(sel)}, want ${want}`);
  }
  check((await page2.inputValue("#filter")) === "proto udp", "shared URL: filter lost");
  check(!(await page2.isChecked("#other")), "shared URL: Other is shown again");
  check(Number(await page2.getAttribute("#chart", "data-series")) === 5, "shared URL: the chart has Other, or not the top 5");
  await page2.close();
  console.log("ok shared URL");

  // 7. Lines instead of stacked areas: other pixels, the same values held; then the dark theme, and the live tab of a
  // server without live flows.
  const [stackedPx, stackedTotal] = [await page.$eval("#chart canvas", (c) => c.toDataURL()), Number(await page.getAttribute("#chart", "data-total"))];
  await page.selectOption("#chart-type", "lines");
  await ready(page);
  check((await page.$eval("#chart canvas", (c) => c.toDataURL())) !== stackedPx, "lines: the chart did not change");
  const linesTotal = Number(await page.getAttribute("#chart", "data-total"));
  check(stackedTotal > 0 && Math.abs(linesTotal - stackedTotal) <= 1e-9 * stackedTotal, `lines hold ${linesTotal}, stacked ${stackedTotal}`);
  check((await canvasInk(page, "#chart")) > 300, "lines: nothing drawn");
  // The chart follows its panel's width.
  const wideCanvas = await page.$eval("#chart canvas", (c) => c.getBoundingClientRect().width);
  await page.setViewportSize({ width: 1000, height: 1300 });
  await page.waitForFunction((w) => document.querySelector("#chart canvas").getBoundingClientRect().width < w - 300, wideCanvas, wait);
  await page.setViewportSize({ width: 1400, height: 1300 });
  await page.waitForFunction((w) => Math.abs(document.querySelector("#chart canvas").getBoundingClientRect().width - w) < 2, wideCanvas, wait);
  await page.click("#theme");
  await ready(page);
  check((await page.evaluate(() => document.documentElement.dataset.theme)) === "dark", "no dark theme");
  await page.screenshot({ path: join(artifacts, "console-dark.png"), fullPage: true });
  await page.click("#tab-live");
  await page.waitForFunction(() => document.querySelector("#live-msg").textContent !== "", null, wait);
  check((await page.textContent("#live-msg")).includes("no live flows"), "the live tab does not say why it is empty");
  console.log("ok theme and live tab");
  const left = unexpected(404); // the live tab's answer: no live flows
  check(left.length === 0, `console errors:\n${left.join("\n")}`);

  // 8. A new user's first look: weir serve on a store nothing has written to yet says so.
  const page3 = await ctx.newPage();
  watch(page3);
  await page3.goto(emptyURL + "/", wait);
  await ready(page3);
  check((await page3.textContent("#notice")).includes("The store holds no flows yet"), `empty store: notice ${await page3.textContent("#notice")}`);
  check((await page3.textContent("#span-info")) === "store: empty", "empty store: the header does not say empty");
  await page3.screenshot({ path: join(artifacts, "console-empty.png") });
  await page3.close();
  check(errors.length === 0, `console errors:\n${errors.join("\n")}`);
  console.log("ok empty store");

  // 9. Names from the network are text: a store whose interface is named like markup, grouped by interface.
  const page4 = await ctx.newPage();
  watch(page4);
  await page4.goto(hostileURL + "/?group=iface", wait);
  await ready(page4);
  check((await rows(page4)).includes(hostileName), `hostile name: table rows ${await rows(page4)}`);
  check((await page4.$$eval("#iface option", (os) => os.map((o) => o.textContent))).includes(hostileName), "hostile name: not in the interface list");
  const hbox = await (await page4.$("#chart .u-over")).boundingBox();
  await page4.mouse.move(hbox.x + hbox.width / 2, hbox.y + hbox.height / 2);
  await page4.waitForSelector("#chart .chart-tip:not([hidden])", wait);
  const tipNames = await page4.$$eval("#chart .chart-tip .tip-name", (ns) => ns.map((n) => n.textContent));
  check(tipNames.includes(hostileName), `hostile name: tooltip shows ${tipNames}`);
  check(await page4.evaluate(() => document.querySelectorAll("img").length === 0 && window.__pwned === undefined), "hostile name: parsed as markup");
  await page4.close();
  check(errors.length === 0, `console errors:\n${errors.join("\n")}`);
  console.log("ok names are text");
  console.log("RESULT " + JSON.stringify(results));
} finally {
  await ctx.close();
  rmSync(profile, { recursive: true, force: true });
}
