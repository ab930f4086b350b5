import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { FleetConfig } from "../core/config.ts";
import {
  type CredentialWindows,
  type InFlight,
  NOTHING_IN_FLIGHT,
  projectedWindows,
  recordOnWindows,
  windowsFromHeaders,
  withHourCount,
} from "../core/rate-windows.ts";
import type { FleetStateDoc } from "../core/state-doc.ts";
import { credentialsState } from "./credentials.ts";

// Where a credential's windows are kept. A worker keeps what its gateway saw in memory (a WindowBook,
// one per process, shared by its runs: the freshest figures, and how many runs are on each credential),
// and writes them into the repository state document (`credentials.<coder>.<name>.windows`) with its
// heartbeats and when a run ends, so other workers and `fleet tasks --credentials` see them too.

const key = (coder: string, name: string) => `${coder}\u0000${name}`;

/** What this process's gateways saw of each credential, and the runs on each. */
export class WindowBook {
  /** Names this process's own count of each credential's hour in the state (see withHourCount). */
  readonly writer: string;
  private readonly seen = new Map<string, CredentialWindows>();
  private readonly runs = new Map<string, number>();
  private readonly flying = new Map<string, InFlight>();

  constructor(writer = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`) {
    this.writer = writer;
  }

  get(coder: string, name: string): CredentialWindows | undefined {
    return this.seen.get(key(coder, name));
  }

  /** A response on the credential: its headers' windows, and the tokens it used (Fleet's own count). */
  record(
    coder: string,
    name: string,
    seen: { headers: Record<string, string | string[] | undefined>; tokens: number },
    now: Date,
  ): void {
    const k = key(coder, name);
    this.seen.set(
      k,
      recordOnWindows(
        this.seen.get(k),
        { windows: windowsFromHeaders(seen.headers, now), tokens: seen.tokens },
        now,
      ),
    );
  }

  /**
   * The state's figures where this process has none, or older ones; the hour's count is every
   * process's, with this one's own (as stored by earlier writes) replaced by what it counts now.
   */
  merge(coder: string, name: string, stored: CredentialWindows | undefined): CredentialWindows | undefined {
    const mine = this.get(coder, name);
    if (!stored)
      return mine && { windows: mine.windows, ...withHourCount(undefined, this.writer, mine.hour) };
    if (!mine) return stored;
    const windows = { ...stored.windows };
    for (const [w, v] of Object.entries(mine.windows)) {
      if (!windows[w] || windows[w]!.at <= v.at) windows[w] = v;
    }
    return { windows, ...withHourCount(stored, this.writer, mine.hour) };
  }

  /** What is sent on the credential and not answered yet (this process's requests). */
  inFlight(coder: string, name: string): InFlight {
    return this.flying.get(key(coder, name)) ?? NOTHING_IN_FLIGHT;
  }

  /**
   * A request goes out on the credential: it counts as in flight, with its estimated tokens, until
   * the returned release is called (its answer was recorded, or it failed or was cut off; once).
   */
  hold(coder: string, name: string, estimate: Omit<InFlight, "requests">): () => void {
    const k = key(coder, name);
    const add = (sign: 1 | -1) => {
      const was = this.flying.get(k) ?? NOTHING_IN_FLIGHT;
      const now: InFlight = {
        requests: Math.max(0, was.requests + sign),
        tokens: Math.max(0, was.tokens + sign * estimate.tokens),
        inputTokens: Math.max(0, was.inputTokens + sign * estimate.inputTokens),
        outputTokens: Math.max(0, was.outputTokens + sign * estimate.outputTokens),
      };
      if (now.requests === 0) this.flying.delete(k);
      else this.flying.set(k, now);
    };
    add(1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      add(-1);
    };
  }

  /** The credential's figures (`merge`'s) as they will be once what is in flight on it is counted. */
  projected(
    coder: string,
    name: string,
    stored: CredentialWindows | undefined,
  ): CredentialWindows | undefined {
    return projectedWindows(this.merge(coder, name, stored), this.inFlight(coder, name));
  }

  active(coder: string, name: string): number {
    return this.runs.get(key(coder, name)) ?? 0;
  }

  /** A run starts on (+1) or leaves (-1) the credential. */
  move(coder: string, name: string, by: 1 | -1): void {
    const k = key(coder, name);
    this.runs.set(k, Math.max(0, (this.runs.get(k) ?? 0) + by));
  }
}

/** The book of this process (a worker runs several tasks at once; they share one view of the windows). */
export const processWindowBook = new WindowBook();

/** The windows the state document records for `coder`'s credentials, by name. */
export function storedWindows(doc: FleetStateDoc, coder: string): Record<string, CredentialWindows> {
  const out: Record<string, CredentialWindows> = {};
  for (const [name, entry] of Object.entries(credentialsState(doc)[coder] ?? {})) {
    const w = (entry as { windows?: CredentialWindows }).windows;
    if (w && typeof w === "object" && typeof w.windows === "object") out[name] = w;
  }
  return out;
}

/** The state document with the book's figures for `names` of `coder` written in (newer figures win). */
export function writeWindows(
  doc: FleetStateDoc,
  coder: string,
  names: readonly string[],
  book: WindowBook,
): FleetStateDoc {
  const state = credentialsState(doc);
  const stored = storedWindows(doc, coder);
  const mine: Record<string, Record<string, unknown>> = { ...(state[coder] ?? {}) };
  let changed = false;
  for (const name of names) {
    const merged = book.merge(coder, name, stored[name]);
    if (!merged || JSON.stringify(merged) === JSON.stringify(stored[name])) continue;
    mine[name] = { ...(mine[name] ?? {}), windows: merged };
    changed = true;
  }
  return changed ? { ...doc, credentials: { ...state, [coder]: mine } } : doc;
}

/**
 * Every credential of the coders Fleet uses (enabled ones, and any other it has tasks or credential
 * records for), in config order, with its cooling time and windows from the state document.
 */
export function credentialRows(
  doc: FleetStateDoc,
  config: Pick<FleetConfig, "coders">,
): Array<{ coder: string; name: string; coolingUntil?: string; windows?: CredentialWindows }> {
  const state = credentialsState(doc);
  const used = new Set([...Object.values(doc.tasks).map((t) => t.coder), ...Object.keys(state)]);
  const rows: Array<{ coder: string; name: string; coolingUntil?: string; windows?: CredentialWindows }> = [];
  for (const [coder, c] of Object.entries(config.coders)) {
    if (!c.enabled && !used.has(coder)) continue;
    const stored = storedWindows(doc, coder);
    for (const name of c.credentials) {
      const until = state[coder]?.[name]?.coolingUntil;
      rows.push({
        coder,
        name,
        ...(until ? { coolingUntil: until } : {}),
        ...(stored[name] ? { windows: stored[name] } : {}),
      });
    }
  }
  return rows;
}
