// The charts' tooltip, built as DOM nodes with textContent: no string from
// the API (series and node names come from the network) is ever parsed as
// HTML. Shared by the time chart (uPlot) and the Sankey (ECharts).

/** TipLine is one row of a tooltip: a colour dot, a name and a value. */
export interface TipLine {
  color: string;
  name: string;
  value: string;
}

/** tooltipBox builds a tooltip's content: a title and one row per line. */
export function tooltipBox(title: string, lines: TipLine[]): HTMLElement {
  const box = document.createElement("div");
  box.className = "tip";
  const h = document.createElement("div");
  h.className = "tip-title";
  h.textContent = title;
  box.append(h);
  for (const l of lines) {
    const row = document.createElement("div");
    row.className = "tip-row";
    const dot = document.createElement("span");
    dot.className = "dot";
    dot.style.background = l.color;
    const name = document.createElement("span");
    name.className = "tip-name";
    name.textContent = l.name;
    const val = document.createElement("span");
    val.className = "tip-value";
    val.textContent = l.value;
    row.append(dot, name, val);
    box.append(row);
  }
  return box;
}
