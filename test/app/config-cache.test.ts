import { describe, expect, it } from "vitest";
import type { ConfigLoad } from "../../src/app/load-config.ts";
import { defaultFleetConfig } from "../../src/core/config.ts";
import { createConfigCache } from "../../src/queue/config-cache.ts";

describe("createConfigCache", () => {
  const ok = (max: number): ConfigLoad => ({
    ok: true,
    config: { ...defaultFleetConfig(), max_concurrent: max },
  });

  it("keeps a repository's config until forgotten or out of time, per repository, case-insensitively", async () => {
    let t = 0;
    const cache = createConfigCache({ ttlMs: 1000, now: () => t });
    let reads = 0;
    const load = (max: number) => async () => {
      reads++;
      return ok(max);
    };
    expect(await cache.get("Octo/Widgets", load(1))).toEqual(ok(1));
    expect(await cache.get("octo/widgets", load(2))).toEqual(ok(1));
    expect(await cache.get("octo/other", load(3))).toEqual(ok(3));
    expect(reads).toBe(2);
    cache.forget("OCTO/widgets");
    expect(await cache.get("octo/widgets", load(4))).toEqual(ok(4));
    t = 1000;
    expect(await cache.get("octo/widgets", load(5))).toEqual(ok(5));
    expect(reads).toBe(4);
  });

  it("lets a caller accept an older read: a reconcile sweep's hour against an event's 5 minutes", async () => {
    let t = 0;
    const cache = createConfigCache({ ttlMs: 5 * 60_000, now: () => t });
    let reads = 0;
    const load = (max: number) => async () => {
      reads++;
      return ok(max);
    };
    await cache.get("o/r", load(1));
    t = 10 * 60_000;
    // Past the cache's time: a sweep keeps the read, an event reads again (and the sweep then sees it).
    expect(await cache.get("o/r", load(2), { maxAgeMs: 60 * 60_000 })).toEqual(ok(1));
    expect(reads).toBe(1);
    expect(await cache.get("o/r", load(3))).toEqual(ok(3));
    t = 71 * 60_000;
    expect(await cache.get("o/r", load(4), { maxAgeMs: 60 * 60_000 })).toEqual(ok(4));
    expect(reads).toBe(3);
  });

  it("shares one read between concurrent callers and does not keep a failed read", async () => {
    const cache = createConfigCache();
    let reads = 0;
    const failing = async (): Promise<ConfigLoad> => {
      reads++;
      throw new Error("GitHub answered 502");
    };
    const [a, b] = await Promise.allSettled([cache.get("o/r", failing), cache.get("o/r", failing)]);
    expect(a.status).toBe("rejected");
    expect(b.status).toBe("rejected");
    expect(reads).toBe(1);
    expect(await cache.get("o/r", async () => ok(7))).toEqual(ok(7));
  });
});
