// `npm run bench:scale` (tsx bench/scale.ts): Fleet at the scale it is for. Four benchmarks, each a child
// process of its own (bench/scale-agents.ts, scale-workers.ts, scale-actions.ts, scale-app.ts), their
// figures in bench/results/scale.json, merged into bench/results/latest.json under `scale`, and the
// README rows (each figure beside its target, met or not, with the load the machine had) in
// bench/results/scale-table.md.
// --only=agents,claude,workers,actions,app runs some of them (the others keep their last figures);
// --claude-agents=N sets how many real Claude CLIs run at once (default: as many as fit, see below).
import { execFile } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { cpus, freemem, loadavg } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);
const here = import.meta.dirname;
const tsx = join(here, "../node_modules/.bin/tsx");
const results = join(here, "results");
const flag = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1];
const only = flag("only")?.split(",");
const wanted = (key: string) => !only || only.includes(key);

/** Real Claude CLIs that fit at once: ~400 MB of memory each (RSS seen here), a quarter of free memory at most. */
const claudeFit = Number(
  flag("claude-agents") ?? Math.max(1, Math.min(50, Math.floor(freemem() / 2 ** 20 / 4 / 400))),
);

// Each benchmark: its script and arguments. Agents' turns and pauses are short; the counts are the issue's.
const BENCHES: Record<string, { script: string; args: string[]; group: string }> = {
  // The same with every git command of the worker traced: where the time to start a task goes.
  "agents-local-traced": {
    group: "agents",
    script: "scale-agents.ts",
    args: ["--mode=local", "--concurrency=20", "--tasks=24", "--turns=3", "--delay-ms=2000", "--trace-git"],
  },
  "agents-local": {
    group: "agents",
    script: "scale-agents.ts",
    args: [
      "--mode=local",
      "--agent=stand-in",
      "--concurrency=50",
      "--tasks=60",
      "--turns=3",
      "--delay-ms=2000",
    ],
  },
  "workers-1": {
    group: "workers",
    script: "scale-workers.ts",
    args: ["--workers=1", "--tasks=100", "--cap=40"],
  },
  "workers-5": {
    group: "workers",
    script: "scale-workers.ts",
    args: ["--workers=5", "--tasks=100", "--cap=40"],
  },
  actions: {
    group: "actions",
    script: "scale-actions.ts",
    // The issue's 200 tasks (they took over 40 minutes on an earlier, slower machine, where 60 were run).
    args: ["--tasks=200", "--runners=20", "--kill=2", "--deadline-minutes=20"],
  },
  "agents-github": {
    group: "agents",
    script: "scale-agents.ts",
    args: [
      "--mode=github",
      "--agent=stand-in",
      "--concurrency=50",
      "--tasks=60",
      "--turns=3",
      "--delay-ms=2000",
    ],
  },
  "agents-claude": {
    group: "claude",
    script: "scale-agents.ts",
    args: [
      "--mode=local",
      "--agent=claude",
      `--concurrency=${claudeFit}`,
      `--tasks=${claudeFit + Math.max(2, Math.round(claudeFit / 5))}`,
      "--turns=3",
      "--delay-ms=2000",
    ],
  },
  "workers-20": {
    group: "workers",
    script: "scale-workers.ts",
    args: ["--workers=20", "--tasks=100", "--cap=40"],
  },
  // As on 20 machines of 2 agents each: the cap shared out, so claims and hand-offs spread the work.
  "workers-20-shared": {
    group: "workers",
    script: "scale-workers.ts",
    args: ["--workers=20", "--concurrency=2", "--tasks=100", "--cap=40"],
  },
  app: { group: "app", script: "scale-app.ts", args: ["--owners=10", "--per-owner=10", "--tasks=20"] },
};

const previous = await readFile(join(results, "scale.json"), "utf8")
  .then((t) => JSON.parse(t) as Record<string, unknown>)
  .catch(() => ({}) as Record<string, unknown>);
