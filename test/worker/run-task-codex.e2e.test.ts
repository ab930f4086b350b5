import type { GitHubEmulator } from "@fleet/github-emulator";
import { startOpenAIScriptServer } from "@fleet/model-servers";
import type { Octokit } from "@octokit/rest";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { codexAdapter } from "../../src/agents/codex.ts";
import { githubOverOctokit, type OctokitClient } from "../../src/github/octokit-port.ts";
import { runTask } from "../../src/worker/3-attempt.ts";
import { worktreePath } from "../../src/worker/workspace/worktree.ts";
import { startTaskRepository, stopTaskRepository } from "../support/task-repository.ts";

const OWNER = "octo-org";
const NAME = "codex-gadgets";
const REPO = `${OWNER}/${NAME}`;
const GIT_ENV = { GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" };

let gh: GitHubEmulator;
let repo: { cloneUrl: string; gitDir: string; installationId: number };
let bot: OctokitClient;
let mona: Octokit;
let workDir: string;

beforeAll(async () => {
  ({ gh, repo, bot, mona, workDir } = await startTaskRepository({
    owner: OWNER,
    name: NAME,
    files: { "README.md": "# gadgets\n" },
    workPrefix: "fleet-worker-codex-e2e-",
  }));
});

afterAll(() => stopTaskRepository({ gh, workDir }));

describe("runTask end to end: real git, the GitHub emulator, the real Codex CLI", () => {
  it("turns a scripted exec_command into a pull request, with the script's token figures", async () => {
    const taskId = "fl-codex-e2e1";
    const title = "Add a Codex file";
    const issue = (
      await mona.rest.issues.create({ owner: OWNER, repo: NAME, title, body: `Body of ${title}.` })
    ).data;
    const path = worktreePath(workDir, taskId);
    const model = await startOpenAIScriptServer({
      turns: [
        {
          text: "Writing the file.",
          toolUses: [
            {
              name: "exec_command",
              input: { cmd: "printf 'hello from codex\\n' > CODEX.md", workdir: path },
            },
          ],
          usage: {
            input_tokens: 1000,
            cache_read_input_tokens: 400,
            output_tokens: 50,
            reasoning_tokens: 20,
          },
        },
        {
          text: "Done.",
          usage: {
            input_tokens: 1200,
            cache_read_input_tokens: 900,
            output_tokens: 30,
            reasoning_tokens: 10,
          },
        },
      ],
    });
    let outcome: Awaited<ReturnType<typeof runTask>>;
    try {
      outcome = await runTask(
        {
          taskId,
          repo: REPO,
          issue: issue.number,
          title,
          body: `Body of ${title}.`,
          comments: [],
          coder: "codex",
          model: "o4-mini",
          planPhase: false,
          planApproval: false,
          timeouts: { runMs: 120_000, stallMs: 60_000 },
          attempt: 1,
        },
        {
          github: githubOverOctokit(bot),
          cloneUrl: repo.cloneUrl,
          workDir,
          adapter: codexAdapter,
          credential: { name: "OPENAI_API_KEY", value: "sk-test-codexE2Edummy0123456789" },
          modelBaseUrl: model.url,
        },
      );
    } finally {
      await model.stop();
    }

    expect(outcome.outcome, outcome.reason).toBe("pr-opened");
    const branch = outcome.pr!.head;
    const pulls = gh.pulls(REPO).filter((p) => p.head === branch);
    expect(pulls).toHaveLength(1);
    expect(pulls[0]!.title).toBe(title);
    expect(pulls[0]!.body).toContain(`Closes #${issue.number}`);

    const show = await execa("git", ["--git-dir", repo.gitDir, "show", `refs/heads/${branch}:CODEX.md`], {
      env: GIT_ENV,
    });
    expect(show.stdout).toBe("hello from codex");

    // The exec_command ran and its output went back to the model.
    const main = model.requests.filter((q) => q.kind === "main");
    expect(main).toHaveLength(2);
    expect(main[0]?.body.tools.map((t: { name?: string }) => t.name)).toContain("exec_command");
    expect(JSON.stringify(main[1]?.body.input)).toContain("function_call_output");

    // Codex reports input INCLUDING cached tokens (2200, 1300 cached); Fleet counts them apart.
    expect(outcome.totals?.usage).toEqual({
      input: 2200 - 1300,
      cacheRead: 1300,
      cacheWrite: 0,
      output: 80,
      reasoning: 30,
    });
  });
});
