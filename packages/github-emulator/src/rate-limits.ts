import type { Actor } from "./state.ts";

/** One token's (or address's) primary rate limit for the current hour. */
export interface Bucket {
  limit: number;
  used: number;
  reset: number;
}

/**
 * GitHub's REST limits: a primary limit per token an hour (60 for anonymous callers, by address), the
 * secondary limit on concurrent requests (no more than 100, REST and GraphQL together), and optionally
 * the content-creation secondary limits (GitHub: 80 a minute, 500 an hour).
 * https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits
 */
export class RateLimits {
  private readonly buckets = new Map<string, Bucket>();
  private readonly contentTimes = new Map<string, number[]>();
  private readonly inFlight = new Map<string, number>();
  /** The most requests each caller had in flight at once (what a benchmark reports). */
  readonly peakConcurrent = new Map<string, number>();
  private readonly perHour: number;
  private readonly contentLimits?: { perMinute?: number; perHour?: number };
  private readonly concurrentLimit: number;

  constructor(
    perHour: number,
    contentLimits?: { perMinute?: number; perHour?: number },
    concurrentLimit = 100,
  ) {
    this.perHour = perHour;
    this.contentLimits = contentLimits;
    this.concurrentLimit = concurrentLimit;
  }

  /**
   * A request of `key`'s starts; false (and not counted) when the caller already has the most
   * requests in flight GitHub allows. Every true is followed by one `requestEnded(key)`.
   */
  requestStarted(key: string): boolean {
    const n = this.inFlight.get(key) ?? 0;
    if (n >= this.concurrentLimit) return false;
    this.inFlight.set(key, n + 1);
    if (n + 1 > (this.peakConcurrent.get(key) ?? 0)) this.peakConcurrent.set(key, n + 1);
    return true;
  }

  requestEnded(key: string): void {
    const n = (this.inFlight.get(key) ?? 1) - 1;
    if (n <= 0) this.inFlight.delete(key);
    else this.inFlight.set(key, n);
  }

  /** Whose limit a request spends: the installation, the user, the app, or the caller's address. */
  key(actor: Actor, remote: string): string {
    return actor.kind === "installation"
      ? `installation:${actor.installationId}`
      : actor.kind === "user"
        ? `user:${actor.user.login}`
        : actor.kind === "app"
          ? "app"
          : `ip:${remote}`;
  }

  /** The caller's bucket for this hour, a fresh one once the hour is over. */
  bucket(actor: Actor, remote: string): Bucket {
    const key = this.key(actor, remote);
    let b = this.buckets.get(key);
    const now = Math.floor(Date.now() / 1000);
    if (!b || b.reset <= now) {
      b = { limit: actor.kind === "anonymous" ? 60 : this.perHour, used: 0, reset: now + 3600 };
      this.buckets.set(key, b);
    }
    return b;
  }

  headers(b: Bucket): Record<string, string> {
    return {
      "x-ratelimit-limit": String(b.limit),
      "x-ratelimit-remaining": String(Math.max(b.limit - b.used, 0)),
      "x-ratelimit-reset": String(b.reset),
      "x-ratelimit-used": String(b.used),
      "x-ratelimit-resource": "core",
    };
  }

  /** What `GET /rate_limit` answers for the caller. */
  status(actor: Actor) {
    const b = this.bucket(actor, "");
    const core = { limit: b.limit, used: b.used, remaining: Math.max(b.limit - b.used, 0), reset: b.reset };
    return {
      resources: { core, search: { ...core, limit: 30, used: 0, remaining: 30 }, graphql: core },
      rate: core,
    };
  }

  /** Seconds to wait when this content-creating request would exceed a secondary limit; else it is counted. */
  contentWait(key: string): number | undefined {
    const lim = this.contentLimits;
    if (!lim) return undefined;
    const now = Date.now();
    const times = (this.contentTimes.get(key) ?? []).filter((t) => t > now - 3600_000);
    this.contentTimes.set(key, times);
    const lastMinute = times.filter((t) => t > now - 60_000);
    if (lim.perMinute !== undefined && lastMinute.length >= lim.perMinute)
      return Math.ceil((lastMinute[0]! + 60_000 - now) / 1000);
    if (lim.perHour !== undefined && times.length >= lim.perHour)
      return Math.ceil((times[0]! + 3600_000 - now) / 1000);
    times.push(now);
    return undefined;
  }
}
