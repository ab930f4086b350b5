import { describe, expect, it } from "vitest";
import { JOINER } from "../../src/core/published-text.ts";
import { renderPlanComment } from "../../src/render/plan-comment.ts";
import { renderPrBody } from "../../src/render/pr-body.ts";
import { renderRunReport } from "../../src/render/run-report.ts";

// The renderers that quote an agent: what they publish is bounded, says what it left out, and pings
// nobody (RESULT.json's text is quoted when it is parsed: see test/worker/artifacts.test.ts).

const LIVE_AT = /(?:^|[^\w])@[A-Za-z0-9]/;
/** Outside code spans (text a person wrote is quoted without the joiner). */
const outsideCode = (md: string) => md.replace(/(`+)[^`]+\1/g, "");
const many = (n: number, what: string) => Array.from({ length: n }, (_, i) => `${what} ${i}`);
const pr = { taskId: "fl-1", issue: 7, coder: "claude", model: "sonnet" };

describe("PR body", () => {
  it("lists at most 30 follow-ups and says how many more there are", () => {
    const body = renderPrBody({ ...pr, followUps: many(120, "Follow-up") });
    expect(body).toContain("- Follow-up 29");
    expect(body).not.toContain("- Follow-up 30");
    expect(body).toContain("… and 90 more (`fleet task fl-1 result`).");
  });

  it("says how many follow-ups max_follow_ups left out of the issues, and nothing when none were", () => {
    const capped = renderPrBody({ ...pr, followUps: many(12, "F"), maxFollowUps: 5 });
    expect(capped).toContain(
      "Fleet files at most 5 follow-ups of a run as issues (`max_follow_ups`): 7 were left out.",
    );
    expect(renderPrBody({ ...pr, followUps: many(5, "F"), maxFollowUps: 5 })).not.toContain("left out");
    expect(renderPrBody({ ...pr, followUps: many(2, "F"), maxFollowUps: 0 })).toContain(
      "Fleet files no follow-ups as issues (`max_follow_ups` is 0): 2 were left out.",
    );
  });

  it("bounds each part the agent wrote, so the token table always fits", () => {
    const body = renderPrBody({
      ...pr,
      summary: "s".repeat(100_000),
      testsRun: many(500, `t${"x".repeat(2_000)}`),
      followUps: [`long ${"y".repeat(5_000)}`],
    });
    expect(body).toContain("## Tokens\n\n_No token figures");
    expect(body).toMatch(/s+\n\n… [\d,]+ characters left out/);
    expect(body).toContain("… and 450 more (`fleet task fl-1 result`).");
    expect(body.split("\n").every((l) => l.length <= 20_100)).toBe(true);
    expect(body).not.toContain("y".repeat(501));
    expect(body.length).toBeLessThanOrEqual(65_536);
  });
});

describe("run report", () => {
  it("says how many follow-ups were left out of the issues", () => {
    const body = renderRunReport({
      taskId: "fl-1",
      outcome: "no-changes",
      followUps: { listed: many(9, "F"), max: 4 },
    });
    expect(body).toContain(
      "Fleet files at most 4 follow-ups of a run as issues (`max_follow_ups`): 5 were left out. They are kept with the run: `fleet task fl-1 result`.",
    );
    expect(
      renderRunReport({ taskId: "fl-1", outcome: "no-changes", followUps: { listed: many(3, "F"), max: 4 } }),
    ).not.toContain("left out");
  });

  it("quotes a mention in the reason, as the tracking comment does", () => {
    const body = renderRunReport({
      taskId: "fl-1",
      outcome: "failed",
      reason: "The agent failed: ask @octo-org/everyone",
    });
    expect(body).toContain("ask `@octo-org/everyone`");
    expect(outsideCode(body)).not.toMatch(LIVE_AT);
  });
});

describe("plan comment", () => {
  it("quotes the agent's plan: no mention, no reference to another repository, in any markdown", () => {
    const body = renderPlanComment({
      taskId: "fl-1",
      plan: "1. Ask @mona\n2. <details>\n@octo-org/everyone\n</details>\n3. Fixes #3, like other/repo#4",
      awaitingApproval: false,
    });
    expect(body).not.toMatch(LIVE_AT);
    expect(body).toContain(`\`@${JOINER}mona\``);
    expect(body).toContain(`Fixes \`#${JOINER}3\``);
    expect(body).not.toContain("other/repo#4");
  });
});
