import { access, chmod, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getAdapter } from "../../src/agents/index.ts";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";
import { pushBranch } from "../../src/worker/4-publish.ts";
import { type LocalWorker, startLocalWorker } from "../../src/worker/local-worker.ts";
import { git } from "../../src/worker/workspace/git.ts";
import { worktreePath } from "../../src/worker/workspace/worktree.ts";
import { botClient, waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";

const FLEET_YML =
  "dispatch: local\nmax_concurrent: 1\nplan_phase: false\nretries: { max: 0 }\ntimeouts: { run_minutes: 2, stall_minutes: 1 }\n";

// What GitHub answers a push to a protected branch, from a pre-receive hook in the emulator's bare repository.
// Task branches are protected; Fleet's state branch is not (Fleet could not record anything otherwise).
const PROTECT_FLEET_BRANCHES = `#!/bin/sh
while read old new ref; do
  case "$ref" in
    refs/heads/fleet/state) ;;
    refs/heads/fleet/*) echo "error: GH006: Protected branch update failed for $ref." >&2; exit 1 ;;
  esac
done
exit 0
`;

const exists = (p: string) =>
  access(p).then(
    () => true,
    () => false,
  );

describe("a push that GitHub rejects", () => {
  let h: Harness;
  let model: ScriptServer | undefined;
  let worker: LocalWorker | undefined;
  let workDir: string;

  beforeAll(async () => {
    process.env.PATH = `${resolve("node_modules/.bin")}:${process.env.PATH}`;
    h = await startHarness({ files: { ".github/fleet.yml": FLEET_YML } });
    workDir = await mkdtemp(join(tmpdir(), "fleet-push-rejected-"));
  });
  afterAll(async () => {
    await worker?.stop();
    await model?.stop();
    await h?.stop();
    if (workDir) await rm(workDir, { recursive: true, force: true });
  });

  it("fails the task with the reason on the issue, frees the slot and removes the worktree", async () => {
    const hook = join(fileURLToPath(h.cloneUrl), "hooks", "pre-receive");
    await writeFile(hook, PROTECT_FLEET_BRANCHES);
    await chmod(hook, 0o755);

    const issue = await h.newIssue("Add PUSHED.md", "Create PUSHED.md.");
    await h.label(issue, "fleet:claude");
    const task = (await h.tasks()).find((t) => t.issue === issue)!;
    expect(task.state).toBe("dispatched");

    // The real Claude CLI writes a file, so there is a commit to push.
    const path = worktreePath(workDir, task.id);
    model = await startAnthropicScriptServer({
      turns: [
        {
          toolUses: [{ name: "Write", input: { file_path: join(path, "PUSHED.md"), content: "pushed?\n" } }],
          usage: { input_tokens: 100, output_tokens: 20 },
        },
        { text: "Wrote PUSHED.md.", usage: { input_tokens: 120, output_tokens: 10 } },
      ],
    });
    const octokit = await botClient(h.gh, h.full);
    worker = startLocalWorker({
      repo: { owner: h.owner, repo: h.name },
      github: githubOverOctokit(octokit),
      store: createGitHubStateStore({ github: githubOverOctokit(octokit), owner: h.owner, repo: h.name }),
      cloneUrl: h.cloneUrl,
      workDir,
      adapterFor: getAdapter,
      credentialFor: () => ({ name: "anthropic-team", value: "sk-ant-api03-pushrejected0123456789abcdef" }),
      modelBaseUrl: model.url,
      agentEnv: { CLAUDE_CODE_MAX_RETRIES: "0" },
      pollMs: 200,
      heartbeatMs: 2_000,
      trackerIntervalMs: 0,
    });
    const failed = await waitFor(
      "the task to fail",
      async () => {
        const t = (await h.tasks()).find((x) => x.id === task.id);
        return t?.state === "failed" ? t : undefined;
      },
      55_000,
    );
    await worker.idle();
    await h.app.flush();

    // The agent did its work; the push is what failed, and the reason says so and what to do.
    expect(model.requests.some((r) => r.kind === "main")).toBe(true);
    expect(failed.reason).toMatch(/push was rejected/);
    expect(failed.reason).toContain("GH006");
    expect(failed.reason).toMatch(/fleet\/\*/);
    const report = h.botComments(issue).find((c) => c.body.includes("fleet:run-report"))?.body;
    expect(report).toMatch(/push was rejected/);
    expect(report).toContain("GH006");
    const tracking = h.botComments(issue).find((c) => c.body.includes("fleet:tracking"))?.body;
    expect(tracking).toContain("failed");

    // Nothing reached GitHub, the slot is free, the worktree is gone.
    expect(h.gh.pulls(h.full)).toHaveLength(0);
    expect(failed.lease).toBeUndefined();
    expect((await h.tasks()).filter((t) => t.lease)).toHaveLength(0);
    expect(await exists(path)).toBe(false);
    const left = await readdir(join(workDir, "worktrees")).catch(() => []);
    expect(left).toHaveLength(0);
  }, 60_000);

  it("says the branch moved when someone else pushed to it meanwhile (non-fast-forward)", async () => {
    const dir = await mkdtemp(join(tmpdir(), "fleet-push-moved-"));
    try {
      const bare = join(dir, "remote.git");
      await git(["init", "--bare", "-q", bare], { cwd: dir });
      const url = pathToFileURL(bare).href;
      const clone = async (name: string) => {
        const d = join(dir, name);
        await git(["clone", "-q", url, d], { cwd: dir });
        return d;
      };
      const commit = async (d: string, file: string) => {
        await writeFile(join(d, file), `${file}\n`);
        await git(["add", "-A"], { cwd: d });
        await git(["commit", "-q", "-m", file], { cwd: d });
      };
      const base = await clone("base");
      await commit(base, "README.md");
      await git(["push", "-q", url, "HEAD:refs/heads/fleet/7-task"], { cwd: base });
      const mine = await clone("mine");
      await git(["checkout", "-q", "fleet/7-task"], { cwd: mine });
      // Someone else moves the branch while "mine" works.
      await commit(base, "THEIRS.md");
      await git(["push", "-q", url, "HEAD:refs/heads/fleet/7-task"], { cwd: base });
      await commit(mine, "MINE.md");
      const error = await pushBranch({ path: mine, gitDir: join(mine, ".git") }, url, "fleet/7-task").then(
        () => undefined,
        (e: Error) => e,
      );
      expect(error?.message).toMatch(/push was rejected: the branch `fleet\/7-task` moved on GitHub/);
      expect(error?.message).toMatch(/a retry continues from the new commits/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
