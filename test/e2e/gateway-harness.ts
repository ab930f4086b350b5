import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { GitHubEmulator } from "@fleet/github-emulator";
import type { ScriptServer, ScriptTurn } from "@fleet/model-servers";
import { startAnthropicScriptServer, startOpenAIScriptServer } from "@fleet/model-servers";
import type { Octokit } from "@octokit/rest";
import { afterAll, beforeAll } from "vitest";
import { claudeAdapter } from "../../src/agents/claude.ts";
import { codexAdapter } from "../../src/agents/codex.ts";
import { defaultFleetConfig } from "../../src/core/config.ts";
import { perTaskLimits } from "../../src/economy/budgets.ts";
import type { WindowBook } from "../../src/economy/credential-windows.ts";
import { createCredentialRotation } from "../../src/economy/rotation.ts";
import { createWireReader } from "../../src/economy/wire-usage.ts";
import { githubOverOctokit, type OctokitClient } from "../../src/github/octokit-port.ts";
import { createLocalStateStore } from "../../src/state/local-store.ts";
import { runTask, type TaskSpec, type WorkerDeps } from "../../src/worker/3-attempt.ts";
import { worktreePath } from "../../src/worker/workspace/worktree.ts";
import { startTaskRepository, stopTaskRepository } from "../support/task-repository.ts";

const OWNER = "octo-org";
const NAME = "economy-wire";
const REPO = `${OWNER}/${NAME}`;
export const KEYS: Record<string, string> = {
  KEY_A: "sk-ant-api03-wireAAAAAAAAAAAAAAAAAAAA",
  KEY_B: "sk-ant-api03-wireBBBBBBBBBBBBBBBBBBBB",
  KEY_C: "sk-ant-api03-wireCCCCCCCCCCCCCCCCCCCC",
};
// The defaults of .github/fleet.yml: what a new user gets.
const DEFAULTS = defaultFleetConfig();

let gh: GitHubEmulator;
let repo: { cloneUrl: string; installationId: number };
let bot: OctokitClient;
let mona: Octokit;
let workDir: string;
let seq = 0;

/** The emulator and the work folder for the test file that calls it (its beforeAll and afterAll). */
export function useGitHub(): void {
  beforeAll(setUp);
  afterAll(tearDown);
}

async function setUp() {
  ({ gh, repo, bot, mona, workDir } = await startTaskRepository({
    owner: OWNER,
    name: NAME,
    files: { "README.md": "# wire\n" },
    workPrefix: "fleet-gateway-e2e-",
  }));
}

const tearDown = () => stopTaskRepository({ gh, workDir });

export type Coder = "claude" | "codex";

/** One task run by runTask with the config's defaults, against a scripted server made from `turns(worktree)`. */
export async function run(
  coder: Coder,
  turns: (worktree: string) => ScriptTurn[],
  deps: Partial<WorkerDeps> = {},
  opts: { baseUrl?: (server: ScriptServer) => string } = {},
) {
  const taskId = `fl-wire${++seq}`;
  const title = `Wire task ${seq}`;
  const { data: issue } = await mona.rest.issues.create({ owner: OWNER, repo: NAME, title, body: title });
  const script = { turns: turns(worktreePath(workDir, taskId)) };
  const server =
    coder === "claude" ? await startAnthropicScriptServer(script) : await startOpenAIScriptServer(script);
  const spec: TaskSpec = {
    taskId,
    repo: REPO,
    issue: issue.number,
    title,
    body: title,
    comments: [],
    coder,
    model: coder === "claude" ? "claude-sonnet-4-5" : "o4-mini",
    planPhase: false,
    planApproval: false,
    timeouts: { runMs: 120_000, stallMs: 60_000 },
    attempt: 1,
  };
  try {
    const outcome = await runTask(spec, {
      github: githubOverOctokit(bot),
      cloneUrl: repo.cloneUrl,
      workDir,
      adapter: coder === "claude" ? claudeAdapter : codexAdapter,
      credential:
        coder === "claude"
          ? { name: "ANTHROPIC_API_KEY", value: KEYS.KEY_A! }
          : { name: "OPENAI_API_KEY", value: "sk-test-wireE2Edummy0123456789" },
      modelBaseUrl: opts.baseUrl ? opts.baseUrl(server) : server.url,
      agentEnv: coder === "claude" ? { CLAUDE_CODE_MAX_RETRIES: "0" } : {},
      perTaskLimits: perTaskLimits(DEFAULTS.budgets, coder),
      ...deps,
    });
    const comments = gh
      .comments(REPO, issue.number)
      .map((c) => c.body)
      .join("\n");
    return { outcome, server, comments };
  } finally {
    await server.stop();
  }
}

