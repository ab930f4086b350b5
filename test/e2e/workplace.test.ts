// The agent's workplace in both ways of running a task, each with the real Fleet app on the offline
// GitHub and the real Claude Code CLI against a scripted model: `fleet run` (dispatch: local) and the
// action bundle on an emulated runner (dispatch: actions). In each, the agent (a) sees what `setup`
// made and none of it is committed, (b) reaches no listener of the host and no host the allowlist
// leaves out (the refusal is reported), (c) cannot start more processes than `limits.pids`, and the
// task then ends with a reason naming the limit.
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ScriptTurn, startAnthropicScriptServer } from "@fleet/model-servers";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Task } from "../../src/core/task.ts";
import { limitsEnforcement } from "../../src/worker/sandbox/cgroup-limits.ts";
import { cliEnv, fleet, scriptedRunArgs } from "../cli/cli-helpers.ts";
import { toolResults } from "../security/containment-support.ts";
import { type ActionRun, type Dispatched, runActionBundle } from "../support/action-runner.ts";
import { type Harness, startHarness } from "../support/harness.ts";

const USAGE = { input_tokens: 100, output_tokens: 10 };
const bash = (command: string) => ({ name: "Bash", input: { command, description: "step" } });
const EGRESS_HOSTS = "registry.test=127.0.0.1,blocked.test=127.0.0.1";

/** A loopback listener standing in for the allowed registry (registry.test) and for a host service. */
async function startService(): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => res.end(`served ${req.url}\n`));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

const fleetYml = (dispatch: "local" | "actions", port: number) =>
  [
    `dispatch: ${dispatch}`,
    "runner_labels: [self-hosted, fleet]",
    "plan_phase: false",
    "retries: { max: 0 }",
    "timeouts: { run_minutes: 3, stall_minutes: 2 }",
    "setup:",
    "  - mkdir -p node_modules/dep && echo 'module.exports = 42;' > node_modules/dep/index.js",
    `  - curl -sf http://registry.test:${port}/setup > fetched-by-setup.txt`,
    "network:",
    `  allow: ["registry.test:${port}"]`,
    "  registries: false",
    "limits: { pids: 64 }",
    "",
  ].join("\n");

/** The agent's turns: use what setup made, probe the network, then make its change. */
const probing = (port: number): ScriptTurn[] => [
  {
    toolUses: [
      bash(
        [
          "cat node_modules/dep/index.js fetched-by-setup.txt",
          `curl -s -o /dev/null -w 'registry:%{http_code}\\n' http://registry.test:${port}/ok`,
          `curl -s -o /dev/null -w 'blocked:%{http_code}\\n' http://blocked.test:${port}/x`,
          `(exec 3<>/dev/tcp/127.0.0.1/${port}) 2>/dev/null && echo HOST-LISTENER-REACHED`,
          "echo probed",
        ].join("; "),
      ),
    ],
    usage: USAGE,
  },
  { toolUses: [bash("echo 'uses dep' > USES_DEP.md")], usage: USAGE },
  { text: "Done.", usage: USAGE },
];

const forking: ScriptTurn[] = [
  { toolUses: [bash("for i in $(seq 1 300); do sleep 123 & done; wait; echo finished")], usage: USAGE },
  { text: "Done.", usage: USAGE },
];

/** Asserts (a) and (b) on a finished task; returns the tool results the agent saw. */
async function expectWorkplace(h: Harness, task: Task, seen: string, port: number) {
  expect(task.state, task.reason).toBe("pr-open");
  expect(seen).toContain("module.exports = 42;");
  expect(seen).toContain("served /setup");
  expect(seen).toContain("registry:200");
  expect(seen).toContain("blocked:403");
  expect(seen).not.toContain("HOST-LISTENER-REACHED");
  expect(seen).toContain("probed");
  const pr = h.gh.pulls(h.full).find((p) => p.number === task.pr)!;
  const bare = await mkdtemp(join(tmpdir(), "fleet-workplace-mirror-"));
  await execa("git", ["clone", "-q", "--mirror", h.cloneUrl, bare]);
  const files = (await execa("git", ["-C", bare, "diff", "--name-only", "main", pr.head])).stdout;
  await rm(bare, { recursive: true, force: true });
  expect(files.split("\n").filter(Boolean)).toEqual(["USES_DEP.md"]);
  const tracking = h
    .botComments(task.issue)
    .map((c) => c.body)
    .join("\n");
  expect(tracking).toContain(`| \`blocked.test\` | ${port} | 1 | not allowed |`);
}

const enforced = async () => (await limitsEnforcement()).kind !== "none";

