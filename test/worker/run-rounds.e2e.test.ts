// A task's later runs, end to end (real git, the GitHub emulator, the real Claude Code CLI against a
// scripted model): they are held to the per-task ceilings with the task's earlier runs, and a review
// round whose pull request was merged meanwhile pushes nothing and opens no other PR.
import { join } from "node:path";
import type { GitHubEmulator } from "@fleet/github-emulator";
import { type ScriptTurn, startAnthropicScriptServer } from "@fleet/model-servers";
import type { Octokit } from "@octokit/rest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claudeAdapter } from "../../src/agents/claude.ts";
import type { RunRecord } from "../../src/core/run-history.ts";
import { githubOverOctokit, type OctokitClient } from "../../src/github/octokit-port.ts";
import { runTask, type TaskSpec, type WorkerDeps } from "../../src/worker/3-attempt.ts";
import { agentNotesDir } from "../../src/worker/workspace/artifacts.ts";
import { worktreePath } from "../../src/worker/workspace/worktree.ts";
import { startTaskRepository, stopTaskRepository } from "../support/task-repository.ts";

const OWNER = "octo-org";
const NAME = "rounds";
const REPO = `${OWNER}/${NAME}`;

let gh: GitHubEmulator;
let repo: { cloneUrl: string };
let bot: OctokitClient;
let mona: Octokit;
let workDir: string;

beforeAll(async () => {
  ({ gh, repo, bot, mona, workDir } = await startTaskRepository({
    owner: OWNER,
    name: NAME,
    files: { "README.md": "# rounds\n" },
    workPrefix: "fleet-rounds-e2e-",
  }));
});

afterAll(() => stopTaskRepository({ gh, workDir }));

/** One run of task `taskId` on `issue` against a scripted model made from `turns(worktree, notes)`. */
async function run(
  taskId: string,
  issue: number,
  turns: (path: string, notes: string) => ScriptTurn[],
  spec: Partial<TaskSpec> = {},
  deps: Partial<WorkerDeps> = {},
) {
  const path = worktreePath(workDir, taskId);
  const model = await startAnthropicScriptServer({ turns: turns(path, agentNotesDir(path, taskId)) });
  try {
    const outcome = await runTask(
      {
        taskId,
        repo: REPO,
        issue,
        title: `Rounds ${issue}`,
        body: "Write a file.",
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
        cloneUrl: repo.cloneUrl,
        workDir,
        adapter: claudeAdapter,
        credential: { name: "anthropic-team", value: "sk-ant-api03-roundsSECRET0123456789abcdef" },
        modelBaseUrl: model.url,
        agentEnv: { CLAUDE_CODE_MAX_RETRIES: "0" },
        ...deps,
      },
    );
    return { outcome, played: model.played };
  } finally {
    await model.stop();
  }
}

const write = (path: string, file: string, usage = { input_tokens: 9_000, output_tokens: 1_000 }) => ({
  toolUses: [{ name: "Write", input: { file_path: join(path, file), content: `${file}\n` } }],
  usage,
});
const newIssue = async (title: string) =>
  (await mona.rest.issues.create({ owner: OWNER, repo: NAME, title, body: "Write a file." })).data.number;

describe("a task's later runs", () => {
  it("are held to the per-task token ceiling together with the task's earlier runs", async () => {
    const issue = await newIssue("Ceiling across runs");
    const earlier: RunRecord[] = [
      {
        kind: "work",
        at: "2026-03-01T10:00:00.000Z",
        totals: {
          usage: { input: 30_000, output: 0, cacheRead: 0, cacheWrite: 0, reasoning: 0 },
          costUsd: 0.09,
          turns: 3,
          durationMs: 60_000,
          model: "claude-sonnet-4-5",
        },
      },
    ];
    const r = await run(
      "fl-ceil1",
      issue,
      (path) => [
        write(path, "A.md"),
        write(path, "B.md"),
        { text: "Done.", usage: { input_tokens: 10, output_tokens: 1 } },
      ],
      { earlierRuns: earlier, runKind: "work" },
      { perTaskLimits: { tokens: 35_000 } },
    );
    // 30,000 before this run and 10,000 in its first turn: over 35,000, the run stops there.
    expect(r.outcome.outcome).toBe("over-budget");
    expect(r.outcome.reason).toBe(
      "stopped: the task used 40,000 tokens, over the per-task ceiling of 35,000 (budgets.per_task_tokens)",
    );
    expect(r.outcome.totals?.usage.input).toBe(9_000);
  });

  it("a review round whose PR was merged meanwhile pushes nothing and opens no other PR", async () => {
    const issue = await newIssue("Merged under a review round");
    const first = await run("fl-review1", issue, (path) => [
      write(path, "FIRST.md", { input_tokens: 100, output_tokens: 10 }),
      { text: "Done.", usage: { input_tokens: 100, output_tokens: 10 } },
    ]);
    expect(first.outcome.outcome).toBe("pr-opened");
    const pr = first.outcome.pr!;
    await mona.rest.pulls.merge({ owner: OWNER, repo: NAME, pull_number: pr.number });

    const round = await run(
      "fl-review1",
      issue,
      (path) => [
        write(path, "SECOND.md", { input_tokens: 100, output_tokens: 10 }),
        { text: "Done.", usage: { input_tokens: 100, output_tokens: 10 } },
      ],
      {
        branch: pr.head,
        runKind: "review",
        reviewPr: pr.number,
        earlierRuns: [{ kind: "work", at: "2026-03-01T10:00:00.000Z", totals: first.outcome.totals! }],
        extraPrompt: "Also write SECOND.md.",
      },
    );
    expect(round.outcome.outcome).toBe("failed");
    expect(round.outcome.noRetry).toBe(true);
    expect(round.outcome.reason).toBe(
      `Pull request #${pr.number} was merged while the round ran; nothing was pushed.`,
    );
    expect(gh.pulls(REPO).filter((p) => p.head === pr.head)).toHaveLength(1);
  });
});
