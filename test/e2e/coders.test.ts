import type { GitHubEmulator } from "@fleet/github-emulator";
import type { ScriptServer, ScriptTurn } from "@fleet/model-servers";
import {
  startAnthropicScriptServer,
  startGeminiScriptServer,
  startOpenAIScriptServer,
} from "@fleet/model-servers";
import type { Octokit } from "@octokit/rest";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getAdapter } from "../../src/agents/index.ts";
import type { TokenUsage } from "../../src/core/usage.ts";
import { githubOverOctokit, type OctokitClient } from "../../src/github/octokit-port.ts";
import { runTask } from "../../src/worker/3-attempt.ts";
import { startTaskRepository, stopTaskRepository } from "../support/task-repository.ts";

const OWNER = "octo-org";
const NAME = "coders";
const REPO = `${OWNER}/${NAME}`;
const GIT_ENV = { GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" };

interface CoderCase {
  coder: string;
  model: string;
  credential: string;
  server(turns: ScriptTurn[]): Promise<ScriptServer>;
  /** The scripted tool call that writes `<CODER>.md` in the worktree (relative paths: the agent's cwd). */
  write(file: string, text: string): { name: string; input: unknown };
  /** What the run's totals must be, from the script's two turns below. */
  usage: TokenUsage;
}

const TURN_1 = { input_tokens: 1000, output_tokens: 50, cache_read_input_tokens: 400 };
const TURN_2 = { input_tokens: 1200, output_tokens: 30, cache_read_input_tokens: 900 };

const CASES: CoderCase[] = [
  {
    coder: "gemini",
    model: "gemini-2.5-pro",
    credential: "GEMINI_API_KEY",
    server: (turns) => startGeminiScriptServer({ turns }),
    write: (file, text) => ({ name: "write_file", input: { file_path: file, content: text } }),
    // Gemini's promptTokenCount includes the cached part.
    usage: { input: 900, cacheRead: 1300, cacheWrite: 0, output: 80, reasoning: 0 },
  },
  {
    coder: "opencode",
    model: "claude-sonnet-4-5",
    credential: "ANTHROPIC_API_KEY",
    server: (turns) => startAnthropicScriptServer({ turns }),
    write: (file, text) => ({ name: "write", input: { filePath: file, content: text } }),
    // Anthropic's input_tokens excludes the cache.
    usage: { input: 2200, cacheRead: 1300, cacheWrite: 0, output: 80, reasoning: 0 },
  },
  {
    coder: "claude",
    model: "claude-sonnet-4-5",
    credential: "ANTHROPIC_API_KEY",
    server: (turns) => startAnthropicScriptServer({ turns }),
    write: (file, text) => ({ name: "Write", input: { file_path: file, content: text } }),
    usage: { input: 2200, cacheRead: 1300, cacheWrite: 0, output: 80, reasoning: 0 },
  },
  {
    coder: "codex",
    model: "o4-mini",
    credential: "OPENAI_API_KEY",
    server: (turns) => startOpenAIScriptServer({ turns }),
    write: (file, text) => ({
      name: "exec_command",
      input: { cmd: `printf '${text}' > ${file}`, workdir: "." },
    }),
    // The Responses API's input_tokens includes the cached part.
    usage: { input: 900, cacheRead: 1300, cacheWrite: 0, output: 80, reasoning: 0 },
  },
];

let gh: GitHubEmulator;
let repo: { cloneUrl: string; gitDir: string; installationId: number };
let bot: OctokitClient;
let mona: Octokit;
let workDir: string;

beforeAll(async () => {
  ({ gh, repo, bot, mona, workDir } = await startTaskRepository({
    owner: OWNER,
    name: NAME,
    files: { "README.md": "# coders\n" },
    workPrefix: "fleet-coders-e2e-",
  }));
});

afterAll(() => stopTaskRepository({ gh, workDir }));

describe("every coder through a real task: sandbox, gateway, the real CLI, a pull request", () => {
  it.each(CASES)(
    "$coder",
    async (c) => {
      const title = `Add ${c.coder}'s file`;
      const issue = (await mona.rest.issues.create({ owner: OWNER, repo: NAME, title, body: "Please." }))
        .data;
      const file = `${c.coder.toUpperCase()}.md`;
      const text = `hello from ${c.coder}\n`;
      const model = await c.server([
        { text: "Writing the file.", toolUses: [c.write(file, text)], usage: TURN_1 },
        { text: "Done.", usage: TURN_2 },
      ]);
      const secret = `key-${c.coder}-e2e-0123456789abcdef`;
      let outcome: Awaited<ReturnType<typeof runTask>>;
      try {
        outcome = await runTask(
          {
            taskId: `fl-coders-${c.coder}`,
            repo: REPO,
            issue: issue.number,
            title,
            body: "Please.",
            comments: [],
            coder: c.coder,
            model: c.model,
            planPhase: false,
            planApproval: false,
            timeouts: { runMs: 90_000, stallMs: 60_000 },
            attempt: 1,
          },
          {
            github: githubOverOctokit(bot),
            cloneUrl: repo.cloneUrl,
            workDir,
            adapter: getAdapter(c.coder)!,
            credential: { name: c.credential, value: secret },
            modelBaseUrl: model.url,
          },
        );
      } finally {
        await model.stop();
      }
      expect(outcome.outcome, outcome.reason).toBe("pr-opened");
      const show = await execa(
        "git",
        ["--git-dir", repo.gitDir, "show", `refs/heads/${outcome.pr!.head}:${file}`],
        {
          env: GIT_ENV,
        },
      );
      expect(`${show.stdout}\n`).toBe(text);
      expect(outcome.totals?.usage).toEqual(c.usage);
      // Both scripted turns were played, through the gateway: the credential reached the model server,
      // the agent held a run token instead.
      const main = model.requests.filter((q) => q.kind === "main");
      expect(main).toHaveLength(2);
      expect(JSON.stringify(main[0]?.headers)).toContain(secret);
    },
    90_000,
  );
});
