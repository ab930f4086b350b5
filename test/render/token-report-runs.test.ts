import { describe, expect, it } from "vitest";
import type { RunTotals } from "../../src/core/usage.ts";
import { renderTokenReport } from "../../src/render/token-report.ts";

const totals = (input: number, costUsd: number | null): RunTotals => ({
  usage: { input, output: 100, cacheRead: 10, cacheWrite: 1, reasoning: 0 },
  costUsd,
  turns: 2,
  durationMs: 30_000,
  model: "claude-sonnet-4-5",
});

describe("token report across runs", () => {
  it("has no runs table for a task's only run", () => {
    const body = renderTokenReport({ taskId: "fl-1", outcome: "x", totals: totals(900, 0.01) });
    expect(body).not.toContain("Every run of this task");
  });

  it("gives each run a row, this run last, and a total across runs", () => {
    const body = renderTokenReport({
      taskId: "fl-1",
      outcome: "pull request #4 opened or updated",
      totals: totals(700, 0.02),
      planTotals: totals(100, null),
      earlierRuns: [{ kind: "work", at: "2026-01-01T00:00:00Z", totals: totals(1_000, 0.05) }],
      runKind: "review",
    });
    expect(body).toContain("#### Every run of this task");
    expect(body).toContain("| 1. work | 1,000 | 100 | 10 | 1 | $0.0500 | 2 | 30s |");
    // This run's row adds its plan and work phases.
    expect(body).toContain("| 2. review (this run) | 800 | 200 | 20 | 2 | $0.0200 | 4 | 1m 0s |");
    expect(body).toContain(
      "| **Total (2 runs)** | **1,800** | **300** | **30** | **3** | **$0.0700** | **6** | **1m 30s** |",
    );
  });

  it("after an approved plan: the plan is its own run, this run is the work alone, and the figures agree", () => {
    const plan = totals(2_700, 0.01);
    const body = renderTokenReport({
      taskId: "fl-1",
      outcome: "pull request #4 opened or updated",
      totals: totals(2_700, 0.02),
      earlierRuns: [{ kind: "plan", at: "2026-01-01T00:00:00Z", totals: plan }],
      runKind: "work",
      agentTotals: totals(2_700, 0.02),
    });
    expect(body).toContain("| 1. plan | 2,700 |");
    expect(body).toContain("| 2. work (this run) | 2,700 |");
    expect(body).toContain("| **Total (2 runs)** | **5,400** |");
    expect(body).toContain("The agent's own report agrees with the gateway's figures");
    // This run's own table has no plan column: the plan was counted with its run.
    expect(body).not.toContain("| Plan |");
  });
});
