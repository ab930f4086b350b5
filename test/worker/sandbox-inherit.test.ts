// `home: inherit` in a real run: runTask (bubblewrap, the model gateway, real git, the offline GitHub)
// with the real Claude Code CLI, its user's HOME planted here. The agent loads the user's
// ~/.claude/CLAUDE.md (the scripted server records it in the request), cannot change it, and sees
// nothing else of that HOME (~/.ssh); the context manifest lists it and flags the repository's copy.
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { GitHubEmulator } from "@fleet/github-emulator";
import { startAnthropicScriptServer } from "@fleet/model-servers";
import type { Octokit } from "@octokit/rest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claudeAdapter } from "../../src/agents/claude.ts";
import { githubOverOctokit, type OctokitClient } from "../../src/github/octokit-port.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";
import { runTask } from "../../src/worker/3-attempt.ts";
import { type LocalWorker, startLocalWorker } from "../../src/worker/local-worker.ts";
import { INHERITED_HOME_PATHS } from "../../src/worker/sandbox/bubblewrap.ts";
import { taskArtifactsDir } from "../../src/worker/workspace/artifacts.ts";
import { CONTEXT_MANIFEST_FILE, type ContextManifest } from "../../src/worker/workspace/context-manifest.ts";
import { botClient, waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";
import { startTaskRepository } from "../support/task-repository.ts";

const OWNER = "octo-org";
const NAME = "inherit";
const MEMORY = "Always answer in haiku. (home memory 5521-KESTREL)\n";
const SSH_KEY =
  "-----BEGIN OPENSSH PRIVATE KEY-----\nplanted-7c1e-not-a-key\n-----END OPENSSH PRIVATE KEY-----\n";

let gh: GitHubEmulator;
let repo: { cloneUrl: string; gitDir: string; installationId: number };
let bot: OctokitClient;
let mona: Octokit;
let workDir: string;
let userHome: string;

beforeAll(async () => {
  // The repository holds the same memory text as the user's HOME: loaded twice.
  ({ gh, repo, bot, mona, workDir } = await startTaskRepository({
    owner: OWNER,
    name: NAME,
    files: { "README.md": "# inherit\n", "CLAUDE.md": MEMORY },
    workPrefix: "fleet-inherit-",
  }));
  userHome = await mkdtemp(join(tmpdir(), "fleet-inherit-user-"));
  await mkdir(join(userHome, ".claude"), { recursive: true });
  await writeFile(join(userHome, ".claude", "CLAUDE.md"), MEMORY);
  await writeFile(join(userHome, ".claude.json"), "{}\n");
  await mkdir(join(userHome, ".ssh"), { recursive: true });
  await writeFile(join(userHome, ".ssh", "id_ed25519"), SSH_KEY);
  await mkdir(join(userHome, ".codex"), { recursive: true });
  await writeFile(join(userHome, ".codex", "auth.json"), '{"planted":"codex-login-93b2"}\n');
});

afterAll(async () => {
  await gh?.stop();
  for (const d of [workDir, userHome]) if (d) await rm(d, { recursive: true, force: true });
});

describe("home: inherit", () => {
  it("inherits only the coder's own paths", () => {
    expect(INHERITED_HOME_PATHS.claude).toContain(".claude/CLAUDE.md");
    for (const [coder, paths] of Object.entries(INHERITED_HOME_PATHS)) {
      const own = { claude: /^\.claude/, codex: /^\.codex\//, gemini: /^\.gemini\//, agy: /^\.gemini\// }[
        coder
      ];
      for (const p of paths) expect(p).toMatch(own ?? /^\.(config|local\/share)\/opencode\//);
    }
  });

  it("the agent loads the user's ~/.claude/CLAUDE.md read-only and sees no ~/.ssh", async () => {
    const title = "Look around";
    const issue = (await mona.rest.issues.create({ owner: OWNER, repo: NAME, title, body: "Please." })).data;
    // Claude Code asks before a Bash command names a path outside its working directory, and a
    // headless run cannot answer: the agent writes a script there and runs that.
    const look = [
      `cat ${userHome}/.ssh/id_ed25519`,
      "cat ~/.ssh/id_ed25519",
      "cat ~/.codex/auth.json",
      "echo changed >> ~/.claude/CLAUDE.md",
      "cat ~/.claude/CLAUDE.md",
    ].join("\n");
    const model = await startAnthropicScriptServer({
      turns: [
        {
          text: "Looking.",
          toolUses: [{ name: "Write", input: { file_path: "look.sh", content: `${look}\n` } }],
          usage: { input_tokens: 100, output_tokens: 10 },
        },
        {
          toolUses: [{ name: "Bash", input: { command: "sh look.sh 2>&1; true", description: "look" } }],
          usage: { input_tokens: 110, output_tokens: 10 },
        },
        { text: "Done.", usage: { input_tokens: 120, output_tokens: 5 } },
      ],
    });
    const taskId = "fl-inherit-1";
    let outcome: Awaited<ReturnType<typeof runTask>>;
    try {
      outcome = await runTask(
        {
          taskId,
          repo: `${OWNER}/${NAME}`,
          issue: issue.number,
          title,
          body: "Please.",
          comments: [],
          coder: "claude",
          model: "claude-sonnet-4-5",
          planPhase: false,
          planApproval: false,
          timeouts: { runMs: 90_000, stallMs: 60_000 },
          attempt: 1,
        },
        {
          github: githubOverOctokit(bot),
          cloneUrl: repo.cloneUrl,
          workDir,
          adapter: claudeAdapter,
          credential: { name: "ANTHROPIC_API_KEY", value: "sk-ant-inherit-dummy-0123456789" },
          modelBaseUrl: model.url,
          inheritHome: userHome,
        },
      );
    } finally {
      await model.stop();
    }
    expect(outcome.outcome, outcome.reason).toBe("pr-opened");
    const main = model.requests.filter((q) => q.kind === "main");
    expect(main).toHaveLength(3);
    // The user's memory reached the model with the agent's first turn.
    expect(JSON.stringify(main[0]?.body)).toContain("5521-KESTREL");
    // What the script saw went back with the last turn: neither key, no other coder's login, no write.
    const seen = JSON.stringify(main[2]?.body.messages.at(-1));
    expect(seen).toContain("tool_result");
    expect(seen).toContain("Always answer in haiku.");
    expect(seen).not.toContain("planted-7c1e");
    expect(seen).not.toContain("codex-login-93b2");
    expect(seen).toMatch(/No such file or directory/);
    expect(seen).toMatch(/Read-only file system/);
    expect(await readFile(join(userHome, ".claude", "CLAUDE.md"), "utf8")).toBe(MEMORY);

    // `fleet task <id> knowledge` reads this manifest: the home file is measured and flagged.
    const manifest = JSON.parse(
      await readFile(join(taskArtifactsDir(workDir, taskId), CONTEXT_MANIFEST_FILE), "utf8"),
    ) as ContextManifest;
    const home = manifest.sources.find((s) => s.path === "~/.claude/CLAUDE.md");
    expect(home).toMatchObject({ kind: "memory", duplicateOf: "CLAUDE.md" });
    expect(manifest.duplicateTokens).toBeGreaterThan(0);
    expect(manifest.suggestions.join("\n")).toContain("~/.claude/CLAUDE.md");
  }, 120_000);
});

describe("home: inherit from .github/fleet.yml", () => {
  let h: Harness;
  let worker: LocalWorker | undefined;
  let dir: string;
  const realHome = process.env.HOME;

  beforeAll(async () => {
    h = await startHarness({
      files: {
        ".github/fleet.yml":
          "dispatch: local\nplan_phase: false\nretries: { max: 0 }\ncoders:\n  claude:\n    home: inherit\n",
      },
    });
    dir = await mkdtemp(join(tmpdir(), "fleet-inherit-config-"));
  });
  afterAll(async () => {
    await worker?.stop();
    await h?.stop();
    process.env.HOME = realHome;
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("a worker runs the coder with its user's memory file when the file says so", async () => {
    // The worker's user is whoever $HOME says: here a planted one.
    process.env.HOME = userHome;
    const model = await startAnthropicScriptServer({
      turns: [
        {
          toolUses: [{ name: "Write", input: { file_path: "NOTE.md", content: "noted\n" } }],
          usage: { input_tokens: 50, output_tokens: 5 },
        },
      ],
    });
    try {
      const issue = await h.newIssue("Leave a note", "Please.");
      await h.label(issue, "fleet:claude");
      const octokit = await botClient(h.gh, h.full);
      worker = startLocalWorker({
        repo: { owner: h.owner, repo: h.name },
        github: githubOverOctokit(octokit),
        store: createGitHubStateStore({ github: githubOverOctokit(octokit), owner: h.owner, repo: h.name }),
        cloneUrl: h.cloneUrl,
        workDir: dir,
        adapterFor: () => claudeAdapter,
        credentialFor: () => ({ name: "ANTHROPIC_API_KEY", value: "sk-ant-inherit-config-0123456789" }),
        modelBaseUrl: model.url,
        pollMs: 200,
        heartbeatMs: 2_000,
        trackerIntervalMs: 0,
      });
      await waitFor(
        "the task's pull request",
        async () => (await h.tasks()).find((t) => t.issue === issue && t.state === "pr-open"),
        50_000,
      );
      await worker.idle();
    } finally {
      process.env.HOME = realHome;
      await model.stop();
    }
    const first = model.requests.find((q) => q.kind === "main");
    expect(JSON.stringify(first?.body)).toContain("5521-KESTREL");
  }, 60_000);
});
