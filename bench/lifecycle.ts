// One task's whole life on the offline GitHub: label -> queued -> dispatched -> the local worker runs
// the REAL Claude CLI against the scripted Anthropic server -> PR -> maintainer merges -> done.
// Counts every REST request Fleet (app + worker, both `fleet[bot]`) sends, and state-branch commits.
// Run alone: npx tsx bench/lifecycle.ts (BENCH_TRACE=1 prints every request Fleet sent, in order)
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { getAdapter } from "../src/agents/index.ts";
import type { Task } from "../src/core/task.ts";
import { startAnthropicScriptServer } from "../src/offline/models/anthropic-server.ts";
import { createRepoStateStore } from "../src/state/repo-store.ts";
import { startLocalWorker } from "../src/worker/local-worker.ts";
import { waitFor } from "../test/support/bot-client.ts";
import { startHarness } from "../test/support/harness.ts";
import { countingBotClient } from "./lib/bot.ts";
import { type GitOperation, partOf, traceGit } from "./lib/git-trace.ts";

const git = promisify(execFile);
const USAGE = {
  input_tokens: 1200,
  output_tokens: 80,
  cache_read_input_tokens: 300,
  cache_creation_input_tokens: 40,
};

export interface LifecycleResult {
  /** REST requests of the task's life, without installation-token mints (see tokenMints). */
  restCalls: number;
  /**
   * Installation tokens minted in the window (app and worker). A token serves every request of its
   * process for an hour, whatever the number of tasks, and is asked for with the app's JWT, not
   * against the installation's rate limit: it is not a per-task cost, so it is counted apart.
   */
  tokenMints: number;
  reads: number;
  writes: number;
  contentCreating: number;
  stateWrites: number;
  /** Git smart-HTTP requests (the state branch's fetches and pushes, the worker's clone and push): not REST. */
  gitRequests: { total: number; fetches: number; pushes: number };
  stateTransport: string;
  labelToPrMs: number;
  labelToDoneMs: number;
  byRoute: Record<string, number>;
  /**
   * Every git operation of the state stores in order, with its git requests: which part of Fleet ran
   * it (app, worker), fetch or push, and why (a push names its transition; a fetch its cause).
   */
  gitOperations: GitOperation[];
  /** Git requests of no state-store operation (none when the worker clones over file://, as here). */
  gitOtherRequests: number;
  agent: string;
}

