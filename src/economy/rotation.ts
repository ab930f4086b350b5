import {
  type Candidate,
  DEFAULT_NEAR_LIMIT_PCT,
  mostHeadroom,
  nearLimit,
  nearLimitResetsAt,
} from "../core/rate-windows.ts";
import type { StateStore } from "../state/store.ts";
import { processWindowBook, storedWindows, type WindowBook } from "./credential-windows.ts";
import {
  type CredentialPool,
  credentialsState,
  earliestReset,
  poolFor,
  recordCooling,
  resetTime,
} from "./credentials.ts";

export interface CredentialRotationOptions {
  store: StateStore;
  coder: string;
  /** The coder's credential names in config order. */
  names: readonly string[];
  /** The value of a credential by name (the worker's environment); undefined when this worker lacks it. */
  secretOf: (name: string) => string | undefined;
  clock: () => Date;
  /** Cooling time when the provider gave no reset (retries.backoff_seconds). */
  fallbackSeconds: number;
  log?: (message: string) => void;
  /** What this process saw of the credentials' windows (default: the process's own book). */
  book?: WindowBook;
  /** The share of a window (percent) at which new runs wait for another credential; default 90. */
  nearLimitPct?: number;
}

export type FirstCredential =
  | { kind: "credential"; credential: { name: string; value: string } }
  /** Every usable credential is cooling: wait until `resetAt`. */
  | { kind: "all-cooling"; resetAt: string }
  /** The worker has no value for any of the coder's credentials. */
  | { kind: "none" };

/**
 * A run's view of its coder's credential pool, kept in the state document so every worker sees
 * which credentials are cooling and how full their windows are: `first()` picks the credential with
 * the most headroom to start on, `rotate()` marks a rate-limited one cooling (compare-and-swap) and
 * returns the next, `next()` moves a run off a credential near its limit, `resetAt()` is when the
 * first unavailable credential is free again. Values are looked up by name only when handed out.
 */
export function createCredentialRotation(opts: CredentialRotationOptions) {
  const usable = (name: string) => Boolean(opts.secretOf(name));
  const book = opts.book ?? processWindowBook;
  const pct = opts.nearLimitPct ?? DEFAULT_NEAR_LIMIT_PCT;
  let pool: CredentialPool = poolFor(opts.coder, opts.names, {});
  let stored: ReturnType<typeof storedWindows> = {};

  const refresh = async () => {
    const { doc } = await opts.store.read();
    pool = poolFor(opts.coder, opts.names, credentialsState(doc));
    stored = storedWindows(doc, opts.coder);
  };
  const take = (name: string) => ({ name, value: opts.secretOf(name)! });
  // What the provider last said of the credential plus what is in flight on it (not answered yet):
  // every decision (a run's start, a request's credential) is made on the projected figures.
  const windowsOf = (name: string) => book.projected(opts.coder, name, stored[name]);
  /** The free credential with the most headroom, other than `except`. */
  const best = (now: Date, except?: string): Candidate | undefined =>
    mostHeadroom(
      pool.credentials
        .filter((c) => c.name !== except && usable(c.name))
        .filter((c) => c.coolingUntil === undefined || !(Date.parse(c.coolingUntil) > now.getTime()))
        .map((c) => ({ name: c.name, windows: windowsOf(c.name), active: book.active(opts.coder, c.name) })),
      now,
      pct,
    );
  /** When the first credential that is cooling or near a limit is free again. */
  const firstFree = (now: Date): string | undefined => {
    const times = [
      earliestReset(pool, now, usable),
      ...opts.names.filter(usable).map((n) => nearLimitResetsAt(windowsOf(n), now, pct)),
    ].filter((t): t is string => t !== undefined);
    return times.sort()[0];
  };

  return {
    async first(): Promise<FirstCredential> {
      if (!opts.names.some(usable)) return { kind: "none" };
      await refresh();
      const now = opts.clock();
      const free = best(now);
      if (free) return { kind: "credential", credential: take(free.name) };
      return { kind: "all-cooling", resetAt: firstFree(now) ?? now.toISOString() };
    },

    async rotate(limited: {
      name: string;
      rateLimit?: { resetsAt?: string; retryAfterSeconds?: number };
    }): Promise<{ name: string; value: string } | undefined> {
      const now = opts.clock();
      const until = resetTime(limited.rateLimit, now, opts.fallbackSeconds);
      const update = await opts.store.update(({ doc }) => ({
        doc: recordCooling(doc, opts.coder, limited.name, until, now),
        message: `credential ${limited.name} of ${opts.coder} cooling until ${until}`,
      }));
      pool = poolFor(opts.coder, opts.names, credentialsState(update.snapshot.doc));
      stored = storedWindows(update.snapshot.doc, opts.coder);
      const next = best(now, limited.name);
      opts.log?.(
        `${opts.coder}: ${limited.name} rate-limited until ${until}; ${next ? `continuing on ${next.name}` : "no credential free"}`,
      );
      return next ? take(next.name) : undefined;
    },

    /**
     * Another credential to go on with when `current` is near a window's limit, counting what is in
     * flight on it, and one has room; else undefined.
     */
    next(current: string): { name: string; value: string } | undefined {
      const now = opts.clock();
      if (!nearLimit(windowsOf(current), now, pct)) return undefined;
      const other = best(now, current);
      return other ? take(other.name) : undefined;
    },

    /** When the first usable credential is free again (after `rotate` found none free). */
    resetAt(): string | undefined {
      return firstFree(opts.clock());
    },

    book,
    /** The pool's credential names, in config order. */
    names: opts.names,
  };
}

export type CredentialRotation = ReturnType<typeof createCredentialRotation>;