describe("workplace under `fleet run` (dispatch: local)", () => {
  let h: Harness;
  let svc: { server: Server; port: number };
  let scratch: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    svc = await startService();
    h = await startHarness({ files: { ".github/fleet.yml": fleetYml("local", svc.port) } });
    scratch = await mkdtemp(join(tmpdir(), "fleet-workplace-cli-"));
    env = cliEnv({
      HOME: join(scratch, "home"),
      FLEET_HOME: join(scratch, "home", ".fleet"),
      GITHUB_TOKEN: h.gh.userToken("mona"),
      ANTHROPIC_API_KEY: "sk-ant-workplace-cli-0123456789abcdef",
      FLEET_EGRESS_HOSTS: EGRESS_HOSTS,
    });
  }, 120_000);

  afterAll(async () => {
    await h?.stop();
    await new Promise<void>((resolve) => svc?.server.close(() => resolve()));
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  async function scenario(title: string, turns: ScriptTurn[]) {
    const issue = await h.newIssue(title, `${title}.`);
    await h.label(issue, "fleet:claude");
    await h.settle();
    const model = await startAnthropicScriptServer({ turns });
    let run: Awaited<ReturnType<typeof fleet>>;
    try {
      run = await fleet([...scriptedRunArgs(model.url), "--repo", h.full, "--api-url", h.gh.url], {
        cwd: scratch,
        env,
      });
    } finally {
      await model.stop();
    }
    await h.settle();
    const task = (await h.tasks()).find((t) => t.issue === issue)!;
    return { task, run, seen: toolResults(model.requests) };
  }

  it("(a) setup's files are seen, never committed; (b) only allowed hosts are reached, the refusal listed", async () => {
    const r = await scenario("Use the dependency", probing(svc.port));
    await expectWorkplace(h, r.task, r.seen, svc.port);
    const log = await fleet(["task", r.task.id, "log", "--repo", h.full, "--api-url", h.gh.url], {
      cwd: scratch,
      env,
    });
    expect(log.stdout).toContain("== setup (setup.log) ==");
    expect(log.stdout).toMatch(new RegExp(`blocked\\.test:${svc.port}\\s+1×\\s+not allowed`));
  }, 240_000);

  it("(c) a run over limits.pids is stopped, and the task says which limit", async () => {
    if (!(await enforced())) return;
    const r = await scenario("Fork a lot", forking);
    expect(r.task.state).toBe("failed");
    expect(r.task.reason).toMatch(/process limit \(limits\.pids: 64/);
    // `sleep 123`, a duration of this file's own: pgrep sees the machine, where other files run sleep too.
    expect((await execa("pgrep", ["-f", "sleep 123"], { reject: false })).stdout.trim()).toBe("");
  }, 240_000);
});

describe("workplace under the action bundle on a runner (dispatch: actions)", () => {
  let h: Harness;
  let svc: { server: Server; port: number };
  let scratch: string;
  let onDispatch: (run: Dispatched) => void = () => {};

  beforeAll(async () => {
    svc = await startService();
    const workflow = await readFile(".github/workflows/fleet-task.yml", "utf8");
    h = await startHarness({
      files: {
        ".github/fleet.yml": fleetYml("actions", svc.port),
        ".github/workflows/fleet-task.yml": workflow,
      },
    });
    scratch = await mkdtemp(join(tmpdir(), "fleet-workplace-action-"));
    h.gh.onWorkflowDispatch((run) => onDispatch(run));
  }, 120_000);

  afterAll(async () => {
    await h?.stop();
    await new Promise<void>((resolve) => svc?.server.close(() => resolve()));
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  async function scenario(title: string, turns: ScriptTurn[]) {
    const model = await startAnthropicScriptServer({ turns });
    const finished = new Promise<ActionRun>((resolveRun, reject) => {
      onDispatch = (run) => {
        void (async () => {
          await h.gh.setWorkflowRunStatus(h.full, run.id, "in_progress");
          const result = await runActionBundle({
            h,
            run,
            scratch,
            inputs: {
              credentials: "ANTHROPIC_API_KEY=sk-ant-workplace-action-0123456789\n",
              "model-base-url": model.url,
              "agent-env": "CLAUDE_CODE_MAX_RETRIES=0",
            },
            extraEnv: { FLEET_EGRESS_HOSTS: EGRESS_HOSTS },
          });
          await h.gh.setWorkflowRunStatus(
            h.full,
            run.id,
            "completed",
            result.code === 0 ? "success" : "failure",
          );
          resolveRun(result);
        })().catch(reject);
      };
    });
    const issue = await h.newIssue(title, `${title}.`);
    await h.label(issue, "fleet:claude");
    const result = await finished;
    await model.stop();
    await h.settle();
    const task = (await h.tasks()).find((t) => t.issue === issue)!;
    return { task, result, seen: toolResults(model.requests) };
  }

  it("(a) and (b) on a runner", async () => {
    const r = await scenario("Use the dependency on a runner", probing(svc.port));
    await expectWorkplace(h, r.task, r.seen, svc.port);
  }, 240_000);

  it("(c) on a runner", async () => {
    if (!(await enforced())) return;
    const r = await scenario("Fork a lot on a runner", forking);
    expect(r.task.state).toBe("failed");
    expect(r.task.reason).toMatch(/process limit \(limits\.pids: 64/);
    expect(r.result.outputs.conclusion).toBe("failed");
  }, 240_000);
});
