import { describe, expect, it } from "vitest";
import type { RunTotals } from "../../src/core/usage.ts";
import { planMarker, renderPlanComment } from "../../src/render/plan-comment.ts";
import { renderPrBody } from "../../src/render/pr-body.ts";
import { fence, GITHUB_COMMENT_LIMIT, logTail, renderRunReport } from "../../src/render/run-report.ts";
import { renderTokenReport, renderTokenTable } from "../../src/render/token-report.ts";

const totals = (over: Partial<RunTotals> = {}): RunTotals => ({
  usage: { input: 1200, output: 345, cacheRead: 300, cacheWrite: 50, reasoning: 0 },
  costUsd: 0.0123,
  turns: 3,
  durationMs: 65_000,
  model: "claude-sonnet-4-5",
  credential: "ANTHROPIC_API_KEY",
  ...over,
});

describe("token report", () => {
  it("shows every figure the design asks for", () => {
    const body = renderTokenReport({ taskId: "fl-1", outcome: "pull request #3 opened", totals: totals() });
    expect(body).toContain("<!-- fleet:token-report fl-1 -->");
    for (const s of [
      "1,200",
      "345",
      "300",
      "50",
      "$0.0123",
      "| Turns | 3 |",
      "1m 5s",
      "`claude-sonnet-4-5`",
      "`ANTHROPIC_API_KEY`",
    ]) {
      expect(body).toContain(s);
    }
  });

  it("adds a total column when a plan phase ran, and says when no cost was reported", () => {
    const table = renderTokenTable(totals({ costUsd: null }), totals({ costUsd: null }));
    expect(table).toContain("| Input tokens | 1,200 | 1,200 | 2,400 |");
    expect(table).toContain("not reported");
  });
});

describe("plan comment", () => {
  it("is short and open when the plan is short, with the approval hint when waiting", () => {
    const body = renderPlanComment({ taskId: "fl-1", plan: "1. Do it", awaitingApproval: true });
    expect(body).toContain(planMarker("fl-1"));
    expect(body).not.toContain("<details>");
    expect(body).toContain("/fleet approve");
  });

  it("collapses a long plan and stays within GitHub's limit", () => {
    const plan = Array.from({ length: 5000 }, (_, i) => `${i}. step ${"x".repeat(30)}`).join("\n");
    const body = renderPlanComment({ taskId: "fl-1", plan, awaitingApproval: false });
    expect(body).toContain("<details>");
    expect(body.length).toBeLessThanOrEqual(GITHUB_COMMENT_LIMIT);
  });
});

describe("PR body", () => {
  it("closes the issue and carries summary, tests and token table", () => {
    const body = renderPrBody({
      taskId: "fl-1",
      issue: 7,
      coder: "claude",
      model: "m",
      summary: "Added HELLO.md",
      testsRun: ["npm test: 3 passed"],
      followUps: ["docs"],
      totals: totals(),
    });
    expect(body).toMatch(/^<!-- fleet:pr fl-1 -->\nCloses #7\n/);
    expect(body).toContain("Added HELLO.md");
    expect(body).toContain("- npm test: 3 passed");
    expect(body).toContain("## Follow-ups");
    expect(body).toContain("| Input tokens | 1,200 |");
  });

  it("says so when RESULT.json was unusable", () => {
    const body = renderPrBody({
      taskId: "t",
      issue: 1,
      coder: "c",
      model: "m",
      resultProblem: "RESULT.json is not JSON",
    });
    expect(body).toContain("_The agent left no summary._");
    expect(body).toContain("RESULT.json is not JSON");
  });
});

describe("run report", () => {
  it("fits a huge log into one comment, keeping its tail, with a note", () => {
    const log = Array.from({ length: 20_000 }, (_, i) => `{"line":${i}}`).join("\n");
    const body = renderRunReport({ taskId: "fl-1", outcome: "failed", reason: "exit 1", log });
    expect(body.length).toBeLessThanOrEqual(GITHUB_COMMENT_LIMIT);
    expect(body).toContain('{"line":19999}');
    expect(body).not.toContain('{"line":0}\n');
    expect(body).toMatch(/Showing the last \d+ of 20000 lines/);
    expect(body).toContain("<details>");
    expect(body).toContain("/fleet retry");
  });

  it("speaks local in local mode: next steps name `fleet retry <id>`, never a /fleet comment", () => {
    for (const outcome of ["failed", "timeout", "stall", "no-changes"] as const) {
      const local = renderRunReport({ taskId: "fl-7", outcome, reason: "exit 1", local: true });
      expect(local).toContain("`fleet retry fl-7`");
      expect(local).not.toMatch(/`\/fleet\b/);
      expect(renderRunReport({ taskId: "fl-7", outcome, reason: "exit 1" })).toContain(
        "comment `/fleet retry`",
      );
    }
    // A round on the task's branch: no pull request to comment on locally.
    const round = renderRunReport({
      taskId: "fl-7",
      outcome: "no-changes",
      onPullRequest: true,
      local: true,
    });
    expect(round).not.toMatch(/`\/fleet\b/);
  });

  it("a posted review is the review's outcome, with no advice to retry", () => {
    const body = renderRunReport({
      taskId: "fl-9",
      outcome: "no-changes",
      reason: "Posted a review of #4 with 2 inline comments.",
      prReview: true,
    });
    expect(body).toContain("posted its review of the pull request");
    expect(body).not.toContain("no pull request was opened");
    expect(body).not.toContain("retry");
    // A review that failed still says how to run it again.
    expect(renderRunReport({ taskId: "fl-9", outcome: "failed", prReview: true })).toContain("/fleet retry");
  });

  it("explains a no-change run", () => {
    const body = renderRunReport({
      taskId: "t",
      outcome: "no-changes",
      reason: "The agent changed no files.",
    });
    expect(body).toContain("no pull request");
    expect(body).toContain("The agent changed no files.");
  });

  it("cannot be broken out of by backticks in the log", () => {
    expect(fence("a ```` b")).toMatch(/^`{5}\n/);
    expect(logTail("a\nb\nc", 4)).toEqual({ text: "b\nc", omittedLines: 1, totalLines: 3 });
  });
});
