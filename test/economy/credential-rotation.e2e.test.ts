import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { GitHubEmulator } from "@fleet/github-emulator";
import { type ScriptTurn, startAnthropicScriptServer } from "@fleet/model-servers";
import type { Octokit } from "@octokit/rest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claudeAdapter } from "../../src/agents/claude.ts";
import { WindowBook } from "../../src/economy/credential-windows.ts";
import { credentialsState } from "../../src/economy/credentials.ts";
import { createCredentialRotation } from "../../src/economy/rotation.ts";
import { githubOverOctokit, type OctokitClient } from "../../src/github/octokit-port.ts";
import { createLocalStateStore } from "../../src/state/local-store.ts";
import { runTask, type WorkerDeps } from "../../src/worker/3-attempt.ts";
import { worktreePath } from "../../src/worker/workspace/worktree.ts";
import { startTaskRepository, stopTaskRepository } from "../support/task-repository.ts";

const OWNER = "octo-org";
const NAME = "economy";
const REPO = `${OWNER}/${NAME}`;
const KEYS: Record<string, string> = {
  KEY_A: "sk-ant-api03-keyAAAAAAAAAAAAAAAAAAAAAA",
  KEY_B: "sk-ant-api03-keyBBBBBBBBBBBBBBBBBBBBBB",
};
const NOW = new Date("2025-03-01T12:00:00Z");

let gh: GitHubEmulator;
let repo: { cloneUrl: string };
let bot: OctokitClient;
let mona: Octokit;
let workDir: string;
let seq = 0;

beforeAll(async () => {
  ({ gh, repo, bot, mona, workDir } = await startTaskRepository({
    owner: OWNER,
    name: NAME,
    files: { "README.md": "# economy\n" },
    workPrefix: "fleet-economy-e2e-",
  }));
});

afterAll(() => stopTaskRepository({ gh, workDir }));

async function run(
  title: string,
  turns: (path: string) => ScriptTurn[],
  deps: (store: ReturnType<typeof createLocalStateStore>) => Partial<WorkerDeps>,
) {
  const taskId = `fl-eco${++seq}`;
  const { data: issue } = await mona.rest.issues.create({ owner: OWNER, repo: NAME, title, body: title });
  const model = await startAnthropicScriptServer({ turns: turns(worktreePath(workDir, taskId)) });
  const store = createLocalStateStore({ home: await mkdtemp(join(tmpdir(), "fleet-economy-home-")) });
  try {
    const outcome = await runTask(
      {
        taskId,
        repo: REPO,
        issue: issue.number,
        title,
        body: title,
        comments: [],
        coder: "claude",
        model: "claude-sonnet-4-5",
        planPhase: false,
        planApproval: false,
        timeouts: { runMs: 120_000, stallMs: 60_000 },
        attempt: 1,
      },
      {
        github: githubOverOctokit(bot),
        cloneUrl: repo.cloneUrl,
        workDir,
        adapter: claudeAdapter,
        credential: { name: "KEY_A", value: KEYS.KEY_A! },
        modelBaseUrl: model.url,
        agentEnv: { CLAUDE_CODE_MAX_RETRIES: "0" },
        ...deps(store),
      },
    );
    return { outcome, requests: model.requests, issue: issue.number, store };
  } finally {
    await model.stop();
  }
}

const rotation = (store: ReturnType<typeof createLocalStateStore>) =>
  createCredentialRotation({
    store,
    book: new WindowBook(),
    coder: "claude",
    names: ["KEY_A", "KEY_B"],
    secretOf: (n) => KEYS[n],
    clock: () => NOW,
    fallbackSeconds: 60,
  });

describe("credential pools and budgets with the real Claude CLI", () => {
  it("moves a task rate-limited (429, retry-after) on KEY_A to KEY_B and finishes there, the report naming KEY_B", async () => {
    const r = await run(
      "Rotate credentials",
      (path) => [
        { error: { status: 429, retryAfter: 30 } },
        {
          toolUses: [{ name: "Write", input: { file_path: join(path, "ROTATED.md"), content: "rotated\n" } }],
          usage: { input_tokens: 900, output_tokens: 30 },
        },
        { text: "Done.", usage: { input_tokens: 950, output_tokens: 10 } },
      ],
      (store) => ({ rotateCredential: rotation(store).rotate }),
    );
    expect(r.outcome.outcome).toBe("pr-opened");
    const main = r.requests.filter((q) => q.kind !== "side");
    expect(main[0]?.headers["x-api-key"]).toBe(KEYS.KEY_A);
    expect(main.slice(1).every((q) => q.headers["x-api-key"] === KEYS.KEY_B)).toBe(true);
    expect(r.outcome.totals?.credential).toBe("KEY_B");
    const doc = (await r.store.read()).doc;
    expect(credentialsState(doc).claude?.KEY_A?.coolingUntil).toBe("2025-03-01T12:01:00.000Z");
    const bodies = gh
      .comments(REPO, r.issue)
      .map((c) => c.body)
      .join("\n");
    expect(bodies).toContain("KEY_B");
    expect(bodies).not.toContain(KEYS.KEY_A);
    expect(bodies).not.toContain(KEYS.KEY_B);
  });

  it("goes rate-limited when every credential cools, and the pool names the earliest reset", async () => {
    let rot: ReturnType<typeof rotation> | undefined;
    const r = await run(
      "All cooling",
      () => [{ error: { status: 429, retryAfter: 30 } }, { error: { status: 429, retryAfter: 30 } }],
      (store) => {
        rot = rotation(store);
        return { rotateCredential: rot.rotate };
      },
    );
    expect(r.outcome.outcome).toBe("rate-limited");
    expect(rot!.resetAt()).toBe("2025-03-01T12:01:00.000Z");
    expect(await rot!.first()).toEqual({ kind: "all-cooling", resetAt: "2025-03-01T12:01:00.000Z" });
  });

  it("stops a run that passes the per-task token ceiling and says so", async () => {
    const r = await run(
      "Over budget",
      (path) => [
        {
          toolUses: [
            {
              name: "Bash",
              input: { command: `sleep 5; echo hi > ${join(path, "X.md")}`, description: "slow" },
            },
          ],
          usage: { input_tokens: 5000, output_tokens: 50 },
        },
        { text: "Done.", usage: { input_tokens: 10, output_tokens: 5 } },
      ],
      () => ({ perTaskLimits: { tokens: 1000 } }),
    );
    expect(r.outcome.outcome).toBe("over-budget");
    // Stopped at the first streamed usage past the ceiling (the message start already counts 5000 input).
    // Metered at the gateway: the first answer's figures already pass the ceiling.
    expect(r.outcome.reason).toBe(
      "stopped: the task used 5,050 tokens, over the per-task ceiling of 1,000 (budgets.per_task_tokens)",
    );
    const bodies = gh
      .comments(REPO, r.issue)
      .map((c) => c.body)
      .join("\n");
    expect(bodies).toContain("over the per-task ceiling of 1,000");
  });
});
