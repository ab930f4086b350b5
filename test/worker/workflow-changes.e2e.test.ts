// An agent's change to .github/workflows/ is held back before the push (the app has no `workflows`
// permission, and GitHub would refuse the push): the rest is pushed, the PR shows the workflow diff for a
// person to apply, and a change of workflows only ends the task with the reason. Real git, the emulator
// (which refuses an app's workflow push as GitHub does), the real Claude Code CLI.

import { join } from "node:path";
import type { GitHubEmulator } from "@fleet/github-emulator";
import { type ScriptTurn, startAnthropicScriptServer } from "@fleet/model-servers";
import type { Octokit } from "@octokit/rest";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claudeAdapter } from "../../src/agents/claude.ts";
import { githubOverOctokit, type OctokitClient } from "../../src/github/octokit-port.ts";
import { runTask, type TaskSpec } from "../../src/worker/3-attempt.ts";
import { agentNotesDir } from "../../src/worker/workspace/artifacts.ts";
import { worktreePath } from "../../src/worker/workspace/worktree.ts";
import { startTaskRepository, stopTaskRepository } from "../support/task-repository.ts";

const OWNER = "octo-org";
const NAME = "pipelines";
const REPO = `${OWNER}/${NAME}`;
const USAGE = { input_tokens: 100, output_tokens: 10 };
const CI =
  "name: CI\non: [push]\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ok\n";

let gh: GitHubEmulator;
let repo: { cloneUrl: string; gitDir: string; installationId: number };
let bot: OctokitClient;
let mona: Octokit;
let workDir: string;
let seq = 0;

beforeAll(async () => {
  ({ gh, repo, bot, mona, workDir } = await startTaskRepository({
    owner: OWNER,
    name: NAME,
    files: { "README.md": "# pipelines\n", ".github/workflows/ci.yml": CI },
    workPrefix: "fleet-workflows-e2e-",
  }));
});
afterAll(() => stopTaskRepository({ gh, workDir }));

const write = (file_path: string, content: string) => ({ name: "Write", input: { file_path, content } });
// Claude Code writes over a file only after reading it.
const read = (file_path: string) => ({ name: "Read", input: { file_path } });

async function run(
  title: string,
  turns: (p: { path: string; notes: string }) => ScriptTurn[],
  spec: Partial<TaskSpec> = {},
) {
  const taskId = `fl-wf${++seq}`;
  const { data: issue } = await mona.rest.issues.create({
    owner: OWNER,
    repo: NAME,
    title,
    body: `${title}.`,
  });
  const path = worktreePath(workDir, taskId);
  const notes = agentNotesDir(path, taskId);
  const model = await startAnthropicScriptServer({ turns: turns({ path, notes }) });
  try {
    const outcome = await runTask(
      {
        taskId,
        repo: REPO,
        issue: issue.number,
        title,
        body: `${title}.`,
        comments: [],
        coder: "claude",
        model: "claude-sonnet-4-5",
        planPhase: false,
        planApproval: false,
        timeouts: { runMs: 120_000, stallMs: 60_000 },
        attempt: 1,
        ...spec,
      },
      {
        github: githubOverOctokit(bot),
        // Over git's smart HTTP as the app, where GitHub (and the emulator) refuse its workflow changes.
        cloneUrl: (await bot.rest.repos.get({ owner: OWNER, repo: NAME })).data.clone_url,
        gitAuth: {
          username: "x-access-token",
          token: ((await bot.auth({ type: "installation" })) as { token: string }).token,
        },
        workDir,
        adapter: claudeAdapter,
        credential: { name: "ANTHROPIC_API_KEY", value: "sk-ant-api03-workflowsSECRET012345" },
        modelBaseUrl: model.url,
        agentEnv: { CLAUDE_CODE_MAX_RETRIES: "0" },
      },
    );
    return { issue: issue.number, outcome };
  } finally {
    await model.stop();
  }
}

describe("an agent's change to .github/workflows/", () => {
  it("is held back from the push: the rest becomes the PR, whose body shows the workflow diff to apply", async () => {
    const r = await run("Speed up CI", ({ path, notes }) => [
      { toolUses: [read(join(path, ".github/workflows/ci.yml"))], usage: USAGE },
      {
        toolUses: [
          write(join(path, ".github/workflows/ci.yml"), CI.replace("echo ok", "echo faster")),
          write(join(path, ".github/workflows/exfil.yml"), "name: X\non: [push]\njobs: {}\n"),
          write(join(path, "NOTES.md"), "ci notes\n"),
          write(
            join(notes, "RESULT.json"),
            JSON.stringify({ status: "done", summary: "Faster CI.", testsRun: [] }),
          ),
        ],
        usage: USAGE,
      },
      { text: "Done.", usage: USAGE },
    ]);
    expect(r.outcome.outcome, r.outcome.reason).toBe("pr-opened");
    const files = (
      await execa("git", ["--git-dir", repo.gitDir, "diff", "--name-only", "main", r.outcome.pr!.head])
    ).stdout;
    expect(files.split("\n")).toEqual(["NOTES.md"]);
    const pr = gh.pulls(REPO).find((p) => p.number === r.outcome.pr!.number)!;
    expect(pr.body).toContain("## Workflow changes not pushed");
    expect(pr.body).toContain("`.github/workflows/ci.yml`");
    expect(pr.body).toContain("`.github/workflows/exfil.yml`");
    expect(pr.body).toContain("+      - run: echo faster");
    expect(pr.body).toContain("git apply workflows.patch");
  }, 180_000);

  it("of workflows only ends the task with the reason, pushing nothing", async () => {
    const r = await run("Only CI", ({ path, notes }) => [
      { toolUses: [read(join(path, ".github/workflows/ci.yml"))], usage: USAGE },
      {
        toolUses: [
          write(join(path, ".github/workflows/ci.yml"), CI.replace("echo ok", "echo other")),
          write(join(notes, "RESULT.json"), JSON.stringify({ status: "done", summary: "CI.", testsRun: [] })),
        ],
        usage: USAGE,
      },
      { text: "Done.", usage: USAGE },
    ]);
    expect(r.outcome.outcome).toBe("failed");
    expect(r.outcome.noRetry).toBe(true);
    expect(r.outcome.reason).toMatch(
      /changed only workflow files \(`\.github\/workflows\/ci\.yml`\).*allow_workflow_changes: true/,
    );
    expect(gh.pulls(REPO).filter((p) => p.title === "Only CI")).toHaveLength(0);
  }, 180_000);
});
