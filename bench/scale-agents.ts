// Many agents at once on one worker: a real `fleet run --concurrency N` process (local queue, or GitHub
// mode against the offline GitHub with the real app queueing the labels) runs `tasks` tasks (more than
// N, so slots free up and are taken again), each agent in its bubblewrap sandbox through the worker's
// model gateway, against a scripted model of its own (`turns` turns, `delayMs` each).
// Fleet's own cost, apart from the agents': the worker process's RSS while N agents run; Fleet's CPU
// (the worker's process tree, git included, plus the forwarder Fleet starts inside every sandbox) per
// running agent, from cpuacct cgroups, which count processes that have ended; sandbox start (bwrap
// launched -> the agent's process started, from /proc); and slot freed (seen in the state) -> the next
// agent started.
// The agent is the real Claude CLI (`--agent=claude`) or, where N real CLIs do not fit on the machine,
// a stand-in (bench/lib/stand-in-claude.mjs) that speaks Claude's stream-json and the Messages API.
// Run alone: npx tsx bench/scale-agents.ts [--mode=local|github] [--agent=stand-in|claude]
//   [--concurrency=50] [--tasks=60] [--turns=3] [--delay-ms=2000]
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { baseBranchAt } from "../src/cli/local-merge.ts";
import { localRepositoryAt } from "../src/cli/local-repository.ts";
import { localRepoName } from "../src/cli/target.ts";
import { createLocalIssue } from "../src/queue/local-issues.ts";
import { createLocalStateStore } from "../src/state/local-store.ts";
import { startHarness } from "../test/support/harness.ts";
import { startAgentModels } from "./lib/agent-models.ts";
import {
  countingProxy,
  cpuGroup,
  exited,
  FLEET_BIN,
  readBwrapLog,
  readGitLog,
  shimFolder,
  startFleet,
  workerEnv,
} from "./lib/fleet-processes.ts";
import { installationToken } from "./lib/install-token.ts";
import { type Proc, startProcSampler } from "./lib/proc-tree.ts";
import { round } from "./lib/route-timer.ts";
import { saveFigures } from "./lib/save-figures.ts";
import { percentile } from "./lib/state-history.ts";
import { branchStateReader, localStateReader, watchState } from "./lib/state-watch.ts";

const git = promisify(execFile);

export interface ScaleAgentsOptions {
  mode: "local" | "github";
  agent: "stand-in" | "claude";
  concurrency: number;
  tasks: number;
  turns: number;
  delayMs: number;
  /** Log every git command of the worker (a shim on PATH): where each task's git processes go. */
  traceGit?: boolean;
}

