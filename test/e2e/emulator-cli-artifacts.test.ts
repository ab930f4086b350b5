import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type GitHubEmulator, startGitHubEmulator } from "@fleet/github-emulator";
import { userOctokit } from "@fleet/github-emulator/test-helpers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { taskRunIds } from "../../src/cli/run-artifacts.ts";
import type { Task } from "../../src/core/task.ts";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import { createRepoStateStore } from "../../src/state/repo-store.ts";
import { cliEnv, fleet } from "../cli/cli-helpers.ts";
import { FLEET_APP } from "../support/fleet-app.ts";

const FULL = "octo/arts";
const SECRET = "sk-ant-cli-artifact-secret-0000000000";

let em: GitHubEmulator;
let home: string;
const runs: Record<string, number> = {};

const task = (id: string, issue: number, extra: Partial<Task>): Task => {
  const at = "2026-12-01T10:00:00Z";
  return {
    id,
    repo: FULL,
    issue,
    title: `Task ${id}`,
    coder: "claude",
    model: "sonnet",
    priority: 2,
    state: "pr-open",
    dependsOn: [],
    createdAt: at,
    updatedAt: at,
    queuedAt: at,
    attempts: 1,
    ...extra,
  };
};

/** `fleet task ...` against the emulator, as mona (or with another token). */
const cli = (args: string[], token = em.userToken("mona")) =>
  fleet([...args, "--repo", FULL, "--api-url", em.url], {
    cwd: home,
    env: cliEnv({ FLEET_HOME: home, GITHUB_TOKEN: token, ANTHROPIC_API_KEY: SECRET }),
  });

beforeAll(async () => {
  em = await startGitHubEmulator(FLEET_APP);
  await em.createRepo({
    owner: "octo",
    name: "arts",
    files: {
      "README.md": "# arts\n",
      ".github/workflows/fleet-task.yml":
        "name: fleet-task\non:\n  workflow_dispatch:\n    inputs:\n      task_id:\n        type: string\njobs: {}\n",
    },
  });
  em.addCollaborator(FULL, "mona", "write");
  const mona = userOctokit(em, "mona");
  for (const id of ["fl-7", "fl-8", "fl-old", "fl-gone"]) {
    await mona.rest.actions.createWorkflowDispatch({
      owner: "octo",
      repo: "arts",
      workflow_id: "fleet-task.yml",
      ref: "main",
      inputs: { task_id: id },
    });
    runs[id] = em.workflowRuns(FULL).at(-1)!.id;
  }
  // What upload-artifact makes of the task's artifacts folder at the end of each run.
  await em.uploadArtifact(FULL, runs["fl-7"]!, "fleet-fl-7", {
    "agent.log": `agent started\nused ${SECRET}\nWrote FIRST.md.\n`,
    "PLAN.md": "1. Write FIRST.md\n",
    "KNOWLEDGE.md": "The repository has a README.\n",
    "RESULT.json": JSON.stringify({ status: "done", summary: "Added FIRST.md", testsRun: [] }),
  });
  await em.uploadArtifact(FULL, runs["fl-8"]!, "fleet-fl-8", {
    "PLAN.md": "1. Plan only\n",
    "plan.log": "planning\n",
  });
  await em.uploadArtifact(
    FULL,
    runs["fl-old"]!,
    "fleet-fl-old",
    { "agent.log": "old\n" },
    { retentionDays: 0 },
  );
  await em.uploadArtifact(FULL, runs["fl-gone"]!, "fleet-fl-gone", {
    "agent.log": "from a task the state forgot\n",
  });

  const store = createRepoStateStore({
    github: githubOverOctokit(mona),
    owner: "octo",
    repo: "arts",
    pacing: 0,
  });
  const now = new Date().toISOString().replace(/\.\d{3}Z$/, "Z");
  await store.update(({ doc }) => ({
    doc: {
      ...doc,
      tasks: {
        "fl-7": task("fl-7", 7, { runId: String(runs["fl-7"]) }),
        // A run still holding its lease: the run id is in the holder.
        "fl-8": task("fl-8", 8, {
          state: "running",
          lease: {
            holder: `actions:${runs["fl-8"]}`,
            slot: 1,
            acquiredAt: now,
            heartbeatAt: now,
            expiresAt: now,
          },
        }),
        "fl-9": task("fl-9", 9, {}),
        "fl-old": task("fl-old", 10, { runId: String(runs["fl-old"]) }),
      },
    },
    message: "seed tasks for the artifact test",
  }));
  home = await mkdtemp(join(tmpdir(), "fleet-cli-artifacts-"));
}, 120_000);

