// A credential's rate-limit windows, as the provider's headers state them on each response, and
// Fleet's own count of what it sent on the credential: which credential has the most headroom, and
// which is too near a limit to start a run on.

/** One window of a provider's limit: how much it allows, how much is left, and when it resets. */
export interface RateWindow {
  limit: number;
  remaining: number;
  /** RFC3339. */
  resetsAt: string;
  /** When the provider said so (RFC3339). */
  at: string;
}

/** What Fleet knows of one credential's windows, by window name (`tokens`, `requests`, `5h`, ...). */
export interface CredentialWindows {
  windows: Record<string, RateWindow>;
  /** Fleet's own count on this credential in the current UTC hour (every worker that records it: the sum of `hourBy`). */
  hour?: HourCount;
  /** Each worker process's own count in that hour, by the process: each writes only its own. */
  hourBy?: Record<string, HourCount>;
}

export interface HourCount {
  /** RFC3339, the UTC hour's start. */
  start: string;
  tokens: number;
  requests: number;
}

/**
 * The hour's count on a credential with one process's (`writer`'s) own count in it: the other
 * processes' counts as stored stay (a worker restarted, or another one, adds to the hour instead of
 * replacing it), only the latest hour is kept, and `hour` is their sum. A count stored before counts
 * were kept by process stands as one process's.
 */
export function withHourCount(
  stored: CredentialWindows | undefined,
  writer: string,
  mine: HourCount | undefined,
): Pick<CredentialWindows, "hour" | "hourBy"> {
  const by: Record<string, HourCount> = stored?.hourBy
    ? { ...stored.hourBy }
    : stored?.hour
      ? { earlier: stored.hour }
      : {};
  if (mine) by[writer] = mine;
  const entries = Object.entries(by);
  if (entries.length === 0) return {};
  const start = entries
    .map(([, h]) => h.start)
    .sort()
    .at(-1)!;
  const kept = Object.fromEntries(entries.filter(([, h]) => h.start === start));
  const hour = { start, tokens: 0, requests: 0 };
  for (const h of Object.values(kept)) {
    hour.tokens += h.tokens;
    hour.requests += h.requests;
  }
  return { hour, hourBy: kept };
}

/**
 * What is on its way on a credential: requests sent on it and not answered yet (the provider may
 * have counted them already; their answers' headers have not said so), and their estimated tokens.
 */
export interface InFlight {
  requests: number;
  /** All tokens (input, output, cache reads and writes): what a `tokens` window counts. */
  tokens: number;
  /** What an `input-tokens` window counts (Anthropic leaves cache reads out). */
  inputTokens: number;
  outputTokens: number;
}

export const NOTHING_IN_FLIGHT: InFlight = { requests: 0, tokens: 0, inputTokens: 0, outputTokens: 0 };

/** The default share of a window at which new runs wait for another credential. */
export const DEFAULT_NEAR_LIMIT_PCT = 90;

type Headers = Record<string, string | string[] | undefined>;
const header = (h: Headers, name: string): string | undefined => {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
};

/** OpenAI's reset durations: `1s`, `6m0s`, `20ms`, `1h2m3.5s`. */
export function parseResetDuration(text: string): number | undefined {
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)];
  if (parts.length === 0) return undefined;
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;
  return parts.reduce((sum, [, v, u]) => sum + Number(v) * unit[u as keyof typeof unit], 0);
}

/**
 * How far from now a window's reset may be and still be believed: the providers' longest window is a
 * week (Claude's 7d); a header further out (or no time at all, `1e300`, `99999999999999h`) is not a
 * window Fleet can use, and is left out rather than trusted.
 */
export const MAX_RESET_DISTANCE_MS = 31 * 24 * 3600_000;

const ANTHROPIC_WINDOWS = ["requests", "tokens", "input-tokens", "output-tokens"] as const;
const OPENAI_WINDOWS = ["requests", "tokens"] as const;
const UNIFIED_WINDOWS = ["5h", "7d"] as const;

/**
 * The windows a response's headers state: Anthropic's `anthropic-ratelimit-<w>-limit|remaining|reset`
 * (reset RFC3339) and subscription `anthropic-ratelimit-unified-<5h|7d>-utilization|reset` (reset in
 * epoch seconds), OpenAI's `x-ratelimit-limit|remaining|reset-<w>` (reset a duration).
 */
export function windowsFromHeaders(h: Headers, now: Date): Record<string, RateWindow> {
  const out: Record<string, RateWindow> = {};
  const at = now.toISOString();
  const add = (name: string, limit?: string, remaining?: string, resetsAtMs?: number) => {
    const l = Number(limit);
    const r = Number(remaining);
    const sane =
      resetsAtMs !== undefined &&
      Number.isFinite(resetsAtMs) &&
      Math.abs(resetsAtMs - now.getTime()) <= MAX_RESET_DISTANCE_MS;
    if (!(l > 0) || !Number.isFinite(l) || !Number.isFinite(r) || !sane) return;
    out[name] = { limit: l, remaining: Math.max(0, r), resetsAt: new Date(resetsAtMs).toISOString(), at };
  };
  for (const w of ANTHROPIC_WINDOWS) {
    const reset = header(h, `anthropic-ratelimit-${w}-reset`);
    add(
      w,
      header(h, `anthropic-ratelimit-${w}-limit`),
      header(h, `anthropic-ratelimit-${w}-remaining`),
      reset ? Date.parse(reset) : undefined,
    );
  }
  for (const w of UNIFIED_WINDOWS) {
    const used = Number(header(h, `anthropic-ratelimit-unified-${w}-utilization`));
    const reset = Number(header(h, `anthropic-ratelimit-unified-${w}-reset`));
    if (Number.isFinite(used) && reset > 0)
      add(w, "100", String(100 - Math.min(100, used * 100)), reset * 1000);
  }
  for (const w of OPENAI_WINDOWS) {
    const reset = header(h, `x-ratelimit-reset-${w}`);
    const ms = reset === undefined ? undefined : parseResetDuration(reset);
    add(
      w,
      header(h, `x-ratelimit-limit-${w}`),
      header(h, `x-ratelimit-remaining-${w}`),
      ms === undefined ? undefined : now.getTime() + ms,
    );
  }
  return out;
}

