import { describe, expect, it } from "vitest";
import { renderRebased, renderRebaseFailed, renderRebaseNotNeeded } from "../../src/render/rebase-comment.ts";

const totals = {
  usage: { input: 1200, output: 80, cacheRead: 300, cacheWrite: 40, reasoning: 0 },
  costUsd: 0.0123,
  turns: 2,
  durationMs: 4000,
  model: "claude-sonnet-4-5",
};

describe("rebase comments", () => {
  it("names the resolved files, the base commit and the agent's tokens after a rebase", () => {
    const body = renderRebased({
      why: "#12 was merged into `main`",
      branch: "fleet/7-limit",
      base: "main",
      baseSha: "0123456789abcdef",
      resolved: ["src/a.ts", "src/b.ts"],
      totals,
    });
    expect(body).toContain(
      "#12 was merged into `main`, so Fleet rebased `fleet/7-limit` onto `main` (`0123456`)",
    );
    expect(body).toContain("- `src/a.ts`\n- `src/b.ts`");
    expect(body).toContain("1,620 tokens, $0.0123 (claude-sonnet-4-5)");
  });

  it("says the commits applied cleanly when no agent was needed", () => {
    const body = renderRebased({ why: "w", branch: "fleet/1-x", base: "main", baseSha: "abc", resolved: [] });
    expect(body).toContain("The commits applied without conflicts.");
    expect(body).not.toContain("tokens");
  });

  it("names the conflicting files, the reason and what to do when the rebase failed", () => {
    const body = renderRebaseFailed({
      why: "#12 was merged into `main`",
      branch: "fleet/7-limit",
      base: "main",
      conflicts: ["src/config.ts"],
      reason: "The agent left conflict markers in `src/config.ts`.",
    });
    expect(body).toContain("`fleet/7-limit` now conflicts with `main` in these files:\n\n- `src/config.ts`");
    expect(body).toContain("The agent left conflict markers in `src/config.ts`.");
    expect(body).toContain("git rebase origin/main");
    expect(body).toContain("git push --force-with-lease origin fleet/7-limit");
    expect(body).toContain("`fleet:rebase`");
    expect(body).toContain("/fleet <instructions>");
  });

  it("reports a failure without conflicting files (a refused push) without an empty list", () => {
    const body = renderRebaseFailed({
      why: "w",
      branch: "fleet/1-x",
      base: "main",
      conflicts: [],
      reason: "refused",
    });
    expect(body).toContain("Fleet tried to rebase `fleet/1-x` onto `main`.");
    expect(body).not.toContain("in these files");
  });

  it("keeps backticks in file names from breaking the code spans", () => {
    const body = renderRebaseFailed({
      why: "w",
      branch: "fleet/1-x",
      base: "main",
      conflicts: ["a`b.ts"],
      reason: "r",
    });
    expect(body).toContain("- `a'b.ts`");
  });

  it("explains a rebase that was not needed", () => {
    expect(
      renderRebaseNotNeeded({ why: "@mona labeled `fleet:rebase`", reason: "already based." }),
    ).toContain("@mona labeled `fleet:rebase`: already based.");
  });
});
