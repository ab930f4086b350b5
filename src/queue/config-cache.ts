import type { ConfigLoad } from "../github/read-config.ts";

export interface ConfigCache {
  /**
   * The repository's config: the cached load while fresh, else `load()` (concurrent callers share one).
   * `maxAgeMs` sets how old a cached load may be for this caller (default: the cache's time limit).
   */
  get(fullName: string, load: () => Promise<ConfigLoad>, opts?: { maxAgeMs?: number }): Promise<ConfigLoad>;
  /** A push to the default branch may have changed `.github/fleet.yml`: the next event reads it again. */
  forget(fullName: string): void;
}

/**
 * `.github/fleet.yml` per repository, kept between webhook events: every event of a task's life needs
 * the config, and each read is a REST request. A push to the default branch drops the entry (see the
 * `push` handler); the time limit covers what no push announces, such as an `_extends` source changing
 * in another repository, or a missed webhook.
 */
export function createConfigCache(opts: { ttlMs?: number; now?: () => number } = {}): ConfigCache {
  const ttl = opts.ttlMs ?? 5 * 60_000;
  const now = opts.now ?? Date.now;
  const entries = new Map<string, { at: number; value: Promise<ConfigLoad> }>();
  return {
    get(fullName, load, opts = {}) {
      const key = fullName.toLowerCase();
      const hit = entries.get(key);
      if (hit && now() - hit.at < (opts.maxAgeMs ?? ttl)) return hit.value;
      const value = load();
      const entry = { at: now(), value };
      entries.set(key, entry);
      // A failed read (GitHub down) is not kept: the next event tries again.
      value.catch(() => {
        if (entries.get(key) === entry) entries.delete(key);
      });
      return value;
    },
    forget(fullName) {
      entries.delete(fullName.toLowerCase());
    },
  };
}
