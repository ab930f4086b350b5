import { describe, expect, it } from "vitest";
import { addUsage, emptyUsage, totalTokens } from "../../src/core/usage.ts";

describe("usage", () => {
  it("adds partial figures and totals every token class", () => {
    const u = addUsage(addUsage(emptyUsage(), { input: 10, output: 5 }), {
      cacheRead: 100,
      cacheWrite: 7,
      reasoning: 2,
    });
    expect(u).toEqual({ input: 10, output: 5, cacheRead: 100, cacheWrite: 7, reasoning: 2 });
    expect(totalTokens(u)).toBe(122);
  });
});

describe("combineTotals", () => {
  it("adds a plan phase and a work phase into one run's figures", async () => {
    const { combineTotals } = await import("../../src/core/usage.ts");
    const plan = {
      usage: { input: 10, output: 1, cacheRead: 5, cacheWrite: 2, reasoning: 0 },
      costUsd: 0.01,
      turns: 1,
      durationMs: 100,
      model: "m1",
    };
    const work = {
      usage: { input: 20, output: 3, cacheRead: 7, cacheWrite: 0, reasoning: 1 },
      costUsd: 0.02,
      turns: 2,
      durationMs: 300,
      model: "m2",
      credential: "key-a",
    };
    const both = combineTotals(plan, work)!;
    expect(both.usage).toEqual({ input: 30, output: 4, cacheRead: 12, cacheWrite: 2, reasoning: 1 });
    expect(both.costUsd).toBeCloseTo(0.03);
    expect(both).toMatchObject({ turns: 3, durationMs: 400, model: "m2", credential: "key-a" });
    expect(combineTotals(undefined, work)).toBe(work);
    expect(combineTotals({ ...plan, costUsd: null }, { ...work, costUsd: null })!.costUsd).toBeNull();
  });
});
