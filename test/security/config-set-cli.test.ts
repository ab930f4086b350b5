import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";
import { cliEnv, fleet } from "../cli/cli-helpers.ts";
import { type Harness, startHarness } from "../support/harness.ts";

describe("fleet config set (the real CLI against the emulator): operational keys only", () => {
  let h: Harness;
  let home: string;
  beforeAll(async () => {
    h = await startHarness({
      files: { ".github/fleet.yml": "dispatch: local\nbudgets: { daily_usd: 10 }\n" },
    });
    home = await mkdtemp(join(tmpdir(), "fleet-cli-cp-"));
  });
  afterAll(async () => {
    await h?.stop();
    if (home) await rm(home, { recursive: true, force: true });
  });

  const cli = (...args: string[]) =>
    fleet([...args, "--repo", h.full, "--api-url", h.gh.url], {
      cwd: home,
      env: cliEnv({ FLEET_HOME: home, GITHUB_TOKEN: h.gh.userToken("mona") }),
    });

  it("refuses file-only keys and raised budgets with the reason, and stores nothing", async () => {
    const credentials = await cli("config", "set", "coders.claude.credentials=GITHUB_TOKEN");
    expect(credentials.exitCode).not.toBe(0);
    expect(credentials.stderr).toContain("coders.claude.credentials is file-only");
    expect(credentials.stderr).toContain(".github/fleet.yml on the default branch");
    const roles = await cli("config", "set", "allowed_roles=read");
    expect(roles.stderr).toContain("allowed_roles is file-only");
    const budget = await cli("config", "set", "budgets.daily_usd=25");
    expect(budget.exitCode).not.toBe(0);
    expect(budget.stderr).toContain("budgets.daily_usd can only be lowered");
    const store = createGitHubStateStore({ github: githubOverOctokit(h.mona), owner: h.owner, repo: h.name });
    expect((await store.read()).doc.config).toEqual({});

    const lowered = await cli("config", "set", "budgets.daily_usd=5", "max_concurrent=4");
    expect(lowered.exitCode, lowered.stderr).toBe(0);
    expect((await store.read()).doc.config).toEqual({ "budgets.daily_usd": 5, max_concurrent: 4 });
    const help = await cli("config", "--help");
    expect(help.stdout).toContain("File-only keys (.github/fleet.yml on the default branch): ");
  });
});
