// The series colours of style.css, read once: shared by the table (main.ts),
// the time chart (timechart.ts) and the Sankey (sankey.ts).

export function cssVar(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

/** seriesCount is how many --series-N colours style.css defines. */
export const seriesCount = 20;
let colours: string[] | null = null;

/**
 * palette returns the series colours, --series-0 … --series-19 of style.css (one set for the console and
 * the bench compare report, which embeds the stylesheet). It throws if the stylesheet did not define them,
 * rather than draw every series in no colour.
 */
export function palette(): string[] {
  if (colours === null) {
    const c = Array.from({ length: seriesCount }, (_, i) => cssVar(`--series-${i}`));
    if (c.some((x) => x === "")) throw new Error("style.css defines no --series-N colours: the stylesheet did not load");
    colours = c;
  }
  return colours;
}

/** otherColor is the grey of "Other" (--series-other). */
export function otherColor(): string {
  return cssVar("--series-other");
}
