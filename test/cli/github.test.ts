import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentNotesDir } from "../../src/worker/workspace/artifacts.ts";
import { worktreePath } from "../../src/worker/workspace/worktree.ts";
import { type Harness, startHarness } from "../support/harness.ts";
import { cliEnv, fleet } from "./cli-helpers.ts";

const FLEET_YML = "dispatch: local\nplan_phase: false\ntimeouts: { run_minutes: 2, stall_minutes: 1 }\n";
const USAGE = {
  input_tokens: 1000,
  output_tokens: 50,
  cache_read_input_tokens: 200,
  cache_creation_input_tokens: 20,
};

describe("fleet CLI against GitHub (the offline emulator with the real Fleet app)", () => {
  let h: Harness;
  let home: string;
  let env: Record<string, string>;
  const cli = async (...args: string[]) => {
    const t = Date.now();
    const r = await fleet([...args, "--repo", h.full, "--api-url", h.gh.url], { cwd: home, env });
    if (process.env.FLEET_TEST_DEBUG)
      console.error(args.join(" "), r.exitCode, Date.now() - t, r.stderr.slice(-2000));
    return r;
  };
  const json = async (...args: string[]) => {
    const r = await cli(...args, "--json");
    expect(r.exitCode, r.stderr).toBe(0);
    return JSON.parse(r.stdout);
  };

  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": FLEET_YML } });
    home = await mkdtemp(join(tmpdir(), "fleet-cli-gh-"));
    env = cliEnv({
      FLEET_HOME: home,
      GITHUB_TOKEN: h.gh.userToken("mona"),
      ANTHROPIC_API_KEY: "sk-ant-gh-test-credential-00000",
    });
  });
  afterAll(async () => {
    await h?.stop();
    if (home) await rm(home, { recursive: true, force: true });
  });

  it("config set caps the app's scheduler; bd create opens labeled issues; run takes the task to a PR", async () => {
    // The cap is stored in the repository state, where the app's scheduler reads it.
    expect((await cli("config", "set", "max_concurrent=1")).exitCode).toBe(0);
    const shown = await json("config", "show");
    expect(shown.config).toMatchObject({ max_concurrent: 1, dispatch: "local", plan_phase: false });

    const first = await json("bd", "create", "--title", "Add FIRST.md", "--description", "Create FIRST.md.");
    const second = await json(
      "bd",
      "create",
      "--title",
      "Add SECOND.md",
      "--description",
      "Create SECOND.md.",
      "--coder",
      "claude",
      "--model",
      "opus",
      "--priority",
      "3",
      "--labels",
      "docs",
    );
    expect(first.labels).toEqual(["fleet:claude"]);
    expect(second.labels).toEqual(["fleet:claude:opus", "fleet:p3", "docs"]);
    await h.settle();

    const rows = await json("tasks");
    const byIssue = Object.fromEntries(rows.map((r: { issue: number }) => [r.issue, r]));
    expect(byIssue[first.issue]).toMatchObject({ state: "dispatched", coder: "claude", model: "sonnet" });
    expect(byIssue[second.issue]).toMatchObject({ state: "queued", model: "opus", priority: 3 });

    // kill goes through the repository queue (dispatch: local).
    const killed = await json("kill", `#${second.issue}`);
    expect(killed.state).toBe("cancelled");

    const id = byIssue[first.issue].id as string;
    const notes = agentNotesDir(worktreePath(join(home, "work"), id), id);
    let model: ScriptServer | undefined;
    try {
      model = await startAnthropicScriptServer({
        turns: [
          {
            toolUses: [
              { name: "Bash", input: { command: 'echo "made by fleet" > FIRST.md', description: "write" } },
              { name: "Write", input: { file_path: join(notes, "PLAN.md"), content: "1. Write FIRST.md\n" } },
              { name: "Write", input: { file_path: join(notes, "KNOWLEDGE.md"), content: "Tiny repo.\n" } },
            ],
            usage: USAGE,
          },
          { text: "Wrote FIRST.md.", usage: USAGE },
        ],
      });
      const run = await cli(
        "run",
        "--until-idle",
        "--poll",
        "500",
        "--model-base-url",
        model.url,
        "--agent-env",
        "CLAUDE_CODE_MAX_RETRIES=0",
      );
      expect(run.exitCode, run.stderr).toBe(0);
      expect(run.stderr).toMatch(/pr-opened \(PR #\d+/);
    } finally {
      await model?.stop();
    }

    const after = (await json("tasks", "--all")).find((r: { id: string }) => r.id === id);
    expect(after).toMatchObject({ state: "pr-open", tokens: { input: 2000, output: 100, cacheRead: 400 } });
    const pr = h.gh.pulls(h.full).find((p) => p.number === after.pr)!;
    expect(pr.body).toContain(`Closes #${first.issue}`);

    expect((await cli("task", id, "log")).stdout).toContain("Wrote FIRST.md.");
    expect((await cli("task", `#${first.issue}`, "plan")).stdout).toBe("1. Write FIRST.md");
    const missing = await cli("task", id, "result");
    expect(missing.exitCode).toBe(3);
    expect(missing.stderr).toMatch(/has no RESULT\.json: looked for .*RESULT\.json/);
    // On GitHub the pull request is merged there; a plan is approved only while it waits.
    const merge = await cli("merge", id);
    expect(merge.exitCode).toBe(1);
    expect(merge.stderr).toMatch(
      /fleet merge is for local mode\. On octo-org\/widgets, merge the task's pull request on GitHub/,
    );
    const approve = await cli("approve", id);
    expect(approve.exitCode).toBe(1);
    expect(approve.stderr).toMatch(/is pr-open; only a task whose plan waits for approval/);
  }, 300_000);

  it("says what is wrong with the target", async () => {
    const noToken = await fleet(["tasks", "--repo", h.full, "--api-url", h.gh.url], {
      cwd: home,
      env: cliEnv({ FLEET_HOME: home, PATH: "/usr/bin:/bin" }),
    });
    expect(noToken.exitCode).toBe(1);
    expect(noToken.stderr).toMatch(/No GitHub token for octo-org\/widgets: set GITHUB_TOKEN/);
    const missing = await fleet(["tasks", "--repo", "octo-org/nope", "--api-url", h.gh.url], {
      cwd: home,
      env,
    });
    expect(missing.exitCode).toBe(1);
    expect(missing.stderr).toMatch(/GitHub answered 404.*Check --repo/);
  }, 60_000);
});
