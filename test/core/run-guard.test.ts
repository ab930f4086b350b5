import { describe, expect, it } from "vitest";
import { afterTurn, beforeRequest, type GuardTurn, newGuard } from "../../src/core/run-guard.ts";
import { emptyUsage, type TokenUsage } from "../../src/core/usage.ts";

const AT = "2026-01-01T00:00:00.000Z";
const turn = (
  usage: Partial<TokenUsage>,
  toolCalls: GuardTurn["toolCalls"] = [],
  model = "claude-sonnet-4-5",
): GuardTurn => ({
  model,
  usage: { ...emptyUsage(), ...usage },
  toolCalls,
  at: AT,
});
const read = { name: "Read", input: '{"file_path":"/w/a.ts"}' };

describe("the gateway's guard over a run", () => {
  it("refuses the request that would pass the token ceiling: it reads at least the last turn's prompt and answer", () => {
    const limits = { tokens: 35_000 };
    let g = newGuard();
    for (let i = 0; i < 3; i++) {
      g = beforeRequest(g, limits, { changed: false, countIdle: false });
      expect(g.stop).toBeUndefined();
      g = afterTurn(g, turn({ input: 9_000, output: 1_000 }), limits);
    }
    expect(g.stop).toBeUndefined();
    g = beforeRequest(g, limits, { changed: false, countIdle: false });
    expect(g.stop).toBe(
      "stopped: the next model request would pass the per-task ceiling of 35,000 tokens (budgets.per_task_tokens): 30,000 used, and it reads at least 10,000; the gateway refused it",
    );
  });

  it("holds each request admitted and not answered yet at the last turn's size: parallel requests cannot all slip under a ceiling", () => {
    const limits = { tokens: 35_000, usd: 1 };
    const g = afterTurn(newGuard(), turn({ input: 9_000, output: 1_000 }), limits);
    // 10,000 used; each request reads at least 10,000: two more fit, a third beside them does not.
    expect(beforeRequest(g, limits, { changed: false, countIdle: false, inFlight: 1 }).stop).toBeUndefined();
    expect(beforeRequest(g, limits, { changed: false, countIdle: false, inFlight: 2 }).stop).toBe(
      "stopped: the next model request would pass the per-task ceiling of 35,000 tokens (budgets.per_task_tokens): 10,000 used, and it and 2 more in flight read at least 10,000 each; the gateway refused it",
    );
    const dear = afterTurn(newGuard(), turn({ input: 100_000 }), { usd: 1 });
    expect(
      beforeRequest(dear, { usd: 1 }, { changed: false, countIdle: false, inFlight: 1 }).stop,
    ).toBeUndefined();
    expect(beforeRequest(dear, { usd: 1 }, { changed: false, countIdle: false, inFlight: 2 }).stop).toContain(
      "$0.30 spent, and it and 2 more in flight cost about $0.30 each",
    );
  });

  it("counts what earlier phases spent, and stops at once when a turn went over", () => {
    const g = afterTurn(newGuard({ usage: { ...emptyUsage(), input: 900 } }), turn({ input: 200 }), {
      tokens: 1000,
    });
    expect(g.stop).toContain("the task used 1,100 tokens, over the per-task ceiling of 1,000");
  });

  it("prices turns for the cost ceiling", () => {
    let g = afterTurn(newGuard(), turn({ input: 1_000_000 }), { usd: 5 });
    expect(g.costUsd).toBeCloseTo(3);
    g = beforeRequest(g, { usd: 5 }, { changed: false, countIdle: false });
    expect(g.stop).toContain("would pass the per-task ceiling of $5.00 (budgets.per_task_usd): $3.00 spent");
  });

  it("holds a model with no price to the cost ceiling at its provider's highest list price, and reports no cost for it", () => {
    // Anthropic's highest: $15 a million input tokens, $75 output (Opus 4 / 4.1).
    const claude = afterTurn(newGuard(), turn({ input: 100_000, output: 10_000 }, [], "claude-future-9"), {
      usd: 2,
    });
    expect(claude.costUsd).toBe(0);
    expect(claude.unpriced).toBe(true);
    expect(claude.heldUsd).toBeCloseTo(2.25);
    expect(claude.stop).toBe(
      "stopped: the task cost $2.25 (at most: a model with no price in Fleet's table is counted at its provider's highest list price), over the per-task ceiling of $2.00 (budgets.per_task_usd)",
    );
    // The next request would pass it: refused before it goes out.
    const small = afterTurn(newGuard(), turn({ input: 50_000 }, [], "claude-future-9"), { usd: 1.4 });
    expect(small.stop).toBeUndefined();
    expect(beforeRequest(small, { usd: 1.4 }, { changed: false, countIdle: false }).stop).toContain(
      "would pass the per-task ceiling of $1.40 (budgets.per_task_usd): $0.75 spent (at most:",
    );
    // OpenAI's highest is o1-pro's ($150 / $600); an id naming no provider is held at the highest of all.
    expect(afterTurn(newGuard(), turn({ input: 10_000 }, [], "gpt-7"), {}).heldUsd).toBeCloseTo(1.5);
    expect(afterTurn(newGuard(), turn({ input: 10_000 }, [], "scripted-model"), {}).heldUsd).toBeCloseTo(1.5);
    expect(afterTurn(newGuard(), turn({ input: 1_000_000 }, [], "gemini-9-ultra"), {}).heldUsd).toBeCloseTo(
      1.25,
    );
    // The API the request went to names the provider when the model id does not.
    const viaAnthropic = { ...turn({ input: 100_000 }, [], "mystery-model"), provider: "anthropic" };
    expect(afterTurn(newGuard(), viaAnthropic, {}).heldUsd).toBeCloseTo(1.5);
  });

  it("stops the same tool call with the same input asked for N times with the worktree unchanged", () => {
    const limits = { repeatedToolCalls: 3 };
    let g = newGuard();
    for (let i = 0; i < 2; i++) {
      g = afterTurn(g, turn({ input: 10 }, [read]), limits);
      g = beforeRequest(g, limits, { changed: false, countIdle: true });
    }
    expect(g.stop).toBeUndefined();
    g = afterTurn(g, turn({ input: 10 }, [read]), limits);
    g = beforeRequest(g, limits, { changed: false, countIdle: true });
    expect(g.stop).toBe(
      'stopped: the agent asked for the same tool call 3 times with nothing changed in the worktree (Read {"file_path":"/w/a.ts"}); runaway.repeated_tool_calls is 3',
    );
  });

  it("forgets counted calls and idle turns when the worktree changed; 0 turns a check off", () => {
    const limits = { repeatedToolCalls: 2, idleTurns: 2 };
    let g = afterTurn(newGuard(), turn({ input: 10 }, [read]), limits);
    g = afterTurn(g, turn({ input: 10 }, [read]), limits);
    g = beforeRequest(g, limits, { changed: true, countIdle: true });
    expect(g.stop).toBeUndefined();
    expect(g.calls).toEqual({});
    let off = afterTurn(newGuard(), turn({}, [read]), { repeatedToolCalls: 0, idleTurns: 0 });
    off = afterTurn(off, turn({}, [read]), { repeatedToolCalls: 0 });
    expect(
      beforeRequest(off, { repeatedToolCalls: 0, idleTurns: 0 }, { changed: false, countIdle: true }).stop,
    ).toBeUndefined();
  });

  it("stops after N turns with tool calls that changed nothing, where idle turns count (the work phase)", () => {
    const limits = { idleTurns: 2 };
    let g = afterTurn(newGuard(), turn({}, [read]), limits);
    g = afterTurn(g, turn({}, [{ name: "Grep", input: "{}" }]), limits);
    expect(beforeRequest(g, limits, { changed: false, countIdle: false }).stop).toBeUndefined();
    expect(beforeRequest(g, limits, { changed: false, countIdle: true }).stop).toBe(
      "stopped: 2 turns in a row changed nothing in the worktree; runaway.idle_turns is 2",
    );
  });

  it("records the last turn's context and stops a turn past max_context_pct", () => {
    const g = afterTurn(newGuard(), turn({ input: 100, cacheRead: 150_000, cacheWrite: 20_000 }), {
      maxContextPct: 80,
    });
    expect(g.context).toEqual({ tokens: 170_100, window: 200_000, at: AT });
    expect(g.stop).toContain("the last turn's context was 170k tokens, 85% of the model's 200k window");
    expect(afterTurn(newGuard(), turn({ input: 100_000 }), { maxContextPct: 80 }).stop).toBeUndefined();
  });
});

describe("prices from the wire's model ids", () => {
  it("prices Claude ids by version where they differ, newer ids and aliases by family; unknown models have none", async () => {
    const { costOf } = await import("../../src/core/prices.ts");
    const million = { input: 1_000_000 };
    expect(costOf("claude-opus-4-1-20250805", million)).toBe(15);
    expect(costOf("claude-opus-4-5-20251101", million)).toBe(5);
    expect(costOf("claude-opus-4-8", million)).toBe(5);
    expect(
      costOf("claude-sonnet-5", { input: 1_000_000, cacheRead: 1_000_000, output: 1_000_000 }),
    ).toBeCloseTo(18.3);
    expect(costOf("anthropic/claude-haiku-4-5", million)).toBe(1);
    expect(costOf("gpt-5-codex", { input: 1_000_000, output: 1_000_000 })).toBeCloseTo(11.25);
    expect(costOf("o4-mini", { cacheRead: 1_000_000 })).toBeCloseTo(0.275);
    expect(costOf("scripted-model", million)).toBeNull();
  });
});
