import { describe, expect, it } from "vitest";
import { variantBranchName } from "../../src/core/branch.ts";
import { newTask, summarizeResult, type Task } from "../../src/core/task.ts";
import {
  abComparisonMarker,
  abFinished,
  abRoundKey,
  abSides,
  renderAbComparison,
} from "../../src/render/ab-comparison.ts";

const usage = (input: number, output: number) => ({
  input,
  output,
  cacheRead: 0,
  cacheWrite: 0,
  reasoning: 0,
});
const task = (id: string, coder: string, model: string, patch: Partial<Task> = {}): Task => ({
  ...newTask({ id, repo: "o/r", issue: 7, title: "Add it", coder, model, now: "2025-03-01T12:00:00.000Z" }),
  ...patch,
});

describe("RESULT.json in figures", () => {
  it("counts the tests that say they passed and name no failure", () => {
    expect(
      summarizeResult(2, {
        status: "done",
        testsRun: [
          "npm test: ok",
          "pytest: 3 passed",
          "lint: 2 errors",
          "e2e: 1 failed, 4 passed",
          "smoke ✓",
        ],
      }),
    ).toEqual({ attempt: 2, status: "done", testsRun: 5, testsPassed: 3 });
    expect(summarizeResult(1)).toEqual({ attempt: 1 });
    expect(summarizeResult(1, { status: "partial" })).toEqual({
      attempt: 1,
      status: "partial",
      testsRun: 0,
      testsPassed: 0,
    });
  });
});

describe("A/B sides", () => {
  it("are the latest task of each coder/model on the issue, and only when there are two or more", () => {
    const a = task("fl-a", "claude", "opus");
    const b = task("fl-b", "claude", "sonnet", { createdAt: "2025-03-01T12:00:01.000Z" });
    const other = { ...task("fl-c", "codex", "gpt"), issue: 8 };
    expect(abSides([a, b, other], 7).map((t) => t.id)).toEqual(["fl-a", "fl-b"]);
    expect(abSides([a, other], 7)).toEqual([]);
  });

  it("queued together (one create with several sides), keep the order they were queued in, whatever their ids", () => {
    const first = task("fl-z", "claude", "sonnet");
    const second = task("fl-a", "claude", "opus");
    expect(abSides([first, second], 7).map((t) => t.id)).toEqual(["fl-z", "fl-a"]);
  });

  it("are finished when each has the worker's record of its attempt, or failed or was cancelled", () => {
    const recorded = (t: Task): Task => ({ ...t, attempts: 1, result: { attempt: 1 } });
    const a = recorded(task("fl-a", "claude", "opus", { state: "pr-open" }));
    // pr-open from the PR's webhook, before the worker recorded the run's figures.
    const b = task("fl-b", "claude", "sonnet", { state: "pr-open", attempts: 1 });
    expect(abFinished([a, b])).toBe(false);
    expect(abFinished([a, recorded(b)])).toBe(true);
    expect(abFinished([a, { ...b, state: "failed" }])).toBe(true);
    expect(abFinished([a, { ...b, state: "running" }])).toBe(false);
    expect(abFinished([a])).toBe(false);
    // A side run again is a new round.
    expect(abRoundKey([a, recorded(b)])).toBe("fl-a#1,fl-b#1");
    expect(abRoundKey([a, { ...recorded(b), attempts: 2 }])).toBe("fl-a#1,fl-b#2");
  });

  it("get their own branches", () => {
    expect(variantBranchName(7, "Add it", "claude", "opus")).toBe("fleet/7-add-it-claude-opus");
    expect(variantBranchName(7, "Add it", "codex", "gpt-5.1-codex")).toBe(
      "fleet/7-add-it-codex-gpt-5-1-codex",
    );
  });
});

describe("the comparison comment", () => {
  it("has a column per side with tokens, cost, duration, turns, diff and tests, and names the cheaper side", () => {
    const body = renderAbComparison(7, [
      {
        taskId: "fl-a",
        coder: "claude",
        model: "opus",
        state: "pr-open",
        pr: { number: 11 },
        totals: {
          usage: usage(12_000, 800),
          costUsd: 0.25,
          turns: 6,
          durationMs: 95_000,
          model: "claude-opus-4",
        },
        diff: { files: 2, additions: 40, deletions: 3 },
        result: { attempt: 1, status: "done", testsRun: 2, testsPassed: 2 },
      },
      {
        taskId: "fl-b",
        coder: "claude",
        model: "sonnet",
        state: "pr-open",
        pr: { number: 12 },
        totals: {
          usage: usage(9_000, 500),
          costUsd: 0.05,
          turns: 4,
          durationMs: 40_000,
          model: "claude-sonnet-4-5",
        },
        diff: { files: 1, additions: 12, deletions: 0 },
        result: { attempt: 1 },
      },
    ]);
    expect(body.startsWith(abComparisonMarker(7))).toBe(true);
    expect(body).toContain("|  | `claude:opus` | `claude:sonnet` |");
    expect(body).toContain("| Pull request | #11 | #12 |");
    expect(body).toContain("| Tokens | 12,800 | 9,500 |");
    expect(body).toContain("| Cost | $0.2500 | $0.0500 |");
    expect(body).toContain("| Duration | 1m 35s | 40s |");
    expect(body).toContain("| Turns | 6 | 4 |");
    expect(body).toContain("| Diff | 2 files, +40 −3 | 1 files, +12 −0 |");
    expect(body).toContain("| Tests passed / run | 2 / 2 | — |");
    expect(body).toContain("| Agent's verdict | done | no RESULT.json |");
    expect(body).toContain("Cheapest: `claude:sonnet` (fl-b).");
  });

  it("shows a failed side without figures and names no cheapest side without two priced PRs", () => {
    const body = renderAbComparison(7, [
      { taskId: "fl-a", coder: "claude", model: "opus", state: "failed" },
      {
        taskId: "fl-b",
        coder: "codex",
        model: "gpt|5",
        state: "pr-open",
        pr: { number: 12 },
        totals: { usage: usage(100, 10), costUsd: null, turns: 1, durationMs: 1_000, model: "gpt-5" },
      },
    ]);
    expect(body).toContain("| Outcome | failed | pr-open |");
    expect(body).toContain("| Cost | — | not reported |");
    // A pipe in a name cannot break the table.
    expect(body).toContain("`codex:gpt\\|5`");
    expect(body).not.toContain("Cheapest");
  });
});
