// Builds the console: src/ → dist/ (app.js and its chunks, app.css, index.html, the
// bundled libraries' licences) and dist/manifest.json, which records the
// SHA-256 of the inputs (src/, package.json, package-lock.json,
// tsconfig.json, this file) so a Go test (web/manifest_test.go) can tell,
// without Node, that the committed build matches the sources.
//
//   npm ci && node build.mjs          (make web)
import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const root = fileURLToPath(new URL(".", import.meta.url));
const dist = join(root, "dist");

/** inputs lists the files the build depends on, relative to web/, sorted. */
function inputs() {
  const out = ["package.json", "package-lock.json", "tsconfig.json", "build.mjs"];
  const walk = (dir) => {
    for (const name of readdirSync(dir)) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else out.push(relative(root, p).split(sep).join("/"));
    }
  };
  walk(join(root, "src"));
  return out.sort();
}

/** inputsHash: SHA-256 over each input as "path\0length\0content" (web/manifest_test.go computes the same). */
function inputsHash() {
  const h = createHash("sha256");
  for (const p of inputs()) {
    const b = readFileSync(join(root, p));
    h.update(`${p}\0${b.length}\0`);
    h.update(b);
  }
  return h.digest("hex");
}

rmSync(dist, { recursive: true, force: true });
mkdirSync(dist);
await esbuild.build({
  absWorkingDir: root,
  entryPoints: { app: "src/main.ts" },
  outdir: "dist",
  bundle: true,
  splitting: true, // sankey.ts (ECharts) is imported dynamically: its own chunk, fetched once the first paint is done
  chunkNames: "[name]-[hash]",
  minify: true,
  format: "esm",
  target: "es2020",
  legalComments: "none", // the licences are in THIRD_PARTY_LICENSES.txt
  logLevel: "warning",
});
await esbuild.build({
  absWorkingDir: root,
  entryPoints: { app: "src/style.css" },
  outdir: "dist",
  bundle: true,
  minify: true,
  logLevel: "warning",
});
// The chunks app.js imports statically are fetched beside it (modulepreload), not after it has arrived: one
// round trip fewer before the console's first request.
const staticChunks = [...readFileSync(join(dist, "app.js"), "utf8").matchAll(/(?:^|;)import\{[^}]*\}from"\.\/(chunk-[A-Z0-9]+\.js)"/g)].map((m) => m[1]);
// Not the Sankey's chunk (ECharts, imported dynamically): the first paint needs neither its download nor its compile.
const html = readFileSync(join(root, "src/index.html"), "utf8");
const preload = staticChunks.map((c) => `<link rel="modulepreload" href="${c}">\n`).join("");
if (!html.includes('<script type="module" src="app.js" blocking="render"></script>\n')) throw new Error("index.html: no app.js script tag to preload beside");
writeFileSync(join(dist, "index.html"), html.replace('<script type="module" src="app.js" blocking="render"></script>\n', (t) => t + preload));
let licences = "weir's console bundles these libraries (app.js and its chunks):\n";
for (const [name, file] of [["uplot", "LICENSE"], ["echarts", "LICENSE"], ["echarts", "NOTICE"], ["zrender", "LICENSE"], ["tslib", "LICENSE.txt"]]) {
  const pkg = JSON.parse(readFileSync(join(root, "node_modules", name, "package.json"), "utf8"));
  licences += `\n==== ${name} ${pkg.version} (${pkg.license}) ====\n\n` + readFileSync(join(root, "node_modules", name, file), "utf8");
}
writeFileSync(join(dist, "THIRD_PARTY_LICENSES.txt"), licences);

const files = {};
for (const name of readdirSync(dist).sort()) {
  files[name] = createHash("sha256").update(readFileSync(join(dist, name))).digest("hex");
}
const manifest = { inputs_sha256: inputsHash(), esbuild: esbuild.version, files };
writeFileSync(join(dist, "manifest.json"), JSON.stringify(manifest, null, 2) + "\n");
console.log(`web: built ${Object.keys(files).length} files into dist/ (inputs ${manifest.inputs_sha256.slice(0, 12)})`);
