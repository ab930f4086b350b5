import { describe, expect, it } from "vitest";
import {
  mostHeadroom,
  nearLimit,
  nearLimitResetsAt,
  parseResetDuration,
  projectedWindows,
  recordOnWindows,
  windowsFromHeaders,
} from "../../src/core/rate-windows.ts";

const NOW = new Date("2026-01-01T10:30:00.000Z");
const AT = NOW.toISOString();

describe("rate-limit windows from the providers' headers", () => {
  it("leaves out a window whose reset is no sane time (it never throws): 1e300, 99999999999999h, far away", () => {
    const headers = {
      "anthropic-ratelimit-unified-5h-utilization": "0.5",
      "anthropic-ratelimit-unified-5h-reset": "1e300",
      "anthropic-ratelimit-unified-7d-utilization": "0.5",
      "anthropic-ratelimit-unified-7d-reset": String(Date.parse("2030-01-01T00:00:00Z") / 1000),
      "anthropic-ratelimit-tokens-limit": "1000",
      "anthropic-ratelimit-tokens-remaining": "10",
      "anthropic-ratelimit-tokens-reset": "+275760-09-13T00:00:00.000Z",
      "x-ratelimit-limit-tokens": "1000",
      "x-ratelimit-remaining-tokens": "10",
      "x-ratelimit-reset-tokens": "99999999999999h",
      "x-ratelimit-limit-requests": "1e400",
      "x-ratelimit-remaining-requests": "1",
      "x-ratelimit-reset-requests": "1s",
    };
    expect(windowsFromHeaders(headers, NOW)).toEqual({});
  });

  it("reads Anthropic's windows (RFC3339 resets) and subscription utilization (epoch resets)", () => {
    const w = windowsFromHeaders(
      {
        "anthropic-ratelimit-tokens-limit": "100000",
        "anthropic-ratelimit-tokens-remaining": "25000",
        "anthropic-ratelimit-tokens-reset": "2026-01-01T10:31:00Z",
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "49",
        "anthropic-ratelimit-requests-reset": "2026-01-01T10:30:05Z",
        "anthropic-ratelimit-unified-5h-utilization": "0.42",
        "anthropic-ratelimit-unified-5h-reset": String(Date.parse("2026-01-01T14:00:00Z") / 1000),
      },
      NOW,
    );
    expect(w).toEqual({
      tokens: { limit: 100000, remaining: 25000, resetsAt: "2026-01-01T10:31:00.000Z", at: AT },
      requests: { limit: 50, remaining: 49, resetsAt: "2026-01-01T10:30:05.000Z", at: AT },
      "5h": { limit: 100, remaining: 58, resetsAt: "2026-01-01T14:00:00.000Z", at: AT },
    });
  });

  it("reads OpenAI's windows with their duration resets", () => {
    expect(parseResetDuration("6m0s")).toBe(360_000);
    expect(parseResetDuration("1h2m3.5s")).toBe(3_723_500);
    expect(parseResetDuration("20ms")).toBe(20);
    const w = windowsFromHeaders(
      {
        "x-ratelimit-limit-tokens": "40000",
        "x-ratelimit-remaining-tokens": "39000",
        "x-ratelimit-reset-tokens": "1.5s",
      },
      NOW,
    );
    expect(w.tokens).toEqual({
      limit: 40000,
      remaining: 39000,
      resetsAt: "2026-01-01T10:30:01.500Z",
      at: AT,
    });
  });

  it("a window at 90% or over is near its limit until it resets", () => {
    const c = recordOnWindows(
      undefined,
      {
        windows: { tokens: { limit: 100, remaining: 10, resetsAt: "2026-01-01T10:31:00.000Z", at: AT } },
        tokens: 90,
      },
      NOW,
    );
    expect(nearLimit(c, NOW)).toBe(true);
    expect(nearLimit(c, NOW, 95)).toBe(false);
    expect(nearLimitResetsAt(c, NOW)).toBe("2026-01-01T10:31:00.000Z");
    expect(nearLimit(c, new Date("2026-01-01T10:31:00.000Z"))).toBe(false);
    expect(c.hour).toEqual({ start: "2026-01-01T10:00:00.000Z", tokens: 90, requests: 1 });
  });

  it("draws the credential with the most headroom; near-limit ones are left out; ties go to the idlest", () => {
    const win = (remaining: number) => ({
      windows: { tokens: { limit: 100, remaining, resetsAt: "2026-01-01T10:31:00.000Z", at: AT } },
    });
    expect(
      mostHeadroom(
        [
          { name: "A", windows: win(20), active: 0 },
          { name: "B", windows: win(60), active: 0 },
        ],
        NOW,
      )?.name,
    ).toBe("B");
    expect(
      mostHeadroom(
        [
          { name: "A", windows: win(5), active: 0 },
          { name: "B", windows: win(8), active: 0 },
        ],
        NOW,
      ),
    ).toBeUndefined();
    expect(
      mostHeadroom(
        [
          { name: "A", active: 1 },
          { name: "B", active: 0 },
          { name: "C", active: 0 },
        ],
        NOW,
      )?.name,
    ).toBe("B");
    const used = { windows: {}, hour: { start: "2026-01-01T10:00:00.000Z", tokens: 500, requests: 3 } };
    expect(
      mostHeadroom(
        [
          { name: "A", windows: used, active: 0 },
          { name: "B", active: 0 },
        ],
        NOW,
      )?.name,
    ).toBe("B");
  });

  it("counts what is in flight: a credential at 84% with a 12% request unanswered is near its limit; another with room is drawn", () => {
    const tokens = (remaining: number) => ({
      windows: {
        tokens: { limit: 100_000, remaining, resetsAt: "2026-01-01T10:31:00.000Z", at: AT },
        requests: { limit: 50, remaining: 10, resetsAt: "2026-01-01T10:31:00.000Z", at: AT },
        "5h": { limit: 100, remaining: 50, resetsAt: "2026-01-01T12:00:00.000Z", at: AT },
      },
    });
    const a = tokens(16_000);
    const flying = { requests: 1, tokens: 12_000, inputTokens: 2_000, outputTokens: 0 };
    // What the last answer said: 84%, room for one more request.
    expect(nearLimit(a, NOW)).toBe(false);
    // With one request of the last turn's size (12k) in flight on it: 96%.
    const projected = projectedWindows(a, flying);
    expect(projected?.windows.tokens?.remaining).toBe(4_000);
    expect(projected?.windows.requests?.remaining).toBe(9);
    // A subscription's utilization is not in tokens: it stays as stated.
    expect(projected?.windows["5h"]?.remaining).toBe(50);
    expect(nearLimit(projected, NOW)).toBe(true);
    expect(projectedWindows(a, { requests: 0, tokens: 0, inputTokens: 0, outputTokens: 0 })).toBe(a);
    expect(
      mostHeadroom(
        [
          { name: "A", windows: projected, active: 2 },
          { name: "B", windows: tokens(30_000), active: 0 },
        ],
        NOW,
      )?.name,
    ).toBe("B");
    // Two requests in flight on B (70% + 2 x 12%) leave it with less headroom than A at 84% alone.
    expect(
      mostHeadroom(
        [
          { name: "A", windows: a, active: 1 },
          {
            name: "B",
            windows: projectedWindows(tokens(30_000), { ...flying, requests: 2, tokens: 24_000 }),
            active: 1,
          },
        ],
        NOW,
      )?.name,
    ).toBe("A");
  });
});
