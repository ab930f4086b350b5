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
    expect(result.issue.comments).toBeGreaterThanOrEqual(2);
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
});
