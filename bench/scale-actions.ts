// Actions mode at scale: the real app dispatches the task workflow for `tasks` labeled issues
// (dispatch: actions, max_concurrent = the pool) and a pool of `runners` emulated self-hosted runners
// takes the runs in order, each job the action bundle (dist/index.js) on @fleet/github-emulator's
// runner, its agent the stand-in (bench/lib/stand-in-claude.mjs) against a scripted model of its own.
// Mid-run `kill` runners die with their job (the job's whole process tree is killed, and GitHub ends
// the run as failed, as it does for a lost runner): their tasks must be retried and none run twice.
// Counted per task: dispatches, REST requests of Fleet (the app, and the job with the app's token),
// git requests; runs lost, tasks recovered, tasks whose runs overlapped.
// Run alone: npx tsx bench/scale-actions.ts [--tasks=200] [--runners=20] [--kill=2] [--turns=2]
// FLEET_BENCH_DUMP=<file> writes Fleet's requests there, one a line (seq, time, actor, method, path, status);
// FLEET_BENCH_JOB_LOGS=<dir> keeps each job's output there (<task>-run-<run id>.log).
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import type { WorkflowRun } from "@fleet/github-emulator";
import { runActionJob } from "@fleet/github-emulator/runner";
import { startHarness } from "../test/support/harness.ts";
import { startAgentModels } from "./lib/agent-models.ts";
import { shimFolder } from "./lib/fleet-processes.ts";
import { labelBurst } from "./lib/label-burst.ts";
import { round } from "./lib/route-timer.ts";
import { saveFigures } from "./lib/save-figures.ts";
import { branchStateReader } from "./lib/state-watch.ts";

export interface ScaleActionsOptions {
  tasks: number;
  runners: number;
  kill: number;
  turns: number;
  delayMs: number;
  /** The benchmark stops here even with tasks left, and lists them (a task waiting on its lease would take 15 minutes). */
  deadlineMinutes: number;
}

export interface ScaleActionsResult extends ScaleActionsOptions {
  /** Tasks not ended at the deadline: their state, attempts and whether their run's id was recorded. */
  unfinished: Array<{ id: string; state: string; attempts: number; runId?: string }>;
  /** The first failed jobs' last lines of output (why a run ended without its task reporting). */
  failedJobTails: string[];
  completed: number;
  ends: Record<string, number>;
  dispatches: number;
  dispatchesPerTask: number;
  /** Runs whose runner was killed, their tasks, and how many of those ended with a pull request. */
  runsLost: number;
  lostTasksRecovered: number;
  /** Tasks with two runs at once (their run times overlapped), and tasks with more than one pull request. */
  ranTwiceAtOnce: number;
  duplicatePulls: number;
  restPerTask: number;
  restByActor: Record<string, number>;
  /** Installation tokens minted per task (the jobs' OIDC exchanges, the app's own), apart from restPerTask. */
  tokenMintsPerTask: number;
  restPerTaskByRoute: Record<string, number>;
  gitPerTask: number;
  jobsFailed: number;
  wallMs: number;
  load: { before: number; max: number; after: number };
}

