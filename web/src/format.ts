// Human units, names and the query language's quoting, as weir's CLI
// writes them.

/** en formats numbers with thousands separators: one formatter (toLocaleString builds one per call, slow on a cold page). */
const en = new Intl.NumberFormat("en-US");

const binary = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
const decimal = ["k", "M", "G", "T", "P", "E"];

/** bytes renders n bytes as the CLI does: 1.23 MiB. */
export function bytes(n: number): string {
  if (n < 1024) return `${Math.round(n)} B`;
  let f = n;
  let i = -1;
  while (f >= 1024 && i < binary.length - 1) {
    f /= 1024;
    i++;
  }
  return `${f < 10 ? f.toFixed(2) : f < 100 ? f.toFixed(1) : f.toFixed(0)} ${binary[i]}`;
}

/** count renders a count with SI prefixes above 10,000: 12.3 k. */
export function count(n: number): string {
  if (n < 10000) return n >= 100 || Number.isInteger(n) ? en.format(Math.round(n)) : n.toFixed(n < 10 ? 2 : 1);
  let f = n;
  let i = -1;
  while (f >= 1000 && i < decimal.length - 1) {
    f /= 1000;
    i++;
  }
  return `${f < 10 ? f.toFixed(2) : f < 100 ? f.toFixed(1) : f.toFixed(0)} ${decimal[i]}`;
}

/** exact renders an integer with thousands separators: 1,234,567. */
export function exact(n: number): string {
  return en.format(n);
}

/** rate renders a per-second value of metric m. */
export function rate(m: Metric, v: number): string {
  return m === "bytes" ? `${bytes(v)}/s` : `${count(v)}/s`;
}

/** total renders a total of metric m. */
export function total(m: Metric, v: number): string {
  return m === "bytes" ? bytes(v) : count(v);
}

export type Metric = "bytes" | "packets" | "flows";
export type Direction = "sum" | "out" | "in";

const protoNames: Record<number, string> = {
  1: "icmp", 2: "igmp", 6: "tcp", 17: "udp", 41: "ipv6", 47: "gre", 50: "esp", 51: "ah", 58: "icmpv6", 89: "ospf", 112: "vrrp", 132: "sctp",
};

/** protoName is a protocol's name, or its number. */
export function protoName(p: number): string {
  return protoNames[p] ?? String(p);
}

/** cell renders attribute a's value from a result row as text. */
export function cell(a: string, v: unknown): string {
  if (v === null || v === undefined) return "–";
  if (a === "proto" && typeof v === "number") return protoName(v);
  if (a === "time" && typeof v === "string") return new Date(v).toISOString().replace(".000Z", "Z");
  if (v === "") return "–";
  return String(v);
}

/** isWordChar: bytes the query language reads as part of a bare word. */
function isWordChar(c: string): boolean {
  return /[A-Za-z0-9._:/\-+%@]/.test(c) || c.charCodeAt(0) >= 0x80;
}

/** quote renders a value so the query language reads it back as one word. */
export function quote(v: string): string {
  const plain = v !== "" && [...v].every(isWordChar) && !["and", "or", "not"].includes(v.toLowerCase());
  if (plain) return v;
  return `"${v.replace(/["\\]/g, (c) => "\\" + c)}"`;
}

/** condValue renders a row's value of attribute a for a condition. */
export function condValue(a: string, v: unknown): string {
  if (v === null || v === undefined) return '""'; // a NAT attribute of a record not translated
  if (typeof v === "number") return String(v);
  void a;
  return quote(String(v));
}

/** charIndex converts a UTF-8 byte offset in s to a string index. */
export function charIndex(s: string, byteOffset: number): number {
  const enc = new TextEncoder();
  let bytesSoFar = 0;
  let i = 0;
  for (const ch of s) {
    if (bytesSoFar >= byteOffset) return i;
    bytesSoFar += enc.encode(ch).length;
    i += ch.length;
  }
  return s.length;
}

/** durationText renders seconds as 15m, 6h, 7d. */
export function durationText(sec: number): string {
  if (sec % 86400 === 0) return `${sec / 86400}d`;
  if (sec % 3600 === 0) return `${sec / 3600}h`;
  if (sec % 60 === 0) return `${sec / 60}m`;
  return `${sec}s`;
}

/** parseDuration reads 15m, 6h, 7d, 90s into seconds (NaN when not one). */
export function parseDuration(s: string): number {
  const m = /^(\d+)([smhd])$/.exec(s.trim());
  if (!m) return NaN;
  return Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86400 }[m[2] as "s" | "m" | "h" | "d"];
}
