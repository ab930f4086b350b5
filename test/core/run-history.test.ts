import { describe, expect, it } from "vitest";
import {
  appendRun,
  MAX_RUN_RECORDS,
  type RunRecord,
  runKindOf,
  sumRuns,
} from "../../src/core/run-history.ts";
import type { RunTotals } from "../../src/core/usage.ts";

const totals = (input: number, costUsd: number | null = 0.01): RunTotals => ({
  usage: { input, output: 10, cacheRead: 0, cacheWrite: 0, reasoning: 0 },
  costUsd,
  turns: 1,
  durationMs: 1_000,
  model: "m",
});
const run = (input: number, kind: RunRecord["kind"] = "work"): RunRecord => ({
  kind,
  at: `2026-01-01T00:00:${String(input % 60).padStart(2, "0")}Z`,
  totals: totals(input),
});

describe("run history", () => {
  it("appends runs in order and adds them up", () => {
    const runs = appendRun(appendRun(undefined, run(100)), run(50, "review"));
    expect(runs.map((r) => r.kind)).toEqual(["work", "review"]);
    expect(sumRuns(runs)).toMatchObject({ usage: { input: 150, output: 20 }, turns: 2, durationMs: 2_000 });
    expect(sumRuns([])).toBeUndefined();
  });

  it("keeps at most MAX_RUN_RECORDS rows without losing any tokens", () => {
    let runs: RunRecord[] | undefined;
    for (let i = 1; i <= MAX_RUN_RECORDS + 5; i++) runs = appendRun(runs, run(i));
    expect(runs).toHaveLength(MAX_RUN_RECORDS);
    const n = MAX_RUN_RECORDS + 5;
    expect(sumRuns(runs!)?.usage.input).toBe((n * (n + 1)) / 2);
    expect(runs!.at(-1)!.totals.usage.input).toBe(n);
  });

  it("names the next run by what the task was asked for", () => {
    expect(runKindOf({})).toBe("work");
    expect(runKindOf({ instructions: "rename it" })).toBe("review");
    expect(runKindOf({ rebase: { why: "x" }, instructions: "y" })).toBe("rebase");
  });
});