export interface ScaleAgentsResult extends ScaleAgentsOptions {
  /** Tasks that reached pr-open (a pull request, local or on the emulator), of `tasks`. */
  completed: number;
  failed: number;
  /** Tasks whose agent was started more than once (the model saw a second first request). */
  ranTwice: number;
  /** Agent processes this worker started (one per task when nothing ran twice). */
  agentRuns: number;
  /** The most sandboxes of this worker alive at once (from /proc). */
  maxAgentsAtOnce: number;
  worker: {
    /** The `fleet run` process alone (node, with tsx's loader as bin/fleet.js runs it). */
    rssMaxMB: number;
    rssMaxAt?: { sinceStartMs: number; agents: number };
    /** Its RSS while the most agents ran. */
    rssAtPeakMB: number;
    /** Its RSS before its first agent started. */
    rssIdleMB: number;
  };
  /**
   * The worker's command helper (src/process/command-runner.ts: node that starts its git processes):
   * its RSS and own pages at most, and its CPU. Absent with FLEET_COMMANDS=direct.
   */
  commandHelper?: { rssMaxMB: number; privateMaxMB: number; cpuMs: number };
  /** Fleet's forwarder inside every sandbox (perl's, or node's where the machine has no perl): one per running agent. */
  /** rssEachMB counts the program's binary and libraries, shared with every other forwarder, in each. */
  forwarder: {
    kind: "perl" | "node";
    rssEachMB: number;
    privateEachMB: number;
    pssEachMB: number;
    cpuEachMs: number;
  };
  cpu: {
    /** The worker's tree without its sandboxes (cpuacct): node, git, the cgroup shell. */
    workerTreeMs: number;
    /** Of which the worker's own node process (from /proc). */
    workerProcessMs: number;
    /** What the worker tree spent before its first agent started (start-up, first claims). */
    workerStartupMs: number;
    forwardersMs: number;
    /** The agents' own CPU: the sandboxes (cpuacct) less Fleet's forwarders. */
    agentsMs: number;
    /** Sum over agents of the time each ran (ms). */
    agentRunMs: number;
    /** (worker tree + forwarders) / agent run time, the whole run: Fleet's share of a core per running agent. */
    fleetPctOfCorePerAgent: number;
    /** The same while at least 90% of the slots ran an agent: the cost of a running agent, without the per-task steps. */
    fleetPctOfCorePerAgentAllSlotsBusy: number;
    allSlotsBusySeconds: number;
    fleetMsPerTask: number;
  };
  /** bwrap launched -> the agent's process started inside (Fleet's forwarder starts first). */
  sandboxStartMs: Stats;
  sandboxParts: { bwrapToForwarderP50Ms: number; forwarderToAgentP50Ms: number };
  /** A slot seen freed in the state -> the next agent's process started. */
  slotToNextAgentMs: Stats;
  slotParts: { freedToSandboxP50Ms: number; sandboxToAgentP50Ms: number };
  phasesP50Ms: { toClaimed: number; claimedToSandbox: number; agentRun: number; agentEndToPr: number };
  firstToLastAgentStartMs: number;
  /** Why tasks failed, with how many. */
  failures: Record<string, number>;
  /**
   * With traceGit: the worker's git processes per task, by where they ran: the repository's cache
   * clone (one at a time per repository: a lock in worktree.ts), a task's worktree, elsewhere.
   */
  /** With traceGit: failed git commands of the worker (those Fleet expects to fail left out) and their errors. */
  gitFailures?: string[];
  gitPerTask?: {
    all: number;
    cacheClone: number;
    worktree: number;
    other: number;
    bySubcommand: Record<string, number>;
  };
  /** REST requests the worker sent per task (GitHub mode; the app's are not counted). */
  workerRestPerTask?: number;
  wallMs: number;
  load: { before: number; max: number; after: number };
  /** The node flags the worker ran with (`fleet run`'s own, or FLEET_RUN_NODE_FLAGS). */
  workerNodeFlags: string[];
  note: string;
}

export interface Stats {
  p50: number;
  p99: number;
  max: number;
  n: number;
}

