import { describe, expect, it } from "vitest";
import {
  checkOverride,
  type FleetConfig,
  parseConfigAssignment,
  parseFleetConfig,
} from "../../src/core/config.ts";
import {
  contextAfterTurn,
  contextModelOf,
  contextPercent,
  contextWindowOf,
  FALLBACK_CONTEXT_WINDOW,
  formatTokens,
  overContextLimit,
  turnContextTokens,
} from "../../src/core/context-windows.ts";

const AT = "2025-03-01T12:00:00.000Z";

describe("context windows", () => {
  it("knows the Claude, GPT and Gemini windows, with or without a provider prefix", () => {
    expect(contextWindowOf("claude-sonnet-4-5")).toEqual({ tokens: 200_000, known: true });
    expect(contextWindowOf("claude-opus-4-1-20250805").tokens).toBe(200_000);
    expect(contextWindowOf("opus").tokens).toBe(200_000);
    expect(contextWindowOf("sonnet[1m]").tokens).toBe(1_000_000);
    expect(contextWindowOf("claude-sonnet-4-5[1m]").tokens).toBe(1_000_000);
    expect(contextWindowOf("anthropic/claude-haiku-4-5").tokens).toBe(200_000);
    expect(contextWindowOf("gpt-5-codex").tokens).toBe(272_000);
    expect(contextWindowOf("o4-mini").tokens).toBe(200_000);
    expect(contextWindowOf("gpt-4.1").tokens).toBe(1_047_576);
    expect(contextWindowOf("gpt-4o-mini").tokens).toBe(128_000);
    expect(contextWindowOf("gemini-2.5-pro").tokens).toBe(1_048_576);
    expect(contextWindowOf("models/gemini-1.5-pro-002").tokens).toBe(2_097_152);
  });

  it("assumes the documented fallback for a model it does not know, and says so", () => {
    expect(contextWindowOf("llama-70b")).toEqual({ tokens: FALLBACK_CONTEXT_WINDOW, known: false });
    expect(contextAfterTurn("llama-70b", { input: 10 }, AT)).toEqual({
      tokens: 10,
      window: FALLBACK_CONTEXT_WINDOW,
      at: AT,
      windowAssumed: true,
    });
  });

  it("counts a turn's input, cache read and cache write, never its output", () => {
    expect(turnContextTokens({ input: 100, cacheRead: 2000, cacheWrite: 300, output: 5000 })).toBe(2400);
    expect(contextAfterTurn("claude-sonnet-4-5", { input: 2_000, cacheRead: 140_000 }, AT)).toEqual({
      tokens: 142_000,
      window: 200_000,
      at: AT,
    });
  });

  it("stops only past max_context_pct; absent or 0 is off", () => {
    const c = { tokens: 150_000, window: 200_000, at: AT };
    expect(contextPercent(c)).toBe(75);
    expect(overContextLimit(c, undefined)).toBeUndefined();
    expect(overContextLimit(c, 0)).toBeUndefined();
    expect(overContextLimit(c, 75)).toBeUndefined();
    expect(overContextLimit(c, 74)).toBe(
      "stopped: the last turn's context was 150k tokens, 75% of the model's 200k window, over max_context_pct 74",
    );
    expect(overContextLimit({ ...c, window: 128_000, windowAssumed: true }, 50)).toContain(
      "128k window (assumed: the model is not in Fleet's table)",
    );
  });

  it("writes token counts as a person reads them", () => {
    expect([950, 1_000, 1_234, 12_345, 142_000, 999_499, 999_999, 1_048_576].map(formatTokens)).toEqual([
      "950",
      "1k",
      "1.2k",
      "12k",
      "142k",
      "999k",
      "1M",
      "1.05M",
    ]);
  });
});

describe("config: max_context_pct and coders.<coder>.home", () => {
  const file = (input: unknown): FleetConfig => {
    const r = parseFleetConfig(input);
    if (!r.ok) throw new Error(JSON.stringify(r.problems));
    return r.config;
  };

  it("reads both from the file, isolated and off when left out", () => {
    const config = file({ max_context_pct: 80, coders: { claude: { home: "inherit" } } });
    expect(config.max_context_pct).toBe(80);
    expect(config.coders.claude?.home).toBe("inherit");
    expect(file({}).max_context_pct).toBeUndefined();
    expect(file({}).coders.claude?.home).toBeUndefined();
  });

  it("names the key and what it must be for a bad value", () => {
    const bad = (input: unknown) => {
      const r = parseFleetConfig(input);
      return r.ok ? [] : r.problems;
    };
    expect(bad({ max_context_pct: 120 })).toEqual([
      { path: "max_context_pct", message: "must be a whole number from 0 to 100; got 120." },
    ]);
    expect(bad({ max_context_pct: "80%" })).toEqual([
      { path: "max_context_pct", message: 'must be a whole number from 0 to 100; got "80%".' },
    ]);
    expect(bad({ coders: { claude: { home: "shared" } } })).toEqual([
      { path: "coders.claude.home", message: 'must be one of: isolated, inherit; got "shared".' },
    ]);
    expect(bad({ coders: { claude: { hoem: "inherit" } } })[0]?.message).toContain('Did you mean "home"?');
  });

  it("keeps home file-only: config set refuses it, saying why", () => {
    const r = parseConfigAssignment("coders.claude.home=inherit");
    expect(r.ok).toBe(false);
    expect(!r.ok && r.message).toMatch(
      /^coders\.claude\.home is file-only: `inherit` widens what the agent reads .* Fleet reads it only from \.github\/fleet\.yml on the default branch/,
    );
  });

  it("lets config set lower max_context_pct, never raise it past the file's or turn it off", () => {
    expect(parseConfigAssignment("max_context_pct=101")).toMatchObject({
      ok: false,
      message: expect.stringContaining("max_context_pct must be a whole number from 0 to 100"),
    });
    expect(parseConfigAssignment("max_context_pct=80")).toEqual({
      ok: true,
      key: "max_context_pct",
      value: 80,
    });
    const withLimit = file({ max_context_pct: 80 });
    expect(checkOverride(withLimit, "max_context_pct", 60)).toBeUndefined();
    expect(checkOverride(withLimit, "max_context_pct", 90)).toContain(
      "max_context_pct can only be lowered with config set",
    );
    expect(checkOverride(withLimit, "max_context_pct", 0)).toContain("0 would turn it off");
    // The file sets none: config set may set any.
    expect(checkOverride(file({}), "max_context_pct", 95)).toBeUndefined();
  });
});

describe("the 1M-context beta, which the answer's model id does not name", () => {
  it("is read from the task's configured model or the request's anthropic-beta header", () => {
    const answered = "claude-sonnet-4-5-20250929";
    expect(contextModelOf(answered, { configured: "sonnet[1m]" })).toBe(`${answered}[1m]`);
    expect(contextWindowOf(contextModelOf(answered, { configured: "sonnet[1m]" })).tokens).toBe(1_000_000);
    expect(
      contextModelOf(answered, {
        configured: "sonnet",
        anthropicBeta: "oauth-2025-04-20,context-1m-2025-08-07",
      }),
    ).toBe(`${answered}[1m]`);
    expect(contextModelOf(answered, { configured: "sonnet", anthropicBeta: "oauth-2025-04-20" })).toBe(
      answered,
    );
    expect(contextModelOf(answered, {})).toBe(answered);
    expect(contextModelOf("claude-sonnet-4-5[1m]", { configured: "sonnet[1m]" })).toBe(
      "claude-sonnet-4-5[1m]",
    );
  });
});
