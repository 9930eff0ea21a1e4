// The filter bar: the query language with completion of attribute names
// and, on a mistake, the server's message with carets under the bad token.

import { ApiErrorBody } from "./api";
import { charIndex } from "./format";

const operators = ["and", "or", "not"];

export class FilterBar {
  private input: HTMLInputElement;
  private list: HTMLUListElement;
  private error: HTMLElement;
  private names: string[] = [];
  private items: string[] = [];
  private active = -1;
  private wordStart = 0;

  constructor(root: HTMLElement, private onApply: (text: string) => void) {
    this.input = root.querySelector<HTMLInputElement>("#filter")!;
    this.list = root.querySelector<HTMLUListElement>("#filter-list")!;
    this.error = root.querySelector<HTMLElement>("#filter-error")!;
    this.input.addEventListener("input", () => this.complete());
    this.input.addEventListener("keydown", (e) => this.key(e));
    this.input.addEventListener("blur", () => setTimeout(() => this.close(), 150));
    root.querySelector<HTMLButtonElement>("#filter-apply")!.addEventListener("click", () => this.apply());
    this.list.addEventListener("mousedown", (e) => {
      const li = (e.target as HTMLElement).closest("li");
      if (li) {
        e.preventDefault();
        this.accept(Number(li.dataset.index));
      }
    });
  }

  /** setNames gives the attribute names the completion offers. */
  setNames(names: string[]): void {
    this.names = names;
  }

  get value(): string {
    return this.input.value;
  }

  set value(s: string) {
    this.input.value = s;
  }

  apply(): void {
    this.close();
    this.onApply(this.input.value.trim());
  }

  /** showError puts the server's message under the bad token, or clears it (null). */
  showError(e: ApiErrorBody | null): void {
    this.error.replaceChildren();
    if (!e) {
      this.error.hidden = true;
      this.input.removeAttribute("aria-invalid");
      return;
    }
    this.input.setAttribute("aria-invalid", "true");
    const msg = document.createElement("div");
    msg.className = "msg";
    msg.textContent = e.message.replace(/^condition: /, "");
    if (e.input !== undefined && e.pos !== undefined) {
      const text = e.input;
      const from = charIndex(text, e.pos);
      const to = Math.max(from + 1, charIndex(text, e.end ?? e.pos));
      const pre = document.createElement("pre");
      pre.className = "caret";
      const before = document.createElement("span");
      before.textContent = text.slice(0, from);
      const bad = document.createElement("mark");
      bad.textContent = text.slice(from, to) || " ";
      const after = document.createElement("span");
      after.textContent = text.slice(to);
      const carets = document.createElement("span");
      carets.className = "carets";
      carets.textContent = "\n" + " ".repeat([...text.slice(0, from)].length) + "^".repeat(Math.max(1, [...text.slice(from, to)].length));
      pre.append(before, bad, after, carets);
      this.error.append(pre);
      if (text === this.input.value) this.input.setSelectionRange(from, to);
    }
    this.error.append(msg);
    this.error.hidden = false;
  }

  private key(e: KeyboardEvent): void {
    const open = !this.list.hidden;
    switch (e.key) {
      case "ArrowDown":
      case "ArrowUp":
        if (!open) return;
        e.preventDefault();
        this.active = (this.active + (e.key === "ArrowDown" ? 1 : this.items.length - 1)) % this.items.length;
        this.render();
        break;
      case "Tab":
        if (open && this.items.length > 0) {
          e.preventDefault();
          this.accept(Math.max(0, this.active));
        }
        break;
      case "Enter":
        e.preventDefault();
        if (open && this.active >= 0) this.accept(this.active);
        else this.apply();
        break;
      case "Escape":
        if (open) {
          e.preventDefault();
          this.close();
        }
        break;
    }
  }

  /** complete offers the attribute names starting with the word being typed, where an attribute may stand. */
  private complete(): void {
    const v = this.input.value;
    const caret = this.input.selectionStart ?? v.length;
    let start = caret;
    while (start > 0 && /[A-Za-z0-9_]/.test(v[start - 1])) start--;
    const word = v.slice(start, caret).toLowerCase();
    const before = v.slice(0, start).trimEnd();
    const prev = /(\S+)$/.exec(before)?.[1]?.toLowerCase() ?? "";
    const attrPlace = before === "" || prev.endsWith("(") || ["and", "or", "not", "&&", "||", "!"].includes(prev);
    if (word === "" || !attrPlace) {
      this.close();
      return;
    }
    this.wordStart = start;
    this.items = [...this.names, ...operators].filter((n) => n.startsWith(word) && n !== word).slice(0, 10);
    this.active = this.items.length > 0 ? 0 : -1;
    this.render();
  }

  private render(): void {
    this.list.replaceChildren(
      ...this.items.map((n, i) => {
        const li = document.createElement("li");
        li.id = `filter-opt-${i}`;
        li.setAttribute("role", "option");
        li.dataset.index = String(i);
        li.textContent = n;
        if (i === this.active) li.setAttribute("aria-selected", "true");
        return li;
      }),
    );
    this.list.hidden = this.items.length === 0;
    this.input.setAttribute("aria-expanded", String(!this.list.hidden));
    if (this.active >= 0) this.input.setAttribute("aria-activedescendant", `filter-opt-${this.active}`);
    else this.input.removeAttribute("aria-activedescendant");
  }

  private accept(i: number): void {
    const name = this.items[i];
    if (name === undefined) return;
    const v = this.input.value;
    const caret = this.input.selectionStart ?? v.length;
    const rest = v.slice(caret);
    const insert = name + (rest.startsWith(" ") ? "" : " ");
    this.input.value = v.slice(0, this.wordStart) + insert + rest;
    const pos = this.wordStart + insert.length;
    this.input.setSelectionRange(pos, pos);
    this.close();
    this.input.focus();
  }

  private close(): void {
    this.items = [];
    this.active = -1;
    this.list.hidden = true;
    this.input.setAttribute("aria-expanded", "false");
    this.input.removeAttribute("aria-activedescendant");
  }
}