afterAll(async () => {
  await em?.stop();
  if (home) await rm(home, { recursive: true, force: true });
});

describe("fleet task <id> log|plan|knowledge|result from an Actions run's artifact", () => {
  it("downloads the task's artifact when the files are not on this machine, redacted", async () => {
    const log = await cli(["task", "fl-7", "log"]);
    expect(log.exitCode, log.stderr).toBe(0);
    expect(log.stdout).toContain("Wrote FIRST.md.");
    expect(log.stdout).not.toContain(SECRET);
    expect((await cli(["task", "#7", "plan"])).stdout).toBe("1. Write FIRST.md");
    expect((await cli(["task", "fl-7", "knowledge"])).stdout).toContain("The repository has a README.");
    const result = await cli(["task", "fl-7", "result", "--json"]);
    expect(JSON.parse(result.stdout)).toMatchObject({ status: "done", summary: "Added FIRST.md" });
    const asJson = JSON.parse((await cli(["task", "fl-7", "log", "--json"])).stdout);
    expect(asJson).toMatchObject({
      task: "fl-7",
      what: "log",
      source: `Actions run ${runs["fl-7"]}, artifact fleet-fl-7`,
    });
    expect(asJson.path).toMatch(/artifact fleet-fl-7: agent\.log$/);
  });

  it("finds the run from the lease holder, falls back to the plan log, and names what the artifact holds", async () => {
    expect((await cli(["task", "fl-8", "plan"])).stdout).toBe("1. Plan only");
    expect((await cli(["task", "fl-8", "log"])).stdout).toBe("planning");
    const knowledge = await cli(["task", "fl-8", "knowledge"]);
    expect(knowledge.exitCode).toBe(3);
    expect(knowledge.stderr).toMatch(/has no KNOWLEDGE\.md: looked for .*KNOWLEDGE\.md/);
    expect(knowledge.stderr).toMatch(
      /artifact fleet-fl-8 has no KNOWLEDGE\.md either \(it holds: (PLAN\.md, plan\.log|plan\.log, PLAN\.md)\)/,
    );
  });

  it("finds an artifact by the task's name when the state no longer has the task", async () => {
    const r = await cli(["task", "fl-gone", "log"]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toBe("from a task the state forgot");
    const nothing = await cli(["task", "fl-never", "log"]);
    expect(nothing.exitCode).toBe(3);
    expect(nothing.stderr).toMatch(
      /No task "fl-never".*no artifacts at .*fl-never.*No artifact of task fl-never on GitHub/s,
    );
  });

  it("says clearly when there is none: no run, an expired artifact, a token that may not read Actions", async () => {
    const none = await cli(["task", "fl-9", "log"]);
    expect(none.exitCode).toBe(3);
    expect(none.stderr).toMatch(/Task fl-9 has no agent\.log: looked for/);
    expect(none.stderr).toMatch(/On GitHub: No artifact of task fl-9 on GitHub \(octo\/arts\)/);
    expect(none.stderr).toMatch(/uploads the artifact "fleet-fl-9" when its run ends/);

    const old = await cli(["task", "fl-old", "log"]);
    expect(old.exitCode).toBe(3);
    expect(old.stderr).toMatch(/fleet-fl-old of run \d+ expired on \d{4}-/);

    // A GITHUB_TOKEN that reads the repository but not its Actions.
    const limited = em.workflowToken(FULL, { permissions: { contents: "read", issues: "read" } });
    const refused = await cli(["task", "fl-7", "log"], limited);
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toMatch(/403.*Actions: read/);
    expect(refused.stderr).not.toMatch(/at .*\.ts:\d+/);
  });
});

describe("the runs a task names", () => {
  it("takes its run id, its run page and its lease holder, once each, and ignores anything else", () => {
    const at = "2026-12-01T10:00:00Z";
    const lease = (holder: string) => ({ holder, slot: 1, acquiredAt: at, heartbeatAt: at, expiresAt: at });
    expect(taskRunIds(task("a", 1, { runId: "12", lease: lease("actions:34") }))).toEqual([12, 34]);
    expect(taskRunIds(task("a", 1, { runUrl: "https://github.com/o/r/actions/runs/56" }))).toEqual([56]);
    expect(
      taskRunIds(task("a", 1, { runId: "12", runUrl: "https://github.com/o/r/actions/runs/12" })),
    ).toEqual([12]);
    expect(taskRunIds(task("a", 1, { runId: "x1", lease: lease("worker:host:1") }))).toEqual([]);
    expect(taskRunIds(task("a", 1, { lease: lease("actions:1e3") }))).toEqual([]);
    expect(taskRunIds(undefined)).toEqual([]);
  });
});
