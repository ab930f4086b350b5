import { describe, expect, it } from "vitest";
import { pathMatches } from "../../src/app/on-pr-review.ts";
import { parseFleetCommand } from "../../src/core/commands.ts";
import {
  buildReview,
  commentableLines,
  MAX_INLINE_COMMENTS,
  parseAgentReview,
  reviewJsonIn,
} from "../../src/core/pr-review.ts";

const PATCH = ["@@ -1,3 +1,4 @@", " a", "-b", "+B", "+C", " d", "@@ -10,2 +11,2 @@", " x", "+y"].join("\n");
const FILES = [{ filename: "src/a.ts", status: "modified", patch: PATCH }];

describe("agent review of a pull request", () => {
  it("knows which new-side lines the diff shows", () => {
    expect([...commentableLines(FILES).get("src/a.ts")!]).toEqual([1, 2, 3, 4, 11, 12]);
  });

  it("puts findings on diff lines inline and the rest in the summary, mentions made inert", () => {
    const built = buildReview(
      {
        summary: "Looks fine, @octocat",
        comments: [
          { path: "src/a.ts", line: 2, body: "B is wrong" },
          { path: "src/a.ts", line: 7, body: "not in the diff" },
          { path: "other.ts", line: 1, body: "file not in the diff" },
        ],
      },
      FILES,
      "Header",
    );
    expect(built.comments).toEqual([{ path: "src/a.ts", line: 2, side: "RIGHT", body: "B is wrong" }]);
    expect(built.moved).toBe(2);
    expect(built.body).toContain("`src/a.ts` line 7: not in the diff");
    expect(built.body).toContain("`other.ts` line 1: file not in the diff");
    expect(built.body).not.toContain("@octocat");
  });

  it("caps the inline comments", () => {
    const many = Array.from({ length: MAX_INLINE_COMMENTS + 3 }, () => ({
      path: "src/a.ts",
      line: 3,
      body: "x",
    }));
    const built = buildReview({ summary: "s", comments: many }, FILES, "H");
    expect(built.comments).toHaveLength(MAX_INLINE_COMMENTS);
    expect(built.moved).toBe(3);
  });

  it("reads REVIEW.json, or the JSON of a final answer, and says what is wrong otherwise", () => {
    expect(parseAgentReview(undefined)).toMatchObject({ problem: expect.stringContaining("REVIEW.json") });
    expect(parseAgentReview("{")).toMatchObject({ problem: expect.stringContaining("not JSON") });
    expect(parseAgentReview('{"comments": []}')).toMatchObject({
      problem: expect.stringContaining("summary"),
    });
    const text =
      'Done.\n```json\n{"summary": "ok", "comments": [{"path": "./src/a.ts", "line": 3, "body": "b"}]}\n```';
    expect(parseAgentReview(reviewJsonIn(text))).toEqual({
      summary: "ok",
      comments: [{ path: "src/a.ts", line: 3, body: "b" }],
    });
  });

  it("parses `/fleet review [coder[:model]]` on pull requests only", () => {
    expect(parseFleetCommand("/fleet review", { onPullRequest: true })).toEqual({ kind: "review" });
    expect(parseFleetCommand("/fleet review codex:o4-mini", { onPullRequest: true })).toEqual({
      kind: "review",
      coder: "codex",
      model: "o4-mini",
    });
    expect(parseFleetCommand("/fleet review", {})).toMatchObject({ kind: "error" });
    expect(parseFleetCommand("/fleet review the names", { onPullRequest: true })).toEqual({
      kind: "instructions",
      text: "review the names",
    });
    expect(parseFleetCommand("/fleet review Codex!", { onPullRequest: true })).toMatchObject({
      kind: "error",
    });
  });

  it("review_paths: globs over the PR's files (none: every file)", () => {
    expect(pathMatches("src/a/b.ts", [])).toBe(true);
    expect(pathMatches("src/a/b.ts", ["src/**"])).toBe(true);
    expect(pathMatches("src/a/b.ts", ["**/*.ts"])).toBe(true);
    expect(pathMatches("src/a/b.ts", ["docs/**", "*.md"])).toBe(false);
    expect(pathMatches("README.md", ["*.md"])).toBe(true);
    expect(pathMatches("src/x.js", ["src"])).toBe(true);
  });
});