const scale: Record<string, unknown> = { ...previous };
for (const [key, b] of Object.entries(BENCHES)) {
  if (!wanted(b.group) && !wanted(key)) continue;
  const out = join(results, "tmp", `scale-${key}.json`);
  const t0 = Date.now();
  const load = loadavg()[0]!;
  process.stderr.write(`bench:scale: ${key} (${b.script} ${b.args.join(" ")}), load ${load.toFixed(2)}...\n`);
  try {
    await run(tsx, [join(here, b.script), ...b.args, `--out=${out}`], { maxBuffer: 64 << 20 });
    const figures = JSON.parse(await readFile(out, "utf8"));
    scale[key] = {
      ...figures,
      command: `npx tsx bench/${b.script} ${b.args.join(" ")}`,
      runtimeSeconds: Math.round((Date.now() - t0) / 1000),
      date: new Date().toISOString(),
    };
  } catch (error) {
    process.stderr.write(`bench:scale: ${key} failed: ${(error as Error).message.slice(0, 2000)}\n`);
    scale[key] = { error: (error as Error).message.slice(0, 500), date: new Date().toISOString() };
  }
  process.stderr.write(`bench:scale: ${key} done in ${Math.round((Date.now() - t0) / 1000)} s\n`);
  await writeFile(join(results, "scale.json"), `${JSON.stringify(scale, null, 2)}\n`);
}

// latest.json keeps the rest of `npm run bench`'s figures; `scale` is replaced.
const latestPath = join(results, "latest.json");
const latest = await readFile(latestPath, "utf8")
  .then((t) => JSON.parse(t) as Record<string, unknown>)
  .catch(() => ({}) as Record<string, unknown>);
latest.scale = { cores: cpus().length, node: process.version, ...scale };
await writeFile(latestPath, `${JSON.stringify(latest, null, 2)}\n`);
const table = scaleTable(scale);
await writeFile(join(results, "scale-table.md"), table);
console.log(table);

// biome-ignore lint/suspicious/noExplicitAny: figures of several benchmarks, read as JSON
type Json = any;