export const main = (s: ScriptServer) => s.requests.filter((r) => r.kind !== "side");
export const sum = (turns: ScriptTurn[], f: (u: NonNullable<ScriptTurn["usage"]>) => number) =>
  turns.reduce((a, t) => a + (t.usage ? f(t.usage) : 0), 0);

export function pool(home: string, book: WindowBook, names: string[]) {
  return createCredentialRotation({
    store: createLocalStateStore({ home }),
    coder: "claude",
    names,
    secretOf: (n) => KEYS[n],
    clock: () => new Date(),
    fallbackSeconds: 60,
    book,
  });
}

/**
 * A provider in front of the scripted servers that limits each key to `limit` tokens a minute and says
 * so in Anthropic's rate-limit headers; it records every request sent on a key at 90% of its window
 * or more while another key had room.
 */
export async function startRateLimitedProvider(limit: number) {
  const byKey = new Map<string, number>();
  const routes = new Map<string, string>();
  const violations: string[] = [];
  const nameOf = (key: string) => Object.entries(KEYS).find(([, v]) => v === key)?.[0] ?? "unknown";
  const server: Server = createServer((req, res) => {
    const [, route, ...rest] = (req.url ?? "/").split("/");
    const upstream = new URL(routes.get(route ?? "") ?? "http://127.0.0.1:1");
    const key = nameOf(String(req.headers["x-api-key"] ?? ""));
    const share = (k: string) => (byKey.get(k) ?? 0) / limit;
    if (req.method === "POST" && share(key) >= 0.9 && ["KEY_A", "KEY_B", "KEY_C"].some((k) => share(k) < 0.9))
      violations.push(`${key} at ${Math.round(share(key) * 100)}%`);
    const headers: IncomingHttpHeaders = { ...req.headers, host: upstream.host };
    const out = httpRequest(
      {
        hostname: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: `/${rest.join("/")}`,
        headers,
      },
      (up) => {
        const chunks: Buffer[] = [];
        up.on("data", (c: Buffer) => chunks.push(c));
        up.on("end", () => {
          const body = Buffer.concat(chunks);
          if (req.method === "POST" && /\/v1\/messages$/.test((req.url ?? "").split("?")[0]!)) {
            const reader = createWireReader("anthropic", String(up.headers["content-type"] ?? ""));
            reader.push(body);
            const u = reader.finish().usage;
            byKey.set(key, (byKey.get(key) ?? 0) + u.input + u.output + u.cacheRead + u.cacheWrite);
          }
          const reset = new Date(Date.now() + 60_000).toISOString();
          const { "transfer-encoding": _te, connection: _c, "keep-alive": _k, ...kept } = up.headers;
          res.writeHead(up.statusCode ?? 502, {
            ...kept,
            "content-length": String(body.length),
            "anthropic-ratelimit-tokens-limit": String(limit),
            "anthropic-ratelimit-tokens-remaining": String(Math.max(0, limit - (byKey.get(key) ?? 0))),
            "anthropic-ratelimit-tokens-reset": reset,
          });
          res.end(body);
        });
      },
    );
    req.pipe(out);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    violations,
    route(name: string, to: string) {
      routes.set(name, to);
      return `${url}/${name}`;
    },
    used: () => Object.fromEntries([...byKey].filter(([, n]) => n > 0)),
    stop: () => new Promise<void>((r) => server.close(() => r())),
  };
}
