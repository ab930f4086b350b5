// `npm run bench`: every benchmark in one run (< 10 min on 2 cores), one JSON object in
// bench/results/latest.json, a table on stdout and bench/results/README-table.md for the README.
// The existing scripts (scheduler, beads, cas) run as child processes and are read from their JSON.
// cas runs twice: `--server=memory` (4 writers x 200 on the in-memory transport, in one process) and
// `--transport=git` (4 x 200 over git smart HTTP on the emulator, the app's default). The REST transport on
// the emulator takes ~9 minutes; its last figures are in bench/results/cas.json and are reported beside.
import { execFile } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { runBurst } from "./burst.ts";
import { runGatewayBench } from "./gateway.ts";
import { printLifecycle, runLifecycle } from "./lifecycle.ts";
import { runMemory } from "./memory.ts";
import { runPromptBench } from "./prompt.ts";
import { runWorkerBench } from "./worker.ts";
import { runWorkplaceBench } from "./workplace.ts";

const run = promisify(execFile);
const here = import.meta.dirname;
const tsx = join(here, "../node_modules/.bin/tsx");
const results = join(here, "results");
const issues = Number(process.argv.find((a) => a.startsWith("--issues="))?.split("=")[1] ?? 500);
const json = async (f: string) => JSON.parse(await readFile(join(results, f), "utf8"));
const timed = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
  const t0 = performance.now();
  process.stderr.write(`bench: ${name}...\n`);
  const r = await fn();
  process.stderr.write(`bench: ${name} done in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
  return r;
};

const started = Date.now();
await timed("scheduler", () => run(tsx, [join(here, "scheduler.ts")]));
const sched = await json("scheduler.json");
await timed("beads", () => run(tsx, [join(here, "beads.ts")]));
const beads = await json("beads.json");
await timed("cas (in-memory transport)", () =>
  run(tsx, [join(here, "cas.ts"), "--server=memory"], { maxBuffer: 64 << 20 }),
);
const casMemory = (await json("cas-memory.json")).github;
await timed("cas (git transport, emulator)", () =>
  run(tsx, [join(here, "cas.ts"), "--transport=git", "--transitions=200"], { maxBuffer: 64 << 20 }),
);
const casGit = (await json("cas-git.json")).github;
const casEmu = (await json("cas.json")).github;
const memory = await timed("memory", () => runMemory());
const worker = await timed("worker", () => runWorkerBench());
const lifecycle = await timed("lifecycle", () => runLifecycle());
// Where each request of a task goes (also in latest.json: lifecycle.byRoute, lifecycle.gitOperations).
printLifecycle(lifecycle, (line) => process.stderr.write(`  ${line}\n`));
const burst = await timed("burst", () => runBurst({ issues, seconds: 10, cap: 10 }));
const gateway = await timed("gateway", () => runGatewayBench());
const workplace = await timed("workplace", () => runWorkplaceBench());
const prompt = await timed("prompt", () => runPromptBench());

const casRow = (g: Record<string, number | string>) => ({
  server: g.server,
  writers: g.writers,
  transitionsPerWriter: g.transitionsPerWriter,
  lostUpdates: g.lostUpdates,
  overGranted: g.slotsOverGranted,
  retries: g.casRetries,
  requestsPerTransition: g.requestsPerTransition,
});
const beadsRow = (n: number) => beads.rows.find((r: { records: number }) => r.records === n);
const latest = {
  date: new Date().toISOString(),
  node: process.version,
  cores: cpus().length,
  loadAverage1m: +loadavg()[0]!.toFixed(2),
  command: `npm run bench${issues !== 500 ? ` -- --issues=${issues}` : ""}`,
  scheduler: sched.results.map((r: Record<string, number>) => ({
    tasks: r.tasks,
    edges: r.edges,
    msPerDecision: +(r.us_per_decision! / 1000).toFixed(4),
    msPerPass: r.ms_per_call_median,
    decisions: r.decisions,
  })),
  beads: {
    parsePlusRewrite10kMs: beadsRow(10_000)?.parsePlusRewriteMs,
    ready10kMs: beadsRow(10_000)?.readyMs,
  },
  burst,
  lifecycle,
  cas: {
    ...casRow(casMemory),
    emulatorLastRun: casRow(casEmu),
    git: { ...casRow(casGit), gitRequestsPerTransition: casGit.gitRequestsPerTransition },
  },
  worker,
  memory,
  gateway,
  workplace,
  prompt,
  elapsedSeconds: Math.round((Date.now() - started) / 1000),
};
await writeFile(join(results, "latest.json"), `${JSON.stringify(latest, null, 2)}\n`);

const s10k = latest.scheduler.find((r: { tasks: number }) => r.tasks === 10_000);
const ok = (b: boolean) => (b ? "met" : "**missed**");
const rows: Array<[string, string, string, string]> = [
  [
    "scheduler, 10k tasks (~20k edges)",
    `${s10k.msPerPass} ms/pass, ${s10k.msPerDecision} ms/decision`,
    "< 20 ms/decision",
    ok(s10k.msPerDecision < 20),
  ],
  [
    "beads parse + rewrite, 10k records",
    `${latest.beads.parsePlusRewrite10kMs} ms`,
    "< 200 ms",
    ok(latest.beads.parsePlusRewrite10kMs < 200),
  ],
  [
    `burst: ${burst.issues} labels in ${burst.overSeconds} s, max_concurrent ${burst.cap}`,
    `maxRunning ${burst.maxRunning}, ${burst.tasks} tasks, ${burst.duplicateTasks} duplicates`,
    "maxRunning == cap, one task per issue",
    ok(
      burst.maxRunning === burst.cap &&
        burst.overCapCommits === 0 &&
        burst.tasks === burst.issues &&
        burst.duplicateTasks === 0,
    ),
  ],
  [
    "burst handler latency (a delivery answered)",
    `p50 ${burst.handlerP50Ms} ms, p99 ${burst.handlerP99Ms} ms`,
    "p99 < 200 ms",
    ok(burst.handlerP99Ms < 200),
  ],
  [
    "burst: label → its tracking comment (task committed, shown on the issue)",
    `p50 ${burst.labelToTrackingP50Ms} ms, p99 ${burst.labelToTrackingP99Ms} ms (${burst.stateCommits} state commits)`,
    "p99 < 1 s",
    ok(burst.labelToTrackingP99Ms < 1000),
  ],
  [
    "burst REST / content-creating per task (enqueue only)",
    `${burst.restPerTask} / ${burst.contentCreatingPerTask} (and ${burst.gitPerTask} git requests)`,
    "≤ 12 / ≤ 3",
    ok(burst.restPerTask <= 12 && burst.contentCreatingPerTask <= 3),
  ],
  [
    "one task label → merged (real Claude CLI), app and worker running",
    `${lifecycle.restCalls} REST (${lifecycle.reads} reads), ${lifecycle.contentCreating} content-creating, ${lifecycle.stateWrites} state commits (${lifecycle.workflowRunsFromState} workflow runs), ${lifecycle.gitRequestsPerTask} git requests (+ ${lifecycle.gitIdlePollRequests} of the idle worker's polls)`,
    "≤ 10 REST, ≤ 2 content-creating, ≤ 4 commits starting no workflow, ≤ 12 git",
    ok(
      lifecycle.restCalls <= 10 &&
        lifecycle.contentCreating <= 2 &&
        lifecycle.stateWrites <= 4 &&
        lifecycle.workflowRunsFromState === 0 &&
        lifecycle.gitRequestsPerTask <= 12,
    ),
  ],
  [
    "the same, first task after the app and worker start",
    `${lifecycle.firstTask.restCalls} REST + ${lifecycle.firstTask.tokenMints} token mint${lifecycle.firstTask.tokenMints === 1 ? "" : "s"}, ${lifecycle.firstTask.contentCreating} content-creating, ${lifecycle.firstTask.stateWrites} state commits, ${lifecycle.firstTask.gitRequestsPerTask} git requests (+ ${lifecycle.firstTask.gitIdlePollRequests} of polls)`,
    "none: once per process (config read, token, first fetch)",
    "",
  ],
  [
    `cas ${latest.cas.writers}×${latest.cas.transitionsPerWriter} (${latest.cas.server})`,
    `${latest.cas.lostUpdates} lost, ${latest.cas.overGranted} over-granted, ${latest.cas.requestsPerTransition} req/transition`,
    "0 / 0 / ≤ 3",
    ok(
      latest.cas.lostUpdates === 0 &&
        latest.cas.overGranted === 0 &&
        Number(latest.cas.requestsPerTransition) <= 3,
    ),
  ],
  [
    `cas ${casEmu.writers}×${casEmu.transitionsPerWriter} (emulator, REST transport, last run ${(await json("cas.json")).date.slice(0, 10)})`,
    `${casEmu.lostUpdates} lost, ${casEmu.slotsOverGranted} over-granted, ${casEmu.requestsPerTransition} req/transition`,
    "0 / 0 / ≤ 3",
    ok(casEmu.lostUpdates === 0 && casEmu.slotsOverGranted === 0 && casEmu.requestsPerTransition <= 3),
  ],
  [
    `cas ${casGit.writers}×${casGit.transitionsPerWriter} (emulator, git transport: the default)`,
    `${casGit.lostUpdates} lost, ${casGit.slotsOverGranted} over-granted, ${casGit.requestsPerTransition} REST req/transition (${casGit.gitRequestsPerTransition} git)`,
    "0 / 0 / ≤ 3",
    ok(casGit.lostUpdates === 0 && casGit.slotsOverGranted === 0 && casGit.requestsPerTransition <= 3),
  ],
  [
    `dispatch → spawn, ${worker.repoFiles}-file repo`,
    `${worker.dispatchToSpawnMs} ms warm, ${worker.dispatchToSpawnColdMs} ms first task`,
    "< 500 ms",
    ok(worker.dispatchToSpawnMs < 500),
  ],
  [
    "agent output parsing",
    `${worker.parseMBps} MB/s`,
    "none set: an agent writes a few KB/s, so this is headroom, not a limit",
    "",
  ],
  [
    `${worker.concurrentAgents} scripted agents at once, 2 cores`,
    `${worker.concurrentWallMs} ms, all completed: ${worker.concurrentAllCompleted}`,
    "all complete (no time target)",
    ok(worker.concurrentAllCompleted === true),
  ],
  [
    `app RSS, ${memory.tasks} queued tasks (state read over git, scheduling pass; built, plain node, with the node flags npm start runs it with)`,
    `${memory.rssMB} MB (baseline ${memory.baselineRssMB} MB with no task)`,
    "< 150 MB",
    ok(memory.rssMB < 150),
  ],
  [
    "model gateway: added latency per model request (metered, policed)",
    `p50 ${gateway.addedP50Ms} ms, p99 ${gateway.addedP99Ms} ms`,
    "< 5 ms p50",
    ok(gateway.addedP50Ms < 5),
  ],
  [
    "model gateway: a streamed answer through it (usage read on the way)",
    `${gateway.gatewayMBps} MB/s (direct ${gateway.directMBps} MB/s)`,
    "≥ 10 MB/s",
    ok(gateway.gatewayMBps >= 10),
  ],
  [
    "egress proxy: added latency per request to an allowed host (sandbox forwarder + proxy)",
    `p50 ${workplace.proxy.addedP50Ms} ms, p99 ${workplace.proxy.addedP99Ms} ms`,
    "< 5 ms p50",
    ok(workplace.proxy.addedP50Ms < 5),
  ],
  [
    `setup cache hit: ${workplace.setupCache.files.toLocaleString("en-US")} files (${workplace.setupCache.megabytes} MB) back in a worktree`,
    `${workplace.setupCache.hitMs} ms (saving it: ${workplace.setupCache.saveMs} ms)`,
    "< 5 s",
    ok(workplace.setupCache.hitMs < 5000),
  ],
  [
    "what every model request carries: Claude's first request of a small task (bench/prompt.ts)",
    `${(prompt.claude!.firstRequestBytes / 1024).toFixed(1)} KB (system ${(prompt.claude!.systemBytes / 1024).toFixed(1)} KB, ${prompt.claude!.tools} tools ${(prompt.claude!.toolsBytes / 1024).toFixed(1)} KB); the task ${prompt.claude!.taskInputTokens.toLocaleString("en-US")} input tokens`,
    "< 70 KB",
    ok(prompt.claude!.firstRequestBytes < 70 * 1024),
  ],
];
const table = [
  "| benchmark | figure | target | |",
  "|---|---|---|---|",
  ...rows.map((r) => `| ${r.join(" | ")} |`),
  "",
  `Reproduce: \`${latest.command}\` (${latest.date.slice(0, 10)}, Node ${latest.node}, ${latest.cores} cores, load ${latest.loadAverage1m}; ${latest.elapsedSeconds} s). Full figures: \`bench/results/latest.json\`.`,
  "",
].join("\n");
await writeFile(join(results, "README-table.md"), table);
console.log(table);
