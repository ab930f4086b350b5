// Many workers on one queue: `workers` real `fleet run` processes (each with its own work folder and
// FLEET_HOME, as if on as many machines) serve one repository on the offline GitHub (dispatch: local,
// max_concurrent `cap`), whose `tasks` labels the real app queued first; each agent is the stand-in
// (bench/lib/stand-in-claude.mjs) playing `turns` short scripted turns of its own.
// Checked: no task run twice, no state commit with more slots held than the cap, every task ends.
// Counted per task: git requests (the state branch's fetches and pushes; the workers' polls apart),
// state commits, REST requests; claim latency (dispatched -> claimed, as seen in the state); pushes the
// branch refused (a lost compare-and-swap), by cause. Each worker's requests go through a proxy of its
// own (its API URL), and its state store's operations are logged by a preload
// (bench/lib/state-ops-preload.mjs), so every git request is known to be a poll, a claim, a transition.
// Run alone: npx tsx bench/scale-workers.ts [--workers=20] [--tasks=400] [--cap=40] [--turns=2]
//   [--delay-ms=200] [--sandbox=none|bubblewrap] [--concurrency=N (each worker's; default the cap)]
import { execFile } from "node:child_process";
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { ACTIVE_STATES } from "../src/core/lifecycle.ts";
import { STATE_GIT_CHANNEL, type StateGitEvent } from "../src/state/git-store.ts";
import { startHarness } from "../test/support/harness.ts";
import { startAgentModels } from "./lib/agent-models.ts";
import {
  countingProxy,
  exited,
  readOpsLog,
  shimFolder,
  startFleet,
  workerEnv,
} from "./lib/fleet-processes.ts";
import { installationToken } from "./lib/install-token.ts";
import { labelBurst } from "./lib/label-burst.ts";
import { round } from "./lib/route-timer.ts";
import { saveFigures } from "./lib/save-figures.ts";
import { percentile, readStateHistory } from "./lib/state-history.ts";
import { branchStateReader } from "./lib/state-watch.ts";

const git = promisify(execFile);

export interface ScaleWorkersOptions {
  workers: number;
  tasks: number;
  cap: number;
  turns: number;
  delayMs: number;
  sandbox: "none" | "bubblewrap";
  /** Each worker's `--concurrency` (its machine's share); default: the repository's max_concurrent. */
  concurrency?: number;
}

export interface ScaleWorkersResult extends ScaleWorkersOptions {
  /** Tasks that ended with a pull request, of `tasks`; any other end is listed in `ends`. */
  completed: number;
  ends: Record<string, number>;
  /** Tasks whose agent started more than once (the model saw a second first request) or with attempts > 1. */
  ranTwice: number;
  /** State commits with more slot-holding tasks than the cap (must be 0), and the most held at once. */
  overCapCommits: number;
  maxRunning: number;
  stateCommitsPerTask: number;
  git: {
    /**
     * Git requests per task without the reads (the workers' polls, status loop and heartbeat reads: in
     * `fleet run` every state read is one, and costs 1 request when the branch has not moved, 2 when it
     * has): the workers' (claims, transitions, confirmations, re-reads after a lost race) and the app's.
     */
    workersPerTask: number;
    appPerTask: number;
    perTask: number;
    reads: {
      count: number;
      unmoved: number;
      requests: number;
      requestsPerTask: number;
      perWorkerMinute: number;
    };
    /** Operations and requests by cause (a push: a claim, or another transition). */
    byCause: Record<string, { ops: number; requests: number }>;
    /** Worker git requests in no logged operation (none expected). */
    unattributed: number;
  };
  pushes: {
    total: number;
    refused: number;
    refusedRate: number;
    claim: { total: number; refused: number };
    other: { total: number; refused: number };
    claimRefusedRate: number;
  };
  /** Tasks each worker claimed (as the state head shows the claims): the most, the fewest, and how many workers ran any. */
  tasksPerWorker: { min: number; max: number; workersThatRanAny: number };
  /**
   * Dispatched -> claimed, as the state head shows it (commit times, whole seconds): a task claimed in
   * the commit that dispatched it (a worker's hand-off) waited 0. `handedOff`: how many claims were so.
   */
  claimLatencyMs: { p50: number; p99: number; max: number; n: number; handedOff: number };
  /** The earlier measure: a slot freed (an accepted push) -> the claim of the task dispatched into it landed, for claims in commits of their own. */
  claimAfterFreedSlotMs: { p50: number; p99: number; n: number };
  rest: { workersPerTask: number; appPerTask: number };
  wallMs: number;
  /** From the first worker's start to the last task's end. */
  tasksPerMinute: number;
  load: { before: number; max: number; after: number };
}

