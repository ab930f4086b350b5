import { describe, expect, it } from "vitest";
import { costOf } from "../../src/core/prices.ts";

const perMillion = (model: string) => ({
  input: costOf(model, { input: 1_000_000 }),
  output: costOf(model, { output: 1_000_000 }),
});

describe("a model variant is priced as itself, never at its base model's price", () => {
  it("prices o3-pro, gpt-5-pro, o1 and o1-pro as their providers list them", () => {
    expect(perMillion("o3-pro")).toEqual({ input: 20, output: 80 });
    expect(perMillion("o3-pro-2025-06-10")).toEqual({ input: 20, output: 80 });
    expect(perMillion("gpt-5-pro")).toEqual({ input: 15, output: 120 });
    expect(perMillion("gpt-5-pro-2025-10-06")).toEqual({ input: 15, output: 120 });
    expect(perMillion("o1")).toEqual({ input: 15, output: 60 });
    expect(perMillion("o1-2024-12-17")).toEqual({ input: 15, output: 60 });
    expect(perMillion("o1-pro")).toEqual({ input: 150, output: 600 });
  });

  it("leaves an unlisted variant unpriced (o3-deep-research, gpt-5-turbo-pro), where a date, -latest or a preview tag keeps the base price", () => {
    expect(costOf("o3-deep-research", { input: 1_000_000 })).toBeNull();
    expect(costOf("gpt-5-turbo-pro", { input: 1_000_000 })).toBeNull();
    expect(costOf("gpt-4o-audio-preview", { input: 1_000_000 })).toBeNull();
    expect(perMillion("o3-2025-04-16")).toEqual({ input: 2, output: 8 });
    expect(perMillion("gpt-5-2025-08-07")).toEqual({ input: 1.25, output: 10 });
    expect(perMillion("codex-mini-latest")).toEqual({ input: 1.5, output: 6 });
    expect(perMillion("gemini-2.5-pro-preview-06-05")).toEqual({ input: 1.25, output: 10 });
    expect(perMillion("gpt-4o-mini")).toEqual({ input: 0.15, output: 0.6 });
    expect(perMillion("gemini-2.5-flash-lite")).toEqual({ input: 0.1, output: 0.4 });
  });

  it("keeps Claude's ids priced: dated, versioned and by family", () => {
    expect(perMillion("claude-opus-4-20250514")).toEqual({ input: 15, output: 75 });
    expect(perMillion("claude-opus-4-1-20250805")).toEqual({ input: 15, output: 75 });
    expect(perMillion("claude-opus-4-5-20251101")).toEqual({ input: 5, output: 25 });
    expect(perMillion("claude-sonnet-4-5-20250929[1m]")).toEqual({ input: 3, output: 15 });
    expect(perMillion("claude-3-5-haiku-20241022")).toEqual({ input: 0.8, output: 4 });
  });
});
