import type { StateStore } from "../state/store.ts";
import {
  type CredentialPool,
  credentialsState,
  earliestReset,
  pickCredential,
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
}

export type FirstCredential =
  | { kind: "credential"; credential: { name: string; value: string } }
  /** Every usable credential is cooling: wait until `resetAt`. */
  | { kind: "all-cooling"; resetAt: string }
  /** The worker has no value for any of the coder's credentials. */
  | { kind: "none" };

/**
 * A run's view of its coder's credential pool, kept in the state document so every worker sees
 * which credentials are cooling: `first()` picks the credential to start on, `rotate()` marks a
 * rate-limited one cooling (compare-and-swap) and returns the next free one, `resetAt()` is when
 * the first cooling credential is free again. Values are looked up by name only when handed out.
 */
export function createCredentialRotation(opts: CredentialRotationOptions) {
  const usable = (name: string) => Boolean(opts.secretOf(name));
  let pool: CredentialPool = poolFor(opts.coder, opts.names, {});

  const refresh = async () => {
    const { doc } = await opts.store.read();
    pool = poolFor(opts.coder, opts.names, credentialsState(doc));
  };
  const take = (name: string) => ({ name, value: opts.secretOf(name)! });

  return {
    async first(): Promise<FirstCredential> {
      if (!opts.names.some(usable)) return { kind: "none" };
      await refresh();
      const now = opts.clock();
      const free = pickCredential(pool, now, usable);
      if (free) return { kind: "credential", credential: take(free.name) };
      return { kind: "all-cooling", resetAt: earliestReset(pool, now, usable) ?? now.toISOString() };
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
      const next = pickCredential(pool, now, usable);
      opts.log?.(
        `${opts.coder}: ${limited.name} rate-limited until ${until}; ${next ? `continuing on ${next.name}` : "no credential free"}`,
      );
      return next ? take(next.name) : undefined;
    },

    /** When the first usable credential is free again (after `rotate` found none free). */
    resetAt(): string | undefined {
      return earliestReset(pool, opts.clock(), usable);
    },
  };
}

export type CredentialRotation = ReturnType<typeof createCredentialRotation>;
