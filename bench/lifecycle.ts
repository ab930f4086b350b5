// One task's whole life on the offline GitHub: label -> queued -> dispatched -> the local worker runs
// the REAL Claude CLI against the scripted Anthropic server -> PR -> maintainer merges -> done.
// Counts every REST request Fleet (app + worker, both `fleet[bot]`) sends, and state-branch commits.
// Run alone: npx tsx bench/lifecycle.ts (BENCH_TRACE=1 prints every request Fleet sent, in order)
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { startAnthropicScriptServer } from "@fleet/model-servers";
import { getAdapter } from "../src/agents/index.ts";
import type { Task } from "../src/core/task.ts";
import { githubOverOctokit } from "../src/github/octokit-port.ts";
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

/** What one task's life cost, label to done. */
export interface TaskCounts {
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
  /** Workflow runs the state commits started (every state commit says `[skip ci]`). */
  workflowRunsFromState: number;
  /** Git smart-HTTP requests (the state branch's fetches and pushes): not REST. */
  gitRequests: { total: number; fetches: number; pushes: number };
  labelToPrMs: number;
  labelToDoneMs: number;
  byRoute: Record<string, number>;
  /**
   * Every git operation of the state stores in order, with its git requests: which part of Fleet ran
   * it (app, worker), fetch or push, and why (a push names its transitions; a fetch its cause).
   */
  gitOperations: GitOperation[];
  /** Git requests of no state-store operation (none when the worker clones over file://, as here). */
  gitOtherRequests: number;
  /**
   * Git requests of the worker's polls that found nothing to claim: a cost per poll interval while the
   * worker waits (1 request when the branch has not moved), not per task; here polls are 1 s apart.
   */
  gitIdlePollRequests: number;
  /** `gitRequests.total` without the idle polls: what the task itself cost (the figure with a target). */
  gitRequestsPerTask: number;
}

/** Requests of the worker's polls other than the one that found the task it then claimed. */
function idlePollRequests(ops: readonly GitOperation[]): number {
  const claim = ops.findIndex((o) => o.operation === "push" && o.cause.startsWith("claim "));
  let found = -1;
  for (let i = 0; i < claim; i++) if (ops[i]!.cause === "poll") found = i;
  return ops.reduce((n, o, i) => (o.cause === "poll" && i !== found ? n + o.requests : n), 0);
}

/**
 * A task's life on running processes (the figures at the top), and the first task after the app and
 * the worker started (`firstTask`), which also pays what a process does once: reading the config,
 * fetching the state branch for the first time.
 */
export interface LifecycleResult extends TaskCounts {
  stateTransport: string;
  firstTask: TaskCounts;
  agent: string;
}

const turnsWriting = (file: string) => [
  { text: `Plan: 1. Write ${file} with one line.`, usage: USAGE },
  {
    toolUses: [
      { name: "Bash", input: { command: `echo "made by fleet" > ${file}`, description: "write file" } },
    ],
    usage: USAGE,
  },
  { text: `Wrote ${file}.`, usage: USAGE },
];

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
  // Two tasks one after the other, each writing its own file.
  const model = await startAnthropicScriptServer({
    turns: [...turnsWriting("DONE.md"), ...turnsWriting("DONE2.md")],
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
      github: githubOverOctokit(octokit),
      store: createRepoStateStore({ github: githubOverOctokit(octokit), owner: h.owner, repo: h.name }),
      cloneUrl: h.cloneUrl,
      workDir,
      adapterFor: getAdapter,
      credentialFor: () => ({ name: "anthropic-demo", value: "sk-ant-demo-credential-000000" }),
      modelBaseUrl: model.url,
      agentEnv: { CLAUDE_CODE_MAX_RETRIES: "0" },
      // Polls 1 s apart so the bench does not wait; idle polls are listed apart (see TaskCounts).
      pollMs: 1_000,
      // Heartbeats at the default pace (a third of the lease): a task of seconds has none, as in use.
      trackerIntervalMs: 0,
    }),
  );

  const oneTask = async (title: string): Promise<TaskCounts> => {
    const issue = await h.newIssue(title, `${title}.`);
    const statesBefore = await commitsOnState();
    const runsBefore = h.gh.workflowRuns(h.full).length;
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
    // The worker's last edits and reads after the outcome, then quiet.
    await worker.idle();
    await new Promise((r) => setTimeout(r, 500));
    const traced = gitTrace.stop();
    const all = h.gh.requests.entries.filter(
      (e) => e.seq > mark && (e.actor === h.gh.botLogin || e.actor === "app"),
    );
    const isMint = (e: { route: string }) =>
      e.route === "POST /app/installations/{installation_id}/access_tokens";
    const fleet = all.filter((e) => !isMint(e));
    if (process.env.BENCH_TRACE)
      for (const e of fleet) console.error(`${e.actor} ${e.method} ${e.path} ${e.status}`);
    const byRoute: Record<string, number> = {};
    for (const e of fleet) byRoute[e.route] = (byRoute[e.route] ?? 0) + 1;
    const stateRuns = h.gh
      .workflowRuns(h.full)
      .slice(runsBefore)
      .filter((r) => r.headBranch === "fleet/state").length;
    const gitRequests = h.gh.gitRequests.counts({ since: gitMark });
    const idlePolls = idlePollRequests(traced.operations);
    return {
      restCalls: fleet.length,
      tokenMints: all.filter(isMint).length,
      reads: fleet.filter((e) => e.class === "read").length,
      writes: fleet.filter((e) => e.class !== "read").length,
      contentCreating: fleet.filter((e) => e.class === "content").length,
      stateWrites: (await commitsOnState()) - statesBefore,
      workflowRunsFromState: stateRuns,
      gitRequests,
      labelToPrMs: Math.round(labelToPrMs),
      labelToDoneMs: Math.round(labelToDoneMs),
      byRoute,
      gitOperations: traced.operations,
      gitOtherRequests: traced.other,
      gitIdlePollRequests: idlePolls,
      gitRequestsPerTask: gitRequests.total - idlePolls,
    };
  };

  try {
    const firstTask = await oneTask("Add DONE.md");
    const next = await oneTask("Add DONE2.md");
    return {
      ...next,
      stateTransport: process.env.FLEET_STATE_TRANSPORT || "git",
      firstTask,
      agent: "real Claude CLI (@anthropic-ai/claude-code) against @fleet/model-servers (Anthropic Messages)",
    };
  } finally {
    await worker.stop().catch(() => {});
    await model.stop();
    await h.stop();
    await rm(workDir, { recursive: true, force: true });
  }
}

/** The per-task counts as a reader wants them: REST by route, git by operation and cause. */
export function printLifecycle(r: TaskCounts, write: (line: string) => void = console.log): void {
  write(`REST requests per task: ${r.restCalls} (${r.contentCreating} content-creating), by route:`);
  for (const [route, n] of Object.entries(r.byRoute)) write(`  ${String(n).padStart(3)}  ${route}`);
  write(
    `git requests: ${r.gitRequestsPerTask} for the task + ${r.gitIdlePollRequests} of idle worker polls (${r.gitRequests.fetches} fetch, ${r.gitRequests.pushes} push in all), ${r.stateWrites} state commits (${r.workflowRunsFromState} workflow runs started), by operation:`,
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
  console.log("\nThe first task after the app and the worker started:");
  printLifecycle(r.firstTask);
  console.log("\nA task on running processes (the figures compared with the targets):");
  printLifecycle(r);
}
