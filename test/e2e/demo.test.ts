import { execa } from "execa";
import { describe, expect, it } from "vitest";

describe("npm run demo -- --json", () => {
  it("runs the whole loop offline and prints the PR, the comments and the token totals", async () => {
    const { stdout, exitCode } = await execa("npx", ["tsx", "src/demo/main.ts", "--json"], {
      reject: false,
      timeout: 240_000,
    });
    expect(exitCode).toBe(0);
    const result = JSON.parse(stdout.trim().split("\n").at(-1)!);
    expect(result.pr.number).toBeGreaterThan(0);
    expect(result.pr.head).toMatch(/^fleet\/\d+-add-a-changelog$/);
    // One comment per issue: the tracking comment carries the state, the plan and the report.
    expect(result.issue.comments).toBe(1);
    // Three scripted turns (plan, work, summary) of 2,150 input / 140 output / 9,800 cache read / 1,200 cache write.
    expect(result.tokens).toMatchObject({ input: 6450, output: 420, cacheRead: 29400, cacheWrite: 3600 });
    expect(result.tokens.costUsd).toBeGreaterThan(0);
    expect(result.api.total).toBeGreaterThan(0);
    expect(result.api.contentCreating).toBeGreaterThan(0);
    // The repository's own CI (on: [push, pull_request]) ran for the task's PR, never for fleet/state.
    const runs = result.ci.runs as Array<{ event: string; branch: string; actor: string }>;
    expect(runs.every((r) => typeof r.event === "string" && typeof r.actor === "string")).toBe(true);
    expect(runs.filter((r) => r.branch === "fleet/state")).toEqual([]);
    expect(
      runs.filter((r) => r.event === "pull_request" && r.branch === result.pr.head).length,
    ).toBeGreaterThanOrEqual(1);
  }, 300_000);

  it("--review: the agent's review of a person's pull request, one review with inline comments on the changed lines", async () => {
    const { stdout, stderr, exitCode } = await execa(
      "npx",
      ["tsx", "src/demo/main.ts", "--review", "--json"],
      {
        reject: false,
        timeout: 240_000,
      },
    );
    expect(exitCode, stderr).toBe(0);
    const result = JSON.parse(stdout.trim().split("\n").at(-1)!);
    expect(result.pr.head).toBe("mona/sum-loop");
    expect(result.review.body).toContain("skips the first element");
    // Both lines are in the diff's hunk (line 4 changed, line 1 its context): inline, as GitHub takes them.
    expect(result.review.comments).toEqual([
      expect.objectContaining({ path: "src/sum.js", line: 4, body: expect.stringContaining("Starts at 1") }),
      expect.objectContaining({ path: "src/sum.js", line: 1, body: expect.stringContaining("empty list") }),
    ]);
    // One scripted turn of 2,150 input / 140 output / 9,800 cache read / 1,200 cache write.
    expect(result.tokens).toMatchObject({ input: 2150, output: 140, cacheRead: 9800, cacheWrite: 1200 });
  }, 300_000);

  it("--dispatch actions: the same loop through Fleet's workflow and the real action bundle, default repository settings", async () => {
    const { stdout, stderr, exitCode } = await execa(
      "npx",
      ["tsx", "src/demo/main.ts", "--dispatch", "actions", "--json"],
      { reject: false, timeout: 240_000 },
    );
    expect(exitCode, stderr).toBe(0);
    const result = JSON.parse(stdout.trim().split("\n").at(-1)!);
    expect(result.pr.head).toMatch(/^fleet\/\d+-add-a-changelog$/);
    expect(result.tokens).toMatchObject({ input: 6450, output: 420, cacheRead: 29400, cacheWrite: 3600 });
    // The runner's job token could not have opened the PR (default settings); the app's token did,
    // so the repository's CI ran on it as fleet[bot]'s; fleet/state started nothing.
    const runs = result.ci.runs as Array<{ event: string; branch: string; actor: string }>;
    expect(runs.filter((r) => r.branch === "fleet/state")).toEqual([]);
    expect(runs).toContainEqual({ event: "pull_request", branch: result.pr.head, actor: "fleet[bot]" });
  }, 300_000);
});