const flag = (name: string, dflt: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? dflt;

export async function runScaleWorkers(o: ScaleWorkersOptions): Promise<ScaleWorkersResult> {
  const dir = await mkdtemp(join(tmpdir(), "fleet-bench-workers-"));
  const yml = [
    "dispatch: local",
    `max_concurrent: ${o.cap}`,
    "plan_phase: false",
    "retries: { max: 0 }",
    "timeouts: { run_minutes: 30, stall_minutes: 3 }",
    `sandbox: ${o.sandbox}`,
    "",
  ].join("\n");
  const h = await startHarness({ name: "queue", files: { ".github/fleet.yml": yml } });
  const models = await startAgentModels({ turns: o.turns, delayMs: o.delayMs });
  const shims = await shimFolder(join(dir, "shims"), { bwrapLog: join(dir, "bwrap.log"), standIn: true });
  const gitDir = join(h.gh.dataDir, h.owner, `${h.name}.git`);
  const readTasks = branchStateReader(gitDir);
  const loads = [loadavg()[0]!];
  const loadTimer = setInterval(() => loads.push(loadavg()[0]!), 5_000);
  const proxies: Array<Awaited<ReturnType<typeof countingProxy>>> = [];
  try {
    await labelBurst({
      gh: h.gh,
      as: h.mona,
      owner: h.owner,
      repo: h.name,
      webhookUrl: h.app.webhookUrl,
      n: o.tasks,
      tasks: async () => Object.keys((await readTasks()) ?? {}).length,
    });
    await h.settle();
    const commitsBefore = await commitCount(gitDir);
    const gitMark = h.gh.gitRequests.mark();
    const restMark = h.gh.requests.mark();
    const token = await installationToken(h.gh, h.full);
    // The app runs in this process: its state-store operations come on the channel here.
    const appEvents: ReturnType<typeof readOpsLog> = [];
    const onAppEvent = (m: unknown) =>
      appEvents.push({
        t: performance.timeOrigin + performance.now(),
        pid: process.pid,
        ...(m as StateGitEvent),
      });
    subscribe(STATE_GIT_CHANNEL, onAppEvent);
    const t0 = Date.now();
    const workers = await Promise.all(
      Array.from({ length: o.workers }, async (_, i) => {
        const proxy = await countingProxy(h.gh.url);
        proxies.push(proxy);
        const opsLog = join(dir, `ops-${i}.ndjson`);
        const child = startFleet(
          [
            "run",
            "--until-idle",
            "--repo",
            h.full,
            "--api-url",
            proxy.url,
            "--work-dir",
            join(dir, `work-${i}`),
            "--model-base-url",
            models.url,
            ...(o.concurrency ? ["--concurrency", String(o.concurrency)] : []),
          ],
          {
            cwd: dir,
            env: workerEnv(shims, {
              GITHUB_TOKEN: token,
              FLEET_HOME: join(dir, `home-${i}`),
              ANTHROPIC_API_KEY: "sk-ant-bench-credential-0000000000",
            }),
            opsLog,
          },
        );
        return { child, proxy, opsLog };
      }),
    );
    const codes = await Promise.race([
      Promise.all(workers.map((w) => exited(w.child))),
      new Promise<null>((r) => setTimeout(() => r(null), 25 * 60_000)),
    ]);
    if (codes === null) for (const w of workers) w.child.kill("SIGTERM");
    const wallMs = Date.now() - t0;
    unsubscribe(STATE_GIT_CHANNEL, onAppEvent);
    for (const [i, w] of workers.entries()) {
      if (w.child.exitCode !== 0) process.stderr.write(`worker ${i}: ${w.child.output().slice(-2000)}\n`);
      // BENCH_LOGS=folder keeps every worker's own log (its task transitions, stamped) and its state
      // store's operations (each fetch and push with its cause: which claims were by ref, which lost).
      if (process.env.BENCH_LOGS) {
        await writeFile(join(process.env.BENCH_LOGS, `worker-${i}.log`), w.child.output());
        await writeFile(join(process.env.BENCH_LOGS, `ops-${i}.ndjson`), await readFile(w.opsLog));
      }
    }
    await h.settle();

    const tasks = Object.values((await readTasks()) ?? {});
    const history = await readStateHistory(gitDir, o.cap);
    const commits = (await commitCount(gitDir)) - commitsBefore;
    const ends = countBy(
      tasks.map((t) => (t.state === "failed" ? `failed: ${t.reason?.slice(0, 120)}` : t.state)),
    );

    // Every worker git request belongs to the state-store operation of its own process open at the time.
    const byCause: Record<string, { ops: number; requests: number }> = {};
    const reads = { count: 0, unmoved: 0, requests: 0 };
    let unattributed = 0;
    const pushes = { total: 0, refused: 0, claim: { total: 0, refused: 0 }, other: { total: 0, refused: 0 } };
    for (const w of workers) {
      const ops = operationsOf(readOpsLog(w.opsLog));
      for (const c of w.proxy.calls.filter((c) => c.git)) {
        const kind = c.git === "git-receive-pack" ? "push" : "fetch";
        const op = ops.find((x) => x.operation === kind && c.at >= x.from - 5 && c.at <= x.to + 5);
        if (op) op.requests++;
        else unattributed++;
      }
      for (const op of ops) {
        const cause =
          op.operation === "push"
            ? /claim gh-/.test(op.cause)
              ? "push: claim"
              : "push: transition"
            : `fetch: ${op.cause}`;
        const c = byCause[cause] ?? { ops: 0, requests: 0 };
        byCause[cause] = c;
        c.ops++;
        c.requests += op.requests;
        // In `fleet run` every read of the state (the worker's polls, the status loop, heartbeats) says "read".
        if (op.operation === "fetch" && (op.cause === "read" || op.cause === "poll")) {
          reads.count++;
          reads.requests += op.requests;
          if (op.requests <= 1) reads.unmoved++;
        }
        if (op.operation !== "push") continue;
        const kind = /claim gh-/.test(op.cause) ? pushes.claim : pushes.other;
        kind.total++;
        pushes.total++;
        if (op.rejected) {
          kind.refused++;
          pushes.refused++;
        }
      }
    }
    const workerGit = workers.reduce((n, w) => n + w.proxy.calls.filter((c) => c.git).length, 0);
    const allGit = h.gh.gitRequests.counts({ since: gitMark }).total;
    const workerRest = workers.reduce((n, w) => n + w.proxy.calls.filter((c) => !c.git).length, 0);
    const fleetRest = h.gh.requests.entries.filter(
      (e) => e.seq > restMark && (e.actor === h.gh.botLogin || e.actor === "app"),
    ).length;
    // Claim latency from the pushes themselves (ms): a slot freed (an accepted push that ended a run,
    // which dispatches the next queued task in the same commit) -> that task's claim landed. Queued tasks
    // are dispatched in issue order (one priority, first in first out), one per freed slot, so the k-th
    // task dispatched after the first `cap` goes with the k-th freed slot. (A commit's message may name
    // only its first transitions, so the dispatch itself is not looked for.)
    const landed = [...workers.flatMap((w) => operationsOf(readOpsLog(w.opsLog))), ...operationsOf(appEvents)]
      .filter((op) => op.operation === "push" && !op.rejected && Number.isFinite(op.to))
      .sort((a, b) => a.to - b.to);
    const freed: number[] = [];
    const claimedAt = new Map<number, number>();
    for (const op of landed) {
      for (const _ of op.cause.matchAll(/-> (pr-open|failed|done|cancelled)/g)) freed.push(op.to);
      for (const m of op.cause.matchAll(/claim gh-(\d+)/g))
        if (!claimedAt.has(Number(m[1]))) claimedAt.set(Number(m[1]), op.to);
    }
    const later = [...claimedAt.keys()].sort((a, b) => a - b).slice(o.cap);
    const claims = later
      .map((issue, k) => claimedAt.get(issue)! - (freed[k] ?? Number.NaN))
      .filter((ms) => Number.isFinite(ms) && ms >= 0);
    const ranTwice = new Set([
      ...[...models.tasks.entries()].filter(([, t]) => t.runs > 1).map(([k]) => k),
      ...tasks.filter((t) => t.attempts > 1).map((t) => `${h.full}#${t.issue}`),
    ]).size;
    const ended = tasks.filter((t) => !ACTIVE_STATES.has(t.state) && t.state !== "queued");
    // Claims by worker name (each `fleet run` process has its own): every worker, also one that claimed none.
    const claimsOf = new Map<string, number>();
    for (const c of history.claims) claimsOf.set(c.holder, (claimsOf.get(c.holder) ?? 0) + 1);
    const byWorker = [...claimsOf.values(), ...Array(Math.max(0, o.workers - claimsOf.size)).fill(0)];
    const waits = history.claims.map((c) => (c.waitedFrom === undefined ? 0 : c.claimedAt - c.waitedFrom));
    const per = (n: number) => round(n / o.tasks, 2);
    return {
      ...o,
      completed: tasks.filter((t) => t.state === "pr-open" || t.state === "done").length,
      ends,
      ranTwice,
      overCapCommits: history.overCap.length,
      maxRunning: history.maxRunning,
      stateCommitsPerTask: per(commits),
      git: {
        workersPerTask: per(workerGit - reads.requests),
        appPerTask: per(allGit - workerGit),
        perTask: per(allGit - reads.requests),
        reads: {
          ...reads,
          requestsPerTask: per(reads.requests),
          perWorkerMinute: round(reads.count / o.workers / (wallMs / 60_000), 1),
        },
        byCause,
        unattributed,
      },
      pushes: {
        ...pushes,
        refusedRate: round(pushes.refused / Math.max(1, pushes.total), 3),
        claimRefusedRate: round(pushes.claim.refused / Math.max(1, pushes.claim.total), 3),
      },
      tasksPerWorker: {
        min: Math.min(...byWorker),
        max: Math.max(...byWorker),
        workersThatRanAny: byWorker.filter((n) => n > 0).length,
      },
      claimLatencyMs: {
        p50: round(percentile(waits, 50), 0),
        p99: round(percentile(waits, 99), 0),
        max: waits.length ? Math.round(Math.max(...waits)) : Number.NaN,
        n: waits.length,
        handedOff: history.claims.filter((c) => c.waitedFrom === undefined).length,
      },
      claimAfterFreedSlotMs: {
        p50: round(percentile(claims, 50), 0),
        p99: round(percentile(claims, 99), 0),
        n: claims.length,
      },
      rest: { workersPerTask: per(workerRest), appPerTask: per(fleetRest - workerRest) },
      wallMs,
      tasksPerMinute: round(ended.length / (wallMs / 60_000), 1),
      load: {
        before: round(loads[0]!, 2),
        max: round(Math.max(...loads), 2),
        after: round(loadavg()[0]!, 2),
      },
    };
  } finally {
    clearInterval(loadTimer);
    for (const p of proxies) await p.stop().catch(() => {});
    await models.stop();
    await h.stop();
    await rm(dir, { recursive: true, force: true }).catch(() => {});
  }
}

interface Operation {
  from: number;
  to: number;
  operation: string;
  cause: string;
  rejected: boolean;
  requests: number;
}

/** A process's state-store operations from its start and end events (one at a time per store). */
function operationsOf(events: ReturnType<typeof readOpsLog>): Operation[] {
  const ops: Operation[] = [];
  const open: Operation[] = [];
  for (const e of events) {
    if (e.phase === "start") {
      const op = {
        from: e.t,
        to: Number.POSITIVE_INFINITY,
        operation: e.operation,
        cause: e.cause,
        rejected: false,
        requests: 0,
      };
      ops.push(op);
      open.push(op);
      continue;
    }
    const op = open.find((x) => x.operation === e.operation && x.cause === e.cause);
    if (!op) continue;
    op.to = e.t;
    op.rejected = e.rejected === true;
    open.splice(open.indexOf(op), 1);
  }
  return ops;
}

async function commitCount(gitDir: string): Promise<number> {
  const r = await git("git", ["-C", gitDir, "rev-list", "--count", "fleet/state"]).catch(() => ({
    stdout: "0",
  }));
  return Number(r.stdout.trim());
}

const countBy = (xs: string[]): Record<string, number> => {
  const out: Record<string, number> = {};
  for (const x of xs) out[x] = (out[x] ?? 0) + 1;
  return out;
};

if (import.meta.url === `file://${process.argv[1]}`) {
  const r = await runScaleWorkers({
    workers: Number(flag("workers", "20")),
    tasks: Number(flag("tasks", "400")),
    cap: Number(flag("cap", "40")),
    turns: Number(flag("turns", "2")),
    delayMs: Number(flag("delay-ms", "200")),
    sandbox: flag("sandbox", "none") as "none" | "bubblewrap",
    ...(flag("concurrency", "") ? { concurrency: Number(flag("concurrency", "")) } : {}),
  });
  console.log(JSON.stringify(r, null, 2));
  await saveFigures(r);
  // The app's and servers' keep-alive sockets may hold the loop open a while: the figures are out.
  process.exit(0);
}