/** The README rows: figure, target, met or not, and the load (1-minute average) during the run. */
function scaleTable(s: Record<string, Json>): string {
  const ok = (b: boolean) => (b ? "met" : "**missed**");
  const load = (r: Json) => (r?.load ? `${r.load.before}–${r.load.max}` : "?");
  const rows: string[][] = [];
  for (const key of ["agents-local", "agents-github", "agents-claude"]) {
    const r = s[key];
    if (!r || r.error) continue;
    const who = `${r.concurrency} ${r.agent === "claude" ? "real Claude CLIs" : "stand-in agents"} at once, ${r.mode} ${r.mode === "local" ? "queue" : "mode (emulator)"}, ${r.tasks} tasks of ${r.turns} turns × ${r.delayMs / 1000} s`;
    rows.push(
      [
        `${who}: worker RSS`,
        `${r.worker.rssAtPeakMB} MB with ${r.maxAgentsAtOnce} running (max ${r.worker.rssMaxMB} MB${r.worker.rssMaxAt ? `, ${Math.round(r.worker.rssMaxAt.sinceStartMs / 1000)} s in, ${r.worker.rssMaxAt.agents} agents running` : ""}; idle ${r.worker.rssIdleMB} MB; node flags: ${r.workerNodeFlags?.join(" ") || "none"})${r.commandHelper ? `; + ${r.commandHelper.privateMaxMB} MB for its command helper (its own pages; RSS ${r.commandHelper.rssMaxMB} MB)` : ""}; + ${r.forwarder.privateEachMB} MB per agent for Fleet's forwarder (${r.forwarder.kind ?? "node"}'s) in its sandbox (its own memory; RSS ${r.forwarder.rssEachMB} MB)`,
        "< 150 MB with 50 running",
        ok(r.worker.rssMaxMB < 150 && r.maxAgentsAtOnce >= 50),
        load(r),
      ],
      [
        `${who}: Fleet's CPU per running agent`,
        `${r.cpu.fleetPctOfCorePerAgent}% of a core (${r.cpu.fleetMsPerTask} ms CPU per task; forwarder ${r.forwarder.cpuEachMs} ms each)`,
        "< 5%",
        ok(r.cpu.fleetPctOfCorePerAgent < 5),
        load(r),
      ],
      [
        `${who}: sandbox start (bwrap → agent process)`,
        `p50 ${r.sandboxStartMs.p50} ms, p99 ${r.sandboxStartMs.p99} ms (forwarder's start: ${r.sandboxParts.forwarderToAgentP50Ms} ms p50)`,
        "p99 < 300 ms",
        ok(r.sandboxStartMs.p99 < 300),
        load(r),
      ],
      [
        `${who}: slot freed → next agent started`,
        `p50 ${r.slotToNextAgentMs.p50} ms, p99 ${r.slotToNextAgentMs.p99} ms (${r.slotToNextAgentMs.n} slots; ${r.maxAgentsAtOnce} of ${r.concurrency} ever ran at once)`,
        "p99 < 1 s",
        ok(r.slotToNextAgentMs.p99 < 1000),
        load(r),
      ],
    );
  }
  const t = s["agents-local-traced"];
  if (t && !t.error && t.gitPerTask)
    rows.push([
      `${t.concurrency} stand-in agents, local queue, every git command traced: starting a task`,
      `${t.gitPerTask.all} git processes per task, ${t.gitPerTask.cacheClone} on the repository's cache clone (one at a time: ${t.gitPerTask.cacheCloneMsPerTask} ms per task, the lock busy ${t.gitPerTask.cacheCloneBusyPctWhileStarting}% while tasks waited to start); claimed → sandbox p50 ${t.phasesP50Ms.claimedToSandbox} ms; ${t.maxAgentsAtOnce} of ${t.concurrency} ran at once`,
      "(what the slot-to-agent figure is made of)",
      "",
      load(t),
    ]);
  const workers = ["workers-1", "workers-5", "workers-20", "workers-20-shared"]
    .map((k) => s[k])
    .filter((r) => r && !r.error);
  for (const r of workers)
    rows.push(
      [
        `${r.workers} fleet run worker${r.workers === 1 ? "" : "s"}${r.concurrency ? ` of ${r.concurrency} agents each` : ""}, one repository (max_concurrent ${r.cap}), ${r.tasks} tasks: correctness`,
        `${r.ranTwice} run twice, ${r.overCapCommits} commits over the cap (max ${r.maxRunning} held), ${r.completed}/${r.tasks} ended with a PR`,
        "0 / 0 / every task ends",
        ok(r.ranTwice === 0 && r.overCapCommits === 0 && r.completed === r.tasks),
        load(r),
      ],
      [
        `${r.workers} worker${r.workers === 1 ? "" : "s"}${r.concurrency ? ` of ${r.concurrency}` : ""}: git requests and state commits per task`,
        `${r.git.perTask} git (workers ${r.git.workersPerTask}, app ${r.git.appPerTask}), ${r.stateCommitsPerTask} commits; reads apart: ${r.git.reads.requestsPerTask} per task (${r.git.reads.perWorkerMinute} reads per worker-minute, ${r.git.reads.unmoved} of ${r.git.reads.count} found the branch unmoved)`,
        "≤ 12 git, ≤ 4 commits",
        ok(r.git.perTask <= 12 && r.stateCommitsPerTask <= 4),
        load(r),
      ],
      [
        `${r.workers} worker${r.workers === 1 ? "" : "s"}${r.concurrency ? ` of ${r.concurrency}` : ""}: claim latency, refused pushes`,
        `claim p50 ${r.claimLatencyMs.p50} ms, p99 ${r.claimLatencyMs.p99} ms${r.claimLatencyMs.handedOff === undefined ? "" : ` (${r.claimLatencyMs.handedOff} of ${r.claimLatencyMs.n} claims made in the commit that dispatched the task)`}; ${Math.round(r.pushes.refusedRate * 100)}% of pushes refused (claims ${Math.round(r.pushes.claimRefusedRate * 100)}%); ${r.tasksPerWorker.workersThatRanAny} workers ran tasks (${r.tasksPerWorker.min}–${r.tasksPerWorker.max} each); ${r.tasksPerMinute} tasks a minute`,
        "(none set: the growth is the figure)",
        "",
        load(r),
      ],
    );
  const a = s.actions;
  if (a && !a.error)
    rows.push([
      `Actions: ${a.tasks} tasks on ${a.runners} emulated runners, ${a.kill} killed mid-run`,
      `${a.dispatchesPerTask} dispatches per task; ${a.runsLost} runs lost, ${a.lostTasksRecovered} recovered, ${a.ranTwiceAtOnce} ran twice at once, ${a.completed}/${a.tasks} PRs (${a.unfinished?.length ?? 0} not ended in ${a.deadlineMinutes} min); ${a.restPerTask} REST per task, label to PR (+ ${a.tokenMintsPerTask} token mints; ${a.gitPerTask} git)`,
      "1 dispatch, lost tasks retried, none twice, ≤ 12 REST",
      ok(
        (a.unfinished?.length ?? 0) === 0 &&
          a.dispatchesPerTask <= 1 + (a.runsLost + 0.5) / a.tasks &&
          a.lostTasksRecovered === a.runsLost &&
          a.ranTwiceAtOnce === 0 &&
          a.restPerTask <= 12,
      ),
      load(a),
    ]);
  const p = s.app;
  if (p && !p.error)
    rows.push(
      [
        `app: ${p.repositories} repositories, ${p.tasks} tasks queued in each: RSS`,
        `${p.rssMB.max} MB at its height (the process's peak, in the burst), ${p.rssMB.afterSweeps} MB after the sweeps (${p.rssMB.started} MB at start; node flags: ${p.nodeFlags?.join(" ") || "none"}; V8's heap after the sweeps ${p.heapUsedMB} MB used of ${p.heapTotalMB} MB reserved${p.residentMB ? `; resident then: ${p.residentMB.anonymous} MB anonymous, ${p.residentMB.brkHeap} MB malloc's main arena, ${p.residentMB.files} MB files` : ""})${p.peakInFlightPerInstallation !== undefined ? `; at most ${p.peakInFlightPerInstallation} REST requests in flight per installation (GitHub allows 100)` : ""}`,
        "< 200 MB",
        ok(p.rssMB.max < 200),
        load(p),
      ],
      [
        "app: reconcile sweep, nothing changed",
        `${p.sweep.unchanged.restPerRepo} REST per repository (${p.sweep.unchanged.gitPerRepo} git), ${p.sweep.unchanged.ms} ms for all; the first sweep after a start ${p.sweep.first.restPerRepo} REST per repository`,
        "≤ 2 REST per repository",
        ok(p.sweep.unchanged.restPerRepo <= 2),
        load(p),
      ],
      [
        `app: a label in each of the ${p.repositories} repositories at once → its tracking comment`,
        `p50 ${p.labelWaitQuietMs.p50} ms, p99 ${p.labelWaitQuietMs.p99} ms; during a sweep p50 ${p.labelWaitMs.p50} ms, p99 ${p.labelWaitMs.p99} ms (each label's state push, answered by the emulator: p50 ${p.labelWaitMs.statePushP50Ms} ms; the emulator's event loop late by ${p.labelWaitMs.emulatorLoopLagMs?.mean} ms on average, ${p.labelWaitMs.emulatorLoopLagMs?.max} ms at most, its process ${p.labelWaitMs.emulatorRssMB} MB)`,
        "p99 < 1 s",
        ok(p.labelWaitMs.p99 < 1000),
        load(p),
      ],
    );
  return [
    "| scale benchmark | figure | target | | load (1 min, start–max) |",
    "|---|---|---|---|---|",
    ...rows.map((r) => `| ${r.join(" | ")} |`),
    "",
    `Reproduce: \`npm run bench:scale\` (${cpus().length} cores, Node ${process.version}). Full figures: \`bench/results/latest.json\` under \`scale\`.`,
    "",
  ].join("\n");
}
