// The HTTP API v1 client: JSON answers, JSON errors, the bearer token.

/** ApiError is the body of every error answer (docs/api.md). */
export interface ApiErrorBody {
  status: number;
  code: string;
  message: string;
  param?: string;
  input?: string;
  pos?: number;
  end?: number;
  caret?: string;
}

export class ApiError extends Error {
  constructor(public body: ApiErrorBody) {
    super(body.message);
  }
}

export interface Counters {
  flows: number;
  packets_out: number;
  packets_in: number;
  bytes_out: number;
  bytes_in: number;
  drop_packets?: number;
  drop_bytes?: number;
}

export type Row = Counters & Record<string, unknown>;

export interface QueryResult {
  query: { group: string[]; condition: string; from?: string; to?: string; ifaces?: string[] };
  rows: Row[];
  totals: Counters;
  stats: { blocks: number; blocks_skipped: number; rows_scanned: number; rows_matched: number; groups: number; elapsed_ms: number; live_records: number };
}

/** TopSeries is /api/v1/topseries' answer: the top N, their series (null when the top is empty) and the totals per bin. */
export interface TopSeries {
  top: QueryResult;
  series: QueryResult | null;
  totals: QueryResult;
}

export interface IfaceSpan {
  iface: string;
  first: string;
  last: string;
  flows: number;
}

export interface Meta {
  version: string;
  backend: string;
  attributes: { group: string[]; condition: string[]; condition_names: string[]; presets: Record<string, string[]> };
  sort: string[];
  interfaces: IfaceSpan[];
  nodes: string[];
  first: string | null;
  last: string | null;
  live: boolean;
}

const tokenKey = "weir-token";

/** tokenRequired is called when the server asks for a token; it resolves when one was given. */
let askToken: () => Promise<void> = () => Promise.reject(new Error("a token is required"));

export function onTokenRequired(f: () => Promise<void>): void {
  askToken = f;
}

export function setToken(t: string): void {
  sessionStorage.setItem(tokenKey, t);
}

async function fetchOnce(path: string, params: URLSearchParams | undefined, signal?: AbortSignal): Promise<Response> {
  const headers: Record<string, string> = {};
  const tok = sessionStorage.getItem(tokenKey);
  if (tok) headers["Authorization"] = `Bearer ${tok}`;
  const url = params ? `${path}?${params.toString()}` : path;
  return fetch(url, { headers, signal, cache: "no-store" });
}

/** get fetches an API path; a 401 asks for the token once and retries. */
export async function get(path: string, params?: URLSearchParams, signal?: AbortSignal): Promise<Response> {
  let resp = await fetchOnce(path, params, signal);
  if (resp.status === 401) {
    await askToken();
    resp = await fetchOnce(path, params, signal);
  }
  if (!resp.ok) {
    let body: ApiErrorBody;
    try {
      body = (await resp.json()).error;
    } catch {
      body = { status: resp.status, code: "http", message: `${resp.status} ${resp.statusText}` };
    }
    throw new ApiError(body);
  }
  return resp;
}

export async function getJSON<T>(path: string, params?: URLSearchParams, signal?: AbortSignal): Promise<T> {
  return (await get(path, params, signal)).json() as Promise<T>;
}

/** liveRecords reads /api/v1/live's JSON lines. */
export async function liveRecords(limit: number, signal?: AbortSignal): Promise<Record<string, unknown>[]> {
  const text = await (await get("/api/v1/live", new URLSearchParams({ limit: String(limit) }), signal)).text();
  return text.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as Record<string, unknown>);
}
