// `npm run demo -- --coder <name>` for the coders beside Claude (test/e2e/demo.test.ts runs Claude):
// the whole loop offline with the real CLI of each against its own scripted model API.
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import { demoTokens } from "../../src/demo/coder-scripts.ts";

describe("npm run demo -- --coder <name> --json", () => {
  it.each(["gemini", "opencode", "codex"] as const)(
    "%s: the loop ends with a pull request and the script's tokens",
    async (coder) => {
      const { stdout, stderr, exitCode } = await execa(
        "npx",
        ["tsx", "src/demo/main.ts", "--coder", coder, "--json"],
        { reject: false, timeout: 120_000 },
      );
      expect(exitCode, stderr).toBe(0);
      const result = JSON.parse(stdout.trim().split("\n").at(-1)!);
      expect(result.pr.head).toMatch(/^fleet\/\d+-add-a-changelog$/);
      expect(result.issue.comments).toBeGreaterThanOrEqual(1);
      // Three scripted turns (plan, work, summary), in Fleet's terms whatever the API's way of counting.
      expect(result.tokens).toMatchObject(demoTokens(coder));
      const runs = result.ci.runs as Array<{ event: string; branch: string }>;
      expect(runs.some((r) => r.event === "pull_request" && r.branch === result.pr.head)).toBe(true);
    },
    120_000,
  );

  it("refuses a coder it cannot run, naming the ones it can", async () => {
    const { stderr, exitCode } = await execa("npx", ["tsx", "src/demo/main.ts", "--coder", "agy"], {
      reject: false,
    });
    expect(exitCode).toBe(2);
    expect(stderr).toContain("--coder takes claude, codex, gemini, opencode");
  });
});
