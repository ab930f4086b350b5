import { describe, expect, it } from "vitest";
import { emptyStateDoc } from "../../src/core/state-doc.ts";
import {
  credentialsState,
  earliestReset,
  poolFor,
  recordCooling,
  resetTime,
} from "../../src/economy/credentials.ts";

const NOW = new Date("2025-03-01T12:00:00Z");
const later = (s: number) => new Date(NOW.getTime() + s * 1000).toISOString();

describe("credential pool", () => {
  it("names the earliest reset among the cooling credentials", () => {
    const p = poolFor("claude", ["KEY_A", "KEY_B", "KEY_C"], {
      claude: {
        KEY_A: { coolingUntil: later(90) },
        KEY_B: { coolingUntil: later(30) },
        KEY_C: { coolingUntil: later(60) },
      },
    });
    expect(earliestReset(p, NOW)).toBe(later(30));
    expect(earliestReset(p, NOW, (n) => n !== "KEY_B")).toBe(later(60));
  });
});

describe("cooling state in the state document", () => {
  it("records cooling under doc.credentials[coder][name] and drops expired entries", () => {
    let doc = recordCooling(emptyStateDoc(), "claude", "KEY_A", later(-5), new Date(later(-10)));
    doc = recordCooling(doc, "claude", "KEY_B", later(30), NOW);
    expect(credentialsState(doc)).toEqual({ claude: { KEY_B: { coolingUntil: later(30) } } });
    const pool = poolFor("claude", ["KEY_A", "KEY_B"], credentialsState(doc));
    expect(pool.credentials).toEqual([{ name: "KEY_A" }, { name: "KEY_B", coolingUntil: later(30) }]);
  });

  it("reads a document without the key as no cooling", () => {
    expect(credentialsState(emptyStateDoc())).toEqual({});
    expect(credentialsState({ ...emptyStateDoc(), credentials: [] })).toEqual({});
  });
});

describe("resetTime", () => {
  it("prefers the provider's reset, then retry-after, then the fallback", () => {
    expect(resetTime({ resetsAt: later(100) }, NOW, 60)).toBe(later(100));
    expect(resetTime({ retryAfterSeconds: 30 }, NOW, 60)).toBe(later(30));
    expect(resetTime(undefined, NOW, 60)).toBe(later(60));
    expect(resetTime({ resetsAt: "not a time" }, NOW, 60)).toBe(later(60));
  });

  it("never cools a credential past a week or into the past, whatever the agent reported", () => {
    expect(resetTime({ resetsAt: "2100-01-01T00:00:00Z" }, NOW, 60)).toBe(later(7 * 24 * 3600));
    expect(resetTime({ retryAfterSeconds: 10 ** 9 }, NOW, 60)).toBe(later(7 * 24 * 3600));
    expect(resetTime({ resetsAt: "2000-01-01T00:00:00Z" }, NOW, 60)).toBe(later(0));
  });
});