export async function runLifecycle(): Promise<LifecycleResult> {
  process.env.PATH = `${resolve("node_modules/.bin")}:${process.env.PATH}`;
  // The app's and the worker's git operations are told apart by the part they run under.
  const h = await partOf.run("app", () =>
    startHarness({
      name: "lifecycle",
      files: {
        ".github/fleet.yml":
          // The plan phase is on, as by default: its plan is posted before the work starts.
          "dispatch: local\nmax_concurrent: 1\ntimeouts: { run_minutes: 2, stall_minutes: 1 }\n",
      },
    }),
  );
  const model = await startAnthropicScriptServer({
    turns: [
      { text: "Plan: 1. Write DONE.md with one line.", usage: USAGE },
      {
        toolUses: [
          { name: "Bash", input: { command: 'echo "made by fleet" > DONE.md', description: "write file" } },
        ],
        usage: USAGE,
      },
      { text: "Wrote DONE.md.", usage: USAGE },
    ],
  });
  const workDir = await mkdtemp(join(tmpdir(), "fleet-bench-life-"));
  const gitDir = join(h.gh.dataDir, h.owner, `${h.name}.git`);
  const commitsOnState = async () =>
    Number(
      (
        await git("git", ["-C", gitDir, "rev-list", "--count", "fleet/state"]).catch(() => ({ stdout: "0" }))
      ).stdout.trim(),
    );
  const octokit = await countingBotClient(h.gh, h.full);
  const worker = partOf.run("worker", () =>
    startLocalWorker({
      repo: { owner: h.owner, repo: h.name },
      octokit,
      store: createRepoStateStore({ octokit, owner: h.owner, repo: h.name }),
      cloneUrl: h.cloneUrl,
      workDir,
      adapterFor: getAdapter,
      credentialFor: () => ({ name: "anthropic-demo", value: "sk-ant-demo-credential-000000" }),
      modelBaseUrl: model.url,
      agentEnv: { CLAUDE_CODE_MAX_RETRIES: "0" },
      pollMs: 1_000,
      heartbeatMs: 5_000,
      trackerIntervalMs: 0,
    }),
  );
  try {
    const issue = await h.newIssue("Add DONE.md", "Create DONE.md.");
    const statesBefore = await commitsOnState();
    const mark = h.gh.requests.mark();
    const gitMark = h.gh.gitRequests.mark();
    const gitTrace = traceGit(h.gh);
    const t0 = performance.now();
    await h.label(issue, "fleet:claude");
    const taskOf = async (): Promise<Task | undefined> => (await h.tasks()).find((t) => t.issue === issue);
    // Polls of the bench itself go through mona's token and are left out of the counts below.
    const opened = await waitFor(
      "the PR",
      async () => ((await taskOf())?.state === "pr-open" ? await taskOf() : undefined),
      180_000,
    );
    const labelToPrMs = performance.now() - t0;
    await h.mona.rest.pulls.merge({ owner: h.owner, repo: h.name, pull_number: opened!.pr! });
    await h.settle();
    await waitFor("done", async () => (await taskOf())?.state === "done", 60_000);
    const labelToDoneMs = performance.now() - t0;
    await worker.stop();
    await new Promise((r) => setTimeout(r, 500));
    const git = gitTrace.stop();
    const all = h.gh.requests.entries.filter(
      (e) => e.seq > mark && (e.actor === h.gh.botLogin || e.actor === "app"),
    );
    const isMint = (e: { route: string }) =>
      e.route === "POST /app/installations/{installation_id}/access_tokens";
    const fleet = all.filter((e) => !isMint(e));
    if (process.env.BENCH_TRACE) {
      const rows = [
        ...fleet.map((e) => ({
          at: (e as { at?: number }).at ?? 0,
          s: `REST ${e.actor} ${e.method} ${e.path} ${e.status}`,
        })),
        ...h.gh.gitRequests.entries
          .filter((e) => e.seq > gitMark)
          .map((e) => ({ at: e.at, s: `GIT ${e.actor} ${e.method} ${e.path} ${e.service} ${e.status}` })),
      ].sort((a, b) => a.at - b.at);
      for (const r of rows) console.error(r.at, r.s);
    }
    const byRoute: Record<string, number> = {};
    for (const e of fleet) byRoute[e.route] = (byRoute[e.route] ?? 0) + 1;
    return {
      restCalls: fleet.length,
      tokenMints: all.filter(isMint).length,
      reads: fleet.filter((e) => e.class === "read").length,
      writes: fleet.filter((e) => e.class !== "read").length,
      contentCreating: fleet.filter((e) => e.class === "content").length,
      stateWrites: (await commitsOnState()) - statesBefore,
      gitRequests: h.gh.gitRequests.counts({ since: gitMark }),
      stateTransport: process.env.FLEET_STATE_TRANSPORT || "git",
      labelToPrMs: Math.round(labelToPrMs),
      labelToDoneMs: Math.round(labelToDoneMs),
      byRoute,
      gitOperations: git.operations,
      gitOtherRequests: git.other,
      agent: "real Claude CLI (@anthropic-ai/claude-code) against src/offline/models/anthropic-server.ts",
    };
  } finally {
    await worker.stop().catch(() => {});
    await model.stop();
    await h.stop();
    await rm(workDir, { recursive: true, force: true });
  }
}

/** The per-task counts as a reader wants them: REST by route, git by operation and cause. */
export function printLifecycle(r: LifecycleResult, write: (line: string) => void = console.log): void {
  write(`REST requests per task: ${r.restCalls} (${r.contentCreating} content-creating), by route:`);
  for (const [route, n] of Object.entries(r.byRoute)) write(`  ${String(n).padStart(3)}  ${route}`);
  write(
    `git requests per task: ${r.gitRequests.total} (${r.gitRequests.fetches} fetch, ${r.gitRequests.pushes} push), ${r.stateWrites} state commits, by operation:`,
  );
  for (const o of r.gitOperations)
    write(
      `  ${String(o.requests).padStart(3)}  ${o.part} ${o.operation}${o.rejected ? " (rejected)" : ""}: ${o.cause}`,
    );
  if (r.gitOtherRequests) write(`  ${String(r.gitOtherRequests).padStart(3)}  not the state branch`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const r = await runLifecycle();
  console.log(JSON.stringify(r, null, 2));
  printLifecycle(r);
}
