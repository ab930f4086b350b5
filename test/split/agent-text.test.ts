import { describe, expect, it } from "vitest";
import { JOINER } from "../../src/core/published-text.ts";
import { renderSplitDone, renderSubIssueBody } from "../../src/render/split.ts";
import { validateSplitPlan } from "../../src/split/plan.ts";

// A split plan is an agent's text that becomes issues: quoted and bounded when it is read.

const LIVE_AT = /(?:^|[^\w])@[A-Za-z0-9]/;

describe("a split plan's text", () => {
  it("becomes sub-issue titles and bodies that ping nobody and reference no other repository", () => {
    const r = validateSplitPlan(
      {
        tasks: [
          {
            key: "db",
            title: "Ask @octo-org/everyone about other/repo#4",
            body: "Fixes #2.\n<details>\n@mona\n</details>",
          },
        ],
      },
      ["claude"],
    );
    if (!r.ok) throw new Error(JSON.stringify(r.problems));
    const [t] = r.plan.tasks;
    expect(t!.title).toBe(`Ask \`@${JOINER}octo-org/everyone\` about \`other/repo#${JOINER}4\``);
    const body = renderSubIssueBody(t!.body, 1, t!.key, []);
    expect(body).toContain(`Fixes \`#${JOINER}2\``);
    expect(body).toContain("Part of #1 (split by Fleet).");
    for (const text of [t!.title, body, renderSplitDone(1, r.plan, new Map([["db", 2]]))])
      expect(text).not.toMatch(LIVE_AT);
  });

  it("is bounded: titles to GitHub's 256 characters, bodies with a note", () => {
    const r = validateSplitPlan(
      { tasks: [{ key: "a", title: `${"@x ".repeat(85)}`, body: "b".repeat(100_000) }] },
      ["claude"],
    );
    if (!r.ok) throw new Error(JSON.stringify(r.problems));
    const [t] = r.plan.tasks;
    expect([...t!.title].length).toBeLessThanOrEqual(256);
    expect(t!.body.length).toBeLessThanOrEqual(20_000);
    expect(t!.body).toMatch(/b\n\n… [\d,]+ characters left out/);
  });
});