/** The share (0-1) of a window used at `now`; a window past its reset is empty again. */
export function usedShare(w: RateWindow, now: Date): number {
  if (!(Date.parse(w.resetsAt) > now.getTime())) return 0;
  return Math.min(1, Math.max(0, (w.limit - w.remaining) / w.limit));
}

/** The fullest window of a credential, as a share (0 when nothing is known). */
export function fullestShare(c: CredentialWindows | undefined, now: Date): number {
  return Math.max(0, ...Object.values(c?.windows ?? {}).map((w) => usedShare(w, now)));
}

/** Whether a window of the credential is at `pct` percent of its limit or over. */
export const nearLimit = (
  c: CredentialWindows | undefined,
  now: Date,
  pct = DEFAULT_NEAR_LIMIT_PCT,
): boolean => pct > 0 && fullestShare(c, now) * 100 >= pct;

/** When the credential's windows at or over `pct` reset (the latest of them), or undefined. */
export function nearLimitResetsAt(
  c: CredentialWindows | undefined,
  now: Date,
  pct = DEFAULT_NEAR_LIMIT_PCT,
): string | undefined {
  const full = Object.values(c?.windows ?? {}).filter((w) => usedShare(w, now) * 100 >= pct);
  return full.length
    ? full
        .map((w) => w.resetsAt)
        .sort()
        .at(-1)
    : undefined;
}

/** Which figure of what is in flight each window counts, by the window's name. */
const IN_FLIGHT_UNIT: Record<string, keyof InFlight> = {
  requests: "requests",
  tokens: "tokens",
  "input-tokens": "inputTokens",
  "output-tokens": "outputTokens",
};

/**
 * The credential's windows as they will be once what is in flight on it is counted: the last figures
 * the provider stated, less the in-flight requests (a `requests` window) and their estimated tokens
 * (the token windows). A subscription's `5h`/`7d` utilization is a share whose size in tokens Fleet
 * cannot tell: it stays as stated. The hour's own count is Fleet's record of answers, and stays too.
 * Deciding on these rather than the last answer's figures keeps two runs from both sending on a
 * credential at 84% when the first request takes it to 96%.
 */
export function projectedWindows(
  c: CredentialWindows | undefined,
  inFlight: InFlight | undefined,
): CredentialWindows | undefined {
  if (!c || !inFlight || inFlight.requests <= 0) return c;
  const windows: Record<string, RateWindow> = {};
  for (const [name, w] of Object.entries(c.windows)) {
    const unit = IN_FLIGHT_UNIT[name];
    windows[name] = unit ? { ...w, remaining: Math.max(0, w.remaining - inFlight[unit]) } : w;
  }
  return { ...c, windows };
}

/** The windows after a response on the credential: the headers' windows (where it gave any) and Fleet's own count. */
export function recordOnWindows(
  c: CredentialWindows | undefined,
  seen: { windows: Record<string, RateWindow>; tokens: number },
  now: Date,
): CredentialWindows {
  const hourStart = `${now.toISOString().slice(0, 13)}:00:00.000Z`;
  const hour = c?.hour?.start === hourStart ? c.hour : { start: hourStart, tokens: 0, requests: 0 };
  return {
    windows: { ...(c?.windows ?? {}), ...seen.windows },
    hour: { start: hourStart, tokens: hour.tokens + seen.tokens, requests: hour.requests + 1 },
  };
}

/** One credential a run could draw. */
export interface Candidate {
  name: string;
  windows?: CredentialWindows;
  /** Runs on it right now (this worker's). */
  active: number;
}

/**
 * The credential with the most headroom among `candidates` (in config order): those with a window at
 * `pct` or over are left out; then the emptiest fullest window, then the fewest runs on it, then the
 * fewest tokens Fleet sent on it this hour, then config order. Undefined when every one is near a limit.
 */
export function mostHeadroom(
  candidates: readonly Candidate[],
  now: Date,
  pct = DEFAULT_NEAR_LIMIT_PCT,
): Candidate | undefined {
  const hourStart = `${now.toISOString().slice(0, 13)}:00:00.000Z`;
  const hourTokens = (c: Candidate) => (c.windows?.hour?.start === hourStart ? c.windows.hour.tokens : 0);
  let best: Candidate | undefined;
  for (const c of candidates) {
    if (nearLimit(c.windows, now, pct)) continue;
    if (!best) {
      best = c;
      continue;
    }
    const d =
      fullestShare(c.windows, now) - fullestShare(best.windows, now) ||
      c.active - best.active ||
      hourTokens(c) - hourTokens(best);
    if (d < 0) best = c;
  }
  return best;
}