const flag = (name: string, dflt: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? dflt;

const YML = (cap: number) =>
  [
    "dispatch: local",
    `max_concurrent: ${cap}`,
    "plan_phase: false",
    "retries: { max: 0 }",
    "timeouts: { run_minutes: 20, stall_minutes: 5 }",
    "",
  ].join("\n");

const IDENTITY = {
  GIT_AUTHOR_NAME: "Bench",
  GIT_AUTHOR_EMAIL: "bench@example.com",
  GIT_COMMITTER_NAME: "Bench",
  GIT_COMMITTER_EMAIL: "bench@example.com",
};

const stats = (xs: number[]): Stats => ({
  p50: round(percentile(xs, 50), 0),
  p99: round(percentile(xs, 99), 0),
  max: xs.length ? round(Math.max(...xs), 0) : Number.NaN,
  n: xs.length,
});

/**
 * Where a task's time went, medians over the runs: worker start (or the slot freed, for a task that
 * waited) -> claimed (seen in planning/running), claimed -> sandbox launched (worktree, prompt, gateway
 * grant), the agent's run, its end -> pull request seen (commit, push, PR, report, slot freed).
 */
function phases(
  runs: Array<{ agent: Proc; launch: { atMs: number }; task?: string }>,
  seen: Map<string, Map<string, number>>,
  startedAt: number,
) {
  const of = (f: (r: (typeof runs)[number], s: Map<string, number>) => number) =>
    round(
      percentile(
        runs.flatMap((r) => {
          const s = r.task ? seen.get(r.task) : undefined;
          const v = s ? f(r, s) : Number.NaN;
          return Number.isFinite(v) ? [v] : [];
        }),
        50,
      ),
      0,
    );
  const claimedAt = (s: Map<string, number>) =>
    Math.min(s.get("planning") ?? Infinity, s.get("running") ?? Infinity);
  return {
    toClaimed: of((_r, s) => claimedAt(s) - Math.max(startedAt, s.get("dispatched") ?? startedAt)),
    claimedToSandbox: of((r, s) => r.launch.atMs - claimedAt(s)),
    agentRun: of((r) => r.agent.lastSeen - r.agent.startMs),
    agentEndToPr: of((r, s) => (s.get("pr-open") ?? Number.NaN) - r.agent.lastSeen),
  };
}

function gitPerTask(
  log: Array<{ atMs: number; endMs: number; cwd: string; args: string }>,
  tasks: number,
  starting: readonly [number, number],
) {
  const per = (n: number) => round(n / tasks, 1);
  const inCache = (g: { cwd: string }) => /\/repos\/.*\.git$/.test(g.cwd);
  const cache = log.filter(inCache);
  const worktree = log.filter((g) => g.cwd.includes("/worktrees/")).length;
  // The subcommand: the first word after git's own options (-C dir, -c key=value, --git-dir ...).
  const subcommand = (args: string) => {
    const words = args.split(" ");
    for (let i = 0; i < words.length; i++) {
      if (["-C", "-c", "--git-dir", "--work-tree"].includes(words[i]!)) i++;
      else if (!words[i]!.startsWith("-")) return words[i]!;
    }
    return "?";
  };
  const sub = countBy(log.map((g) => subcommand(g.args)));
  // How much of the time from the first to the last git command the cache clone had one running:
  // commands there run one at a time (a lock per cache clone), so this is how busy that lock was.
  const spans = cache.map((g) => [g.atMs, g.endMs] as const).sort((a, b) => a[0] - b[0]);
  const busyIn = (lo: number, hi: number) => {
    let busy = 0;
    let until = lo;
    for (const [from, to] of spans) {
      // Sorted by start: the rest start at or after the window's end.
      if (from >= hi) break;
      const end = Math.min(to, hi);
      if (end <= until) continue;
      busy += end - Math.max(from, until);
      until = end;
    }
    return busy;
  };
  const busy = busyIn(-Infinity, Infinity);
  const first = Math.min(...log.map((g) => g.atMs));
  const last = Math.max(...log.map((g) => g.endMs));
  return {
    all: per(log.length),
    cacheClone: per(cache.length),
    worktree: per(worktree),
    other: per(log.length - cache.length - worktree),
    cacheCloneMsPerTask: Math.round(busy / tasks),
    cacheCloneBusyPct: round((100 * busy) / Math.max(1, last - first), 1),
    /** The same from the worker's start to its last agent's start (while tasks were waiting to start). */
    cacheCloneBusyPctWhileStarting: round(
      (100 * busyIn(starting[0], starting[1])) / Math.max(1, starting[1] - starting[0]),
      1,
    ),
    bySubcommand: Object.fromEntries(Object.entries(sub).map(([k, v]) => [k, per(v)])),
  };
}

const countBy = (xs: string[]): Record<string, number> => {
  const out: Record<string, number> = {};
  for (const x of xs) out[x] = (out[x] ?? 0) + 1;
  return out;
};

/** The pids under `root` among `live` processes. */
function descendants(live: Proc[], root: number): Set<number> {
  const children = new Map<number, number[]>();
  for (const p of live) children.set(p.ppid, [...(children.get(p.ppid) ?? []), p.pid]);
  const out = new Set<number>();
  const todo = [root];
  while (todo.length)
    for (const c of children.get(todo.pop()!) ?? [])
      if (!out.has(c)) {
        out.add(c);
        todo.push(c);
      }
  return out;
}

/** A local repository with the config and `n` tasks queued in `$FLEET_HOME` (as `fleet bd create` writes them). */
async function localQueue(dir: string, n: number, cap: number) {
  const repo = join(dir, "repo");
  const home = join(dir, "home");
  await mkdir(join(repo, ".github"), { recursive: true });
  await writeFile(join(repo, "README.md"), "# scale\n");
  await writeFile(join(repo, ".github/fleet.yml"), YML(cap));
  const env = { ...process.env, ...IDENTITY };
  await git("git", ["init", "-q", "-b", "main", repo], { env });
  await git("git", ["-C", repo, "add", "-A"], { env });
  await git("git", ["-C", repo, "commit", "-q", "-m", "init"], { env });
  const repository = await localRepositoryAt(repo);
  const base = await baseBranchAt(repo);
  const store = createLocalStateStore({ home });
  const now = new Date().toISOString();
  for (let i = 1; i <= n; i++)
    await store.update(({ doc, beads }) =>
      createLocalIssue(doc, beads, {
        repo: `local/${localRepoName(repo)}`,
        title: `Scale task ${i}`,
        body: `Write SCALE-${i}.md.`,
        labels: ["fleet:claude"],
        repository,
        base,
        sides: [{ coder: "claude", model: "claude-sonnet-4-5" }],
        priority: 2,
        dependsOn: [],
        requestedBy: "bench",
        now,
      }),
    );
  return { repo, home };
}

export async function runScaleAgents(o: ScaleAgentsOptions): Promise<ScaleAgentsResult> {
  const dir = await mkdtemp(join(tmpdir(), "fleet-bench-agents-"));
  const tag = `fleet-bench-${process.pid}-${Date.now().toString(36)}`;
  const workerGroup = cpuGroup(`${tag}-worker`);
  const sandboxGroup = cpuGroup(`${tag}-sandboxes`);
  const bwrapLog = join(dir, "bwrap.log");
  const gitLog = o.traceGit ? join(dir, "git.log") : undefined;
  const shims = await shimFolder(join(dir, "shims"), {
    bwrapLog,
    sandboxGroup,
    standIn: o.agent === "stand-in",
    ...(gitLog ? { gitLog } : {}),
  });
  const models = await startAgentModels({ turns: o.turns, delayMs: o.delayMs });
  const loads = [loadavg()[0]!];
  const loadTimer = setInterval(() => loads.push(loadavg()[0]!), 5_000);
  const cleanups: Array<() => Promise<unknown>> = [];
  try {
    const common = [
      "run",
      "--until-idle",
      "--concurrency",
      String(o.concurrency),
      "--model-base-url",
      models.url,
      "--agent-env",
      "CLAUDE_CODE_MAX_RETRIES=0",
    ];
    const credential = { ANTHROPIC_API_KEY: "sk-ant-bench-credential-0000000000" };
    let args: string[];
    let cwd: string;
    let env: Record<string, string>;
    let readTasks: ReturnType<typeof localStateReader>;
    let proxy: Awaited<ReturnType<typeof countingProxy>> | undefined;
    if (o.mode === "local") {
      const q = await localQueue(dir, o.tasks, o.concurrency);
      args = [...common, "--poll", "1000"];
      cwd = q.repo;
      env = workerEnv(shims, { FLEET_HOME: q.home, ...credential, ...IDENTITY });
      readTasks = localStateReader(q.home);
    } else {
      const h = await startHarness({ name: "scale", files: { ".github/fleet.yml": YML(o.concurrency) } });
      cleanups.push(() => h.stop());
      for (let i = 1; i <= o.tasks; i++)
        await h.label(await h.newIssue(`Scale task ${i}`, `Write SCALE-${i}.md.`), "fleet:claude");
      const token = await installationToken(h.gh, h.full);
      proxy = await countingProxy(h.gh.url);
      cleanups.push(() => proxy!.stop());
      args = [...common, "--repo", h.full, "--api-url", proxy.url, "--work-dir", join(dir, "work")];
      cwd = dir;
      env = workerEnv(shims, { GITHUB_TOKEN: token, FLEET_HOME: join(dir, "home"), ...credential });
      readTasks = branchStateReader(join(h.gh.dataDir, h.owner, `${h.name}.git`));
    }

    const watch = watchState(readTasks, 100);
    let workerPid = -1;
    let peak = { agents: 0, rss: 0 };
    let rssMax = 0;
    /** When the worker's RSS was at its most: how long after its start, with how many agents running. */
    let rssMaxAt = { at: 0, agents: 0 };
    let rssIdle = 0;
    let workerCmdline: string[] | undefined;
    let startupCpu = Number.NaN;
    // The worker tree's CPU while (nearly) every slot runs an agent: its cost per running agent.
    const full = { cpuMs: 0, agentMs: 0 };
    let prev: { at: number; cpu: number; agents: number } | undefined;
    // Fleet's forwarder, a sandbox's first process (perl's or node's). The agent it forks runs its
    // command line until it execs, so a forwarder is one whose parent is not one.
    const forwarderCmd = (p: Proc | undefined) =>
      !!p &&
      (p.cmd.startsWith("/run/fleet-node") ||
        p.cmd.startsWith("/usr/bin/perl -e # fleet: the sandbox's network forwarder"));
    const isForwarder = (p: Proc) => forwarderCmd(p) && !forwarderCmd(sampling?.procs.get(p.ppid));
    const isHelper = (p: Proc) =>
      p.ppid === workerPid && p.cmd.includes(" -e ") && p.cmd.includes("const runOne");
    const helperMax = { rss: 0, own: 0 };
    // Declared first: its first pass runs the callbacks below, which look processes up in it.
    let sampling: ReturnType<typeof startProcSampler> | undefined;
    sampling = startProcSampler({
      intervalMs: 250,
      detail: (p) => isForwarder(p) || isHelper(p),
      onSample: (now, live) => {
        const worker = live.find((p) => p.pid === workerPid);
        if (!worker) return;
        const tree = descendants(live, workerPid);
        const running = live.filter((p) => tree.has(p.pid) && isForwarder(p));
        const agents = running.length;
        const cpu = workerGroup.usageMs() + running.reduce((n, p) => n + p.cpuMs, 0);
        if (worker.rssMB > rssMax) rssMaxAt = { at: now, agents };
        rssMax = Math.max(rssMax, worker.rssMB);
        const helper = live.find(isHelper);
        if (helper) {
          helperMax.rss = Math.max(helperMax.rss, helper.rssMB);
          helperMax.own = Math.max(helperMax.own, helper.privateMB ?? 0);
        }
        if (agents === 0 && Number.isNaN(startupCpu)) rssIdle = Math.max(rssIdle, worker.rssMB);
        if (agents > 0 && Number.isNaN(startupCpu)) startupCpu = workerGroup.usageMs();
        // The worker's node flags as the system started it (after bin/fleet.js's re-exec), read once.
        if (agents > 0 && !workerCmdline)
          workerCmdline = readFileSync(`/proc/${workerPid}/cmdline`, "utf8").split("\0").filter(Boolean);
        if (agents >= peak.agents) peak = { agents, rss: worker.rssMB };
        if (prev && agents >= 0.9 * o.concurrency && prev.agents >= 0.9 * o.concurrency) {
          full.cpuMs += cpu - prev.cpu;
          full.agentMs += ((agents + prev.agents) / 2) * (now - prev.at);
        }
        prev = { at: now, cpu, agents };
      },
    });
    const sampler = sampling;
    const t0 = Date.now();
    const workerStartedAt = t0;
    const child = startFleet(args, { cwd, env, group: workerGroup });
    workerPid = child.pid ?? -1;
    const timeout = setTimeout(() => child.kill("SIGTERM"), 15 * 60_000);
    const code = await exited(child);
    clearTimeout(timeout);
    const wallMs = Date.now() - t0;
    sampler.stop();
    await watch.stop();
    if (code !== 0) process.stderr.write(child.output().slice(-4000));

    // This worker's processes only (others on the machine may run sandboxes too): Fleet's forwarder in
    // each sandbox, and the agent it started; each sandbox's launch from the bwrap shim's log.
    const launchOf = new Map(readBwrapLog(bwrapLog).map((l) => [l.pid, l]));
    const procs = [...sampler.procs.values()];
    const byPid = new Map(procs.map((p) => [p.pid, p]));
    const mine = (p: Proc) => sampler.ancestors(p.pid).some((a) => a.pid === workerPid);
    const forwarders = procs.filter((p) => isForwarder(p) && mine(p));
    const helperProc = procs.find(isHelper);
    const runs = forwarders.flatMap((f) => {
      const agent = procs.find((p) => p.ppid === f.pid);
      const launch = sampler
        .ancestors(f.pid)
        .map((p) => launchOf.get(p.pid))
        .find(Boolean);
      return agent && launch
        ? [{ agent, forwarder: f, launch, task: /worktrees\/([^/]+)\//.exec(launch.dir)?.[1] }]
        : [];
    });
    const starts = runs.map((r) => r.agent.startMs).sort((x, y) => x - y);
    // The runs that waited for a slot, in the order they started, each against the slot freed before it.
    const late = [...runs].sort((a, b) => a.agent.startMs - b.agent.startMs).slice(o.concurrency);
    const gaps = late
      .map((r, i) => ({ r, freed: watch.releases[i] }))
      .filter((g): g is { r: (typeof runs)[number]; freed: number } => g.freed !== undefined);

    const tasks = Object.values(watch.last);
    const forwardersMs = forwarders.reduce((n, p) => n + p.cpuMs, 0);
    const sandboxMs = sandboxGroup.usageMs();
    const workerTreeMs = workerGroup.usageMs();
    const agentRunMs = runs.reduce((n, r) => n + (r.agent.lastSeen - r.agent.startMs), 0);
    const fleetMs = workerTreeMs + forwardersMs;
    const median = (xs: number[]) => percentile(xs, 50);
    return {
      ...o,
      completed: tasks.filter((t) => t.state === "pr-open" || t.state === "done").length,
      failed: tasks.filter((t) => t.state === "failed").length,
      ranTwice: [...models.tasks.values()].filter((t) => t.runs > 1).length,
      agentRuns: runs.length,
      maxAgentsAtOnce: peak.agents,
      worker: {
        rssMaxMB: round(rssMax, 1),
        rssMaxAt: { sinceStartMs: Math.max(0, rssMaxAt.at - workerStartedAt), agents: rssMaxAt.agents },
        rssAtPeakMB: round(peak.rss, 1),
        rssIdleMB: round(rssIdle, 1),
      },
      ...(helperProc
        ? {
            commandHelper: {
              rssMaxMB: round(helperMax.rss, 1),
              privateMaxMB: round(helperMax.own, 1),
              cpuMs: helperProc.cpuMs,
            },
          }
        : {}),
      forwarder: {
        kind: forwarders.some((f) => f.cmd.startsWith("/run/fleet-node")) ? "node" : "perl",
        rssEachMB: round(median(forwarders.map((f) => f.rssMB)), 1),
        privateEachMB: round(median(forwarders.flatMap((f) => f.privateMB ?? [])), 1),
        pssEachMB: round(median(forwarders.flatMap((f) => f.pssMB ?? [])), 1),
        cpuEachMs: round(median(forwarders.map((f) => f.cpuMs)), 0),
      },
      cpu: {
        workerTreeMs: Math.round(workerTreeMs),
        workerProcessMs: byPid.get(workerPid)?.cpuMs ?? Number.NaN,
        workerStartupMs: Math.round(startupCpu),
        forwardersMs,
        agentsMs: Math.round(sandboxMs - forwardersMs),
        agentRunMs,
        fleetPctOfCorePerAgent: round((100 * fleetMs) / agentRunMs, 2),
        fleetPctOfCorePerAgentAllSlotsBusy: round((100 * full.cpuMs) / full.agentMs, 2),
        allSlotsBusySeconds: round(full.agentMs / 1000 / o.concurrency, 1),
        fleetMsPerTask: Math.round(fleetMs / o.tasks),
      },
      sandboxStartMs: stats(runs.map((r) => r.agent.startMs - r.launch.atMs)),
      sandboxParts: {
        bwrapToForwarderP50Ms: round(median(runs.map((r) => r.forwarder.startMs - r.launch.atMs)), 0),
        forwarderToAgentP50Ms: round(median(runs.map((r) => r.agent.startMs - r.forwarder.startMs)), 0),
      },
      slotToNextAgentMs: stats(gaps.map((g) => g.r.agent.startMs - g.freed)),
      slotParts: {
        freedToSandboxP50Ms: round(median(gaps.map((g) => g.r.launch.atMs - g.freed)), 0),
        sandboxToAgentP50Ms: round(median(gaps.map((g) => g.r.agent.startMs - g.r.launch.atMs)), 0),
      },
      phasesP50Ms: phases(runs, watch.seen, workerStartedAt),
      failures: countBy(
        tasks.filter((t) => t.state === "failed").map((t) => (t.reason ?? "?").slice(0, 160)),
      ),
      firstToLastAgentStartMs: starts.length ? Math.round(starts.at(-1)! - starts[0]!) : Number.NaN,
      ...(gitLog
        ? {
            gitPerTask: gitPerTask(readGitLog(gitLog), o.tasks, [
              workerStartedAt,
              starts.at(-1) ?? Date.now(),
            ]),
            gitFailures: (existsSync(`${gitLog}.failed`) ? readFileSync(`${gitLog}.failed`, "utf8") : "")
              .split(/\n(?=rc=)/)
              .filter(
                (f) => f && !/ rev-parse --verify| ls-remote | config --get| diff --cached --quiet/.test(f),
              )
              .slice(0, 20),
          }
        : {}),
      ...(proxy ? { workerRestPerTask: round(proxy.calls.filter((c) => !c.git).length / o.tasks, 2) } : {}),
      wallMs,
      load: {
        before: round(loads[0]!, 2),
        max: round(Math.max(...loads), 2),
        after: round(loadavg()[0]!, 2),
      },
      // Between node and the script on the worker's command line (none read: no agent ever ran).
      workerNodeFlags: workerCmdline?.slice(1, workerCmdline.indexOf(FLEET_BIN)) ?? [],
      note:
        o.agent === "claude"
          ? "agents: the real Claude CLI (@anthropic-ai/claude-code)"
          : "agents: the stand-in (bench/lib/stand-in-claude.mjs): Claude's stream-json and Messages API, Bash tool, no model of its own",
    };
  } finally {
    clearInterval(loadTimer);
    for (const c of cleanups.reverse()) await c().catch(() => {});
    await models.stop();
    workerGroup.remove();
    sandboxGroup.remove();
    await rm(dir, { recursive: true, force: true }).catch(() => {});
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const r = await runScaleAgents({
    mode: flag("mode", "local") as "local" | "github",
    agent: flag("agent", "stand-in") as "stand-in" | "claude",
    concurrency: Number(flag("concurrency", "50")),
    tasks: Number(flag("tasks", "60")),
    turns: Number(flag("turns", "3")),
    delayMs: Number(flag("delay-ms", "2000")),
    traceGit: process.argv.includes("--trace-git"),
  });
  console.log(JSON.stringify(r, null, 2));
  await saveFigures(r);
  void dirname;
}