const flag = (name: string, dflt: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? dflt;

/** The job process of a run (the action bundle with the run's id in its environment) and everything under it. */
function jobTree(runId: number): number[] {
  const parentOf = new Map<number, number>();
  let job: number | undefined;
  for (const name of readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      parentOf.set(Number(name), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
      if (
        job === undefined &&
        readFileSync(`/proc/${name}/environ`, "utf8").includes(`\0GITHUB_RUN_ID=${runId}\0`)
      )
        job = Number(name);
    } catch {
      // gone
    }
  }
  if (job === undefined) return [];
  const tree = [job];
  for (let grew = true; grew; ) {
    grew = false;
    for (const [pid, ppid] of parentOf)
      if (tree.includes(ppid) && !tree.includes(pid)) {
        tree.push(pid);
        grew = true;
      }
  }
  return tree;
}

export async function runScaleActions(o: ScaleActionsOptions): Promise<ScaleActionsResult> {
  const scratch = await mkdtemp(join(tmpdir(), "fleet-bench-actions-"));
  const workflow = await readFile(join(import.meta.dirname, "../.github/workflows/fleet-task.yml"), "utf8");
  const yml = [
    "dispatch: actions",
    "runner_labels: [self-hosted, fleet]",
    `max_concurrent: ${o.runners}`,
    "plan_phase: false",
    // A lost runner's task is retried at once (a short backoff): the wake-up timer starts it.
    "retries: { max: 1, backoff_seconds: 1 }",
    "timeouts: { run_minutes: 30, stall_minutes: 3 }",
    "",
  ].join("\n");
  const h = await startHarness({
    name: "actions",
    files: { ".github/fleet.yml": yml, ".github/workflows/fleet-task.yml": workflow },
  });
  const models = await startAgentModels({ turns: o.turns, delayMs: o.delayMs });
  const shims = await shimFolder(join(scratch, "shims"), {
    bwrapLog: join(scratch, "bwrap.log"),
    standIn: true,
  });
  const readTasks = branchStateReader(join(h.gh.dataDir, h.owner, `${h.name}.git`));
  const loads = [loadavg()[0]!];
  const loadTimer = setInterval(() => loads.push(loadavg()[0]!), 5_000);
  try {
    const pending: WorkflowRun[] = [];
    let wake: (() => void) | undefined;
    h.gh.onWorkflowDispatch((run) => {
      pending.push(run);
      wake?.();
    });
    // From before the labels: the app queues and dispatches as they arrive.
    const restMark = h.gh.requests.mark();
    const gitMark = h.gh.gitRequests.mark();
    const runsBefore = h.gh.workflowRuns(h.full).length;
    await labelBurst({
      gh: h.gh,
      as: h.mona,
      owner: h.owner,
      repo: h.name,
      webhookUrl: h.app.webhookUrl,
      n: o.tasks,
      tasks: async () => Object.keys((await readTasks()) ?? {}).length,
    });
    const t0 = Date.now();
    // Each run's task and when it ran, for overlaps; the runs whose runner was killed.
    const spans: Array<{ task: string; from: number; to: number }> = [];
    const lost: Array<{ runId: number; task: string }> = [];
    const current = new Map<number, WorkflowRun>();
    const killed = new Set<number>();
    let finished = 0;
    let jobsFailed = 0;
    const failedJobTails: string[] = [];
    let allEnded = false;
    const deadline = t0 + o.deadlineMinutes * 60_000;
    const ended = (async () => {
      while (!allEnded) {
        await new Promise((r) => setTimeout(r, 2_000));
        const tasks = Object.values((await readTasks()) ?? {});
        allEnded =
          Date.now() > deadline ||
          tasks.every((t) => ["pr-open", "done", "failed", "cancelled"].includes(t.state));
      }
      wake?.();
    })();
    // Once a tenth of the tasks have ended, `kill` busy runners die with their job's whole process tree.
    const killing = (async () => {
      while (finished < o.tasks / 10 && !allEnded) await new Promise((r) => setTimeout(r, 200));
      for (const [index, run] of [...current.entries()].slice(0, o.kill)) {
        const tree = jobTree(run.id);
        if (tree.length === 0) continue;
        killed.add(index);
        for (const pid of tree.reverse())
          try {
            process.kill(pid, "SIGKILL");
          } catch {
            // already gone
          }
      }
    })();
    const runner = async (index: number) => {
      while (!allEnded) {
        const run = pending.shift();
        if (!run) {
          await new Promise<void>((r) => {
            wake = r;
            setTimeout(r, 1_000);
          });
          continue;
        }
        const task = String(run.inputs.task_id);
        const from = Date.now();
        current.set(index, run);
        await h.gh.setWorkflowRunStatus(h.full, run.id, "in_progress");
        const result = await runActionJob({
          gh: h.gh,
          fullName: h.full,
          run,
          scratch,
          inputs: {
            "task-id": task,
            "api-url": h.gh.url,
            "fleet-url": String(run.inputs.fleet_url ?? ""),
            "fleet-audience": "fleet",
            "work-dir": join(scratch, `work-${index}`),
            credentials: "ANTHROPIC_API_KEY=sk-ant-bench-credential-0000000000\n",
            "model-base-url": models.url,
          },
          extraEnv: {
            PATH: `${shims}:${join(import.meta.dirname, "../node_modules/.bin")}:${process.env.PATH}`,
          },
        });
        current.delete(index);
        spans.push({ task, from, to: Date.now() });
        if (process.env.FLEET_BENCH_JOB_LOGS)
          writeFileSync(
            join(process.env.FLEET_BENCH_JOB_LOGS, `${task}-run-${run.id}.log`),
            `${result.stdout}\n--- stderr\n${result.stderr}`,
          );
        if (killed.has(index)) {
          lost.push({ runId: run.id, task });
          // GitHub ends a lost runner's job as failed; the runner itself is gone.
          await h.gh.setWorkflowRunStatus(h.full, run.id, "completed", "failure");
          return;
        }
        finished++;
        if (result.code !== 0) {
          jobsFailed++;
          if (failedJobTails.length < 5)
            failedJobTails.push(
              // Workflow commands (::add-mask:: of the job's tokens, ::debug::) are the runner's, not the reason.
              `${task}: ${`${result.stdout}\n${result.stderr}`
                .split("\n")
                .filter((l) => l.trim() && !/^::(add-mask|debug)::/.test(l))
                .slice(-3)
                .join(" | ")}`,
            );
        }
        await h.gh.setWorkflowRunStatus(
          h.full,
          run.id,
          "completed",
          result.code === 0 ? "success" : "failure",
        );
      }
    };
    await Promise.all(Array.from({ length: o.runners }, (_, i) => runner(i)));
    await ended;
    await killing;
    const wallMs = Date.now() - t0;
    await h.settle();

    const tasks = Object.values((await readTasks()) ?? {});
    const dispatched = h.gh
      .workflowRuns(h.full)
      .slice(runsBefore)
      .filter((r) => r.event === "workflow_dispatch").length;
    const fleet = h.gh.requests.entries.filter((e) => e.seq > restMark);
    const byActor: Record<string, number> = {};
    for (const e of fleet) byActor[e.actor] = (byActor[e.actor] ?? 0) + 1;
    // Fleet's requests: the app's and the jobs' (with the app's token), token mints counted apart as in
    // bench/lifecycle.ts (a token serves an hour of requests; each job mints one in its OIDC exchange).
    const isMint = (e: { route: string }) =>
      e.route === "POST /app/installations/{installation_id}/access_tokens";
    const ours = fleet.filter(
      (e) => e.actor === h.gh.botLogin || e.actor === "app" || e.actor.includes("actions"),
    );
    const fleetRest = ours.filter((e) => !isMint(e)).length;
    // Counted first, divided once: rounding each step would add 0.02 per request, not 1/tasks.
    const routeCounts: Record<string, number> = {};
    for (const e of ours.filter((e) => !isMint(e))) routeCounts[e.route] = (routeCounts[e.route] ?? 0) + 1;
    const byRoute = Object.fromEntries(
      Object.entries(routeCounts).map(([route, n]) => [route, round(n / o.tasks, 2)]),
    );
    if (process.env.FLEET_BENCH_DUMP)
      writeFileSync(
        process.env.FLEET_BENCH_DUMP,
        ours.map((e) => `${e.seq} ${e.at} ${e.actor} ${e.method} ${e.path} ${e.status}`).join("\n"),
      );
    const overlapping = new Set<string>();
    for (const a of spans)
      for (const b of spans)
        if (a !== b && a.task === b.task && a.from < b.to && b.from < a.to) overlapping.add(a.task);
    const pullsPerIssue = new Map<string, number>();
    for (const p of h.gh.pulls(h.full)) pullsPerIssue.set(p.head, (pullsPerIssue.get(p.head) ?? 0) + 1);
    const ends: Record<string, number> = {};
    for (const t of tasks) {
      const k = t.state === "failed" ? `failed: ${t.reason?.slice(0, 120)}` : t.state;
      ends[k] = (ends[k] ?? 0) + 1;
    }
    const lostTasks = new Set(lost.map((l) => l.task));
    return {
      ...o,
      completed: tasks.filter((t) => t.state === "pr-open" || t.state === "done").length,
      ends,
      dispatches: dispatched,
      dispatchesPerTask: round(dispatched / o.tasks, 3),
      runsLost: lost.length,
      lostTasksRecovered: tasks.filter(
        (t) => lostTasks.has(t.id) && (t.state === "pr-open" || t.state === "done"),
      ).length,
      ranTwiceAtOnce: overlapping.size,
      duplicatePulls: [...pullsPerIssue.values()].filter((n) => n > 1).length,
      restPerTask: round(fleetRest / o.tasks, 2),
      restByActor: byActor,
      tokenMintsPerTask: round(ours.filter(isMint).length / o.tasks, 2),
      restPerTaskByRoute: byRoute,
      gitPerTask: round(h.gh.gitRequests.counts({ since: gitMark }).total / o.tasks, 2),
      jobsFailed,
      failedJobTails,
      unfinished: tasks
        .filter((t) => !["pr-open", "done", "failed", "cancelled"].includes(t.state))
        .map((t) => ({
          id: t.id,
          state: t.state,
          attempts: t.attempts,
          ...(t.runId ? { runId: t.runId } : {}),
        })),
      wallMs,
      load: {
        before: round(loads[0]!, 2),
        max: round(Math.max(...loads), 2),
        after: round(loadavg()[0]!, 2),
      },
    };
  } finally {
    clearInterval(loadTimer);
    await models.stop();
    await h.stop();
    await rm(scratch, { recursive: true, force: true }).catch(() => {});
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const r = await runScaleActions({
    tasks: Number(flag("tasks", "200")),
    runners: Number(flag("runners", "20")),
    kill: Number(flag("kill", "2")),
    turns: Number(flag("turns", "2")),
    delayMs: Number(flag("delay-ms", "200")),
    deadlineMinutes: Number(flag("deadline-minutes", "30")),
  });
  console.log(JSON.stringify(r, null, 2));
  await saveFigures(r);
  process.exit(0);
}
