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
