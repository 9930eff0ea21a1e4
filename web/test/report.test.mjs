// Browser test of the 'weir bench compare --html' report: Debian's Chromium,
// headless, driven by playwright-core. Run by web/report_browser_test.go:
//
//   WEIR_REPORT=/path/report.html WEIR_ARTIFACTS=build/console node test/report.test.mjs
//
// Prints "ok NAME" per check and exits non-zero on the first failure. Every
// wait is bounded.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { chromium } from "playwright-core";

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const file = env("WEIR_REPORT"), artifacts = env("WEIR_ARTIFACTS");
const wait = { timeout: 60000 }; // generous: CI machines are loaded

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

const profile = mkdtempSync(join(tmpdir(), "weir-chromium-"));
const ctx = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
  viewport: { width: 1200, height: 900 },
  colorScheme: "light",
});
const errors = [];
try {
  const page = await ctx.newPage();
  page.on("console", (m) => m.type() === "error" && errors.push(`console: ${m.text()}`));
  page.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
  page.on("requestfailed", (r) => errors.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  await page.goto(pathToFileURL(file).href, wait);

  // The look: what only the console's stylesheet defines. A colour the
  // stylesheet does not define resolves to nothing (a bar in black).
  const look = () => page.evaluate(() => {
    const css = (el, p) => getComputedStyle(el).getPropertyValue(p).trim();
    const root = document.documentElement;
    const probe = document.createElement("span");
    document.body.append(probe);
    const rgb = (c) => { probe.style.color = c; return getComputedStyle(probe).color; };
    const series = [0, 1, 2].map((i) => css(root, `--series-${i}`));
    const out = {
      theme: root.dataset.theme,
      consoleRules: [...document.styleSheets].find((s) => s.ownerNode?.id === "console-css")?.cssRules.length ?? 0,
      bg: getComputedStyle(document.body).backgroundColor, wantBg: rgb(css(root, "--bg")),
      font: getComputedStyle(document.body).fontFamily,
      series: series.map(rgb),
      throughputFills: [...document.querySelectorAll("#chart-throughput rect.bar")].map((r) => getComputedStyle(r).fill),
      latencyBars: [...document.querySelectorAll("#chart-latency rect.bar")].filter((r) => r.getBBox().height > 1).length,
      lineStrokes: [...document.querySelectorAll("#chart-timeline polyline.line")].map((l) => getComputedStyle(l).stroke),
      points: document.querySelectorAll("#chart-timeline circle.point").length,
      tickColour: getComputedStyle(document.querySelector("#chart-throughput text.tick")).fill, wantTick: rgb(css(root, "--muted")),
      rows: document.querySelectorAll("#comparison tbody tr.metric").length,
      panels: document.querySelectorAll(".panel").length,
    };
    probe.remove();
    return out;
  });
  let l = await look();
  check(l.consoleRules > 50, `the console's stylesheet has ${l.consoleRules} rules`);
  check(l.theme === "light", `theme ${l.theme}, want light (the system's)`);
  check(l.series.every((c) => c !== "" && c !== "rgb(0, 0, 0)") && new Set(l.series).size === 3, `series colours ${l.series}`);
  check(l.bg === l.wantBg && l.bg !== "rgba(0, 0, 0, 0)", `background ${l.bg}, the console's --bg is ${l.wantBg}`);
  check(l.font.includes("system-ui"), `font ${l.font}`);
  check(JSON.stringify(l.throughputFills) === JSON.stringify(l.series), `throughput bars ${l.throughputFills}, want the series colours ${l.series}`);
  check(l.latencyBars === 9, `latency chart: ${l.latencyBars} bars drawn, want 9`);
  check(JSON.stringify(l.lineStrokes) === JSON.stringify(l.series), `timeline lines ${l.lineStrokes}`);
  check(l.points === 60, `timeline: ${l.points} points, want 60`);
  check(l.tickColour === l.wantTick, `axis labels ${l.tickColour}, want the console's --muted ${l.wantTick}`);
  check(l.rows > 3 && l.panels === 5, `${l.rows} table rows, ${l.panels} panels`);
  await page.screenshot({ path: join(artifacts, "report-light.png"), fullPage: true });
  console.log("ok console look", JSON.stringify({ bg: l.bg, series: l.series }));

  // The console's dark theme, by keyboard.
  await page.focus("#theme");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => document.documentElement.dataset.theme === "dark", null, wait);
  const d = await look();
  check(d.bg === d.wantBg && d.bg !== l.bg, `dark background ${d.bg}, want ${d.wantBg} (light was ${l.bg})`);
  const [r, g, b] = d.bg.match(/\d+/g).map(Number);
  check(r + g + b < 3 * 60, `the dark background ${d.bg} is not dark`);
  check((await page.getAttribute("#theme", "aria-pressed")) === "true", "the theme button is not pressed");
  await page.screenshot({ path: join(artifacts, "report-dark.png"), fullPage: true });
  console.log("ok dark theme");

  // The choice is kept, as in the console.
  // Chromium hands a file:// page's storage write to its browser process
  // asynchronously, and a reload under load can overtake it: the choice
  // must be stored, then seen after at most three reloads.
  await page.waitForFunction(() => localStorage.getItem("weir-theme") === "dark", null, wait);
  let kept = false;
  for (let i = 0; i < 3 && !kept; i++) {
    await page.reload(wait);
    kept = (await page.evaluate(() => document.documentElement.dataset.theme)) === "dark";
  }
  check(kept, "the dark theme is not kept on reload");
  console.log("ok theme kept");
  check(errors.length === 0, `console errors:\n${errors.join("\n")}`);
} finally {
  await ctx.close();
  rmSync(profile, { recursive: true, force: true });
}
