import { hostname } from "node:os";
import type { FleetConfig } from "../core/config.ts";
import { claimOrder, dispatchHolder, slotsInUse } from "../core/leases.ts";
import { wakeDue } from "../core/scheduler.ts";
import type { FleetStateDoc } from "../core/state-doc.ts";
import type { Task } from "../core/task.ts";
import type { ConfigLoad } from "../github/read-config.ts";
import { localDispatcher } from "../queue/dispatcher.ts";
import { openRepository, type Repository } from "../queue/open-repository.ts";
import type { RepoQueue } from "../queue/repo-queue.ts";
import type { TaskOutcome } from "./3-attempt.ts";
import { type ExecuteDeps, executeTask } from "./execute-task.ts";
import { handOffs } from "./hand-off.ts";
import { goneRunsHere } from "./holder-process.ts";
import type { SandboxMode } from "./sandbox/bubblewrap.ts";

/** How often a worker whose runs hold every slot of the repository still looks at the state. */
const FULL_POLL_MS = 30_000;
/** Dispatches this close to the longest-waiting one count as dispatched together in a poll's claim order (claimOrder). */
const POLL_SPREAD_MS = 30_000;

/** The worker's reach (repository, state, clone, agents, credentials) as executeTask takes it, and its pace. */
export interface LocalWorkerOptions
  extends Pick<
    ExecuteDeps,
    | "repo"
    | "github"
    | "store"
    | "cloneUrl"
    | "gitAuth"
    | "workDir"
    | "adapterFor"
    | "credentialFor"
    | "credentialValue"
    | "windowBook"
    | "modelBaseUrl"
    | "agentEnv"
    | "heartbeatMs"
    | "leaseTtlMs"
    | "clock"
    | "log"
    | "egressHosts"
    | "local"
  > {
  /** Secrets this worker holds (its GitHub token, credential values): redacted, and checked for in all an agent leaves. */
  secrets?: string[];
  /** How agents are contained; default: the repository config's `sandbox` (bubblewrap). */
  sandbox?: SandboxMode;
  /** Reads `.github/fleet.yml` some other way than from GitHub (local mode: the repository on disk). */
  loadConfig?: () => Promise<ConfigLoad>;
  /**
   * Which dispatched tasks are this worker's (default: all). Local mode runs one worker per
   * repository over one shared queue: each takes only the tasks recorded for its repository.
   */
  accepts?: (task: Task, doc: FleetStateDoc) => boolean;
  /** Tasks this worker runs at once (its share of the repository's slots). */
  concurrency?: number;
  /** How often the state is read for dispatched tasks; a read that finds nothing new costs a 304. */
  pollMs?: number;
  name?: string;
  trackerIntervalMs?: number;
  onOutcome?: (taskId: string, outcome: TaskOutcome) => void;
}

export interface LocalWorker {
  readonly name: string;
  readonly running: number;
  /** Stops taking tasks, stops running agents (their tasks go back to the queue) and waits for them. */
  stop(): Promise<void>;
  /** One poll now: claims and starts what is dispatched (resolves when started, not finished). */
  poll(): Promise<void>;
  /** Resolves when no task is running. */
  idle(): Promise<void>;
}

/**
 * `dispatch: local`: a worker process that claims dispatched tasks from the repository state and runs
 * them in worktrees on this machine, up to `concurrency` at once.
 */
export function startLocalWorker(opts: LocalWorkerOptions): LocalWorker {
  const name = opts.name ?? `local:${hostname()}:${process.pid}`;
  const log = opts.log ?? (() => {});
  const concurrency = opts.concurrency ?? 2;
  const repository = workerRepository(opts, log);
  const running = new Map<string, Promise<void>>();
  const stopping = new AbortController();
  let polling: Promise<void> | undefined;
  let idleWaiters: Array<() => void> = [];
  /** A job of the worker's for a task: while it goes the task is running here; its end frees a slot. */
  const track = (taskId: string, work: Promise<TaskOutcome | undefined>) => {
    const job = work
      .then((outcome) => {
        if (outcome) opts.onOutcome?.(taskId, outcome);
      })
      .catch((error) => log(`task ${taskId} failed in the worker: ${(error as Error).stack ?? error}`))
      .finally(() => {
        running.delete(taskId);
        // A claim of this worker's own commit waited for this job to end (see handOffs).
        hands.jobEnded(taskId);
        if (running.size === 0) {
          for (const w of idleWaiters) w();
          idleWaiters = [];
        }
        // A finished task frees a slot: look again at once rather than at the next tick.
        if (!stopping.signal.aborted) void poll();
      });
    running.set(taskId, job);
  };
  const hands = handOffs({
    name,
    concurrency,
    repository,
    running,
    stopping: stopping.signal,
    ...(opts.accepts ? { accepts: opts.accepts } : {}),
    clock: opts.clock,
    leaseTtlMs: opts.leaseTtlMs,
    log,
    run: (taskId, queue, config, extra, claimed) => {
      const deps = executeDeps(opts, repository, queue, config, name, stopping.signal, log);
      track(taskId, executeTask(taskId, { ...deps, ...extra }, claimed));
    },
    track,
  });

  // The state as the last poll saw it: when every slot of the repository is held by this worker's own
  // runs, nothing can be dispatched to anyone until one of them ends (which polls at once), so the
  // polls in between only look now and then (a raised cap).
  let lastSeen: { doc: FleetStateDoc; config: FleetConfig; at: number } | undefined;
  const fullOfOwnRuns = (now: Date): boolean => {
    if (!lastSeen || running.size === 0 || now.getTime() - lastSeen.at >= FULL_POLL_MS) return false;
    const used = slotsInUse(lastSeen.doc, now);
    return used.size >= lastSeen.config.max_concurrent && [...used.values()].every((id) => running.has(id));
  };

  async function pollOnce(): Promise<void> {
    if (stopping.signal.aborted || running.size >= concurrency) return;
    if (fullOfOwnRuns(opts.clock?.() ?? new Date())) return;
    const loaded = await repository.fileConfig();
    if (!loaded.ok) {
      log(
        `.github/fleet.yml is invalid: ${loaded.problems.map((p) => `${p.path}: ${p.message}`).join("; ")}`,
      );
      return;
    }
    await hands.fileRead(loaded.config);
    let snapshot = await repository.store.read({ why: "poll" });
    const queue = hands.queueFor(loaded.config);
    if (await giveBackGoneRuns(snapshot.doc, queue, log))
      snapshot = await repository.store.read({ why: "poll" });
    // A rate limit or a retry backoff ran out: no webhook says so, so this poll runs the pass.
    const nowIso = (opts.clock?.() ?? new Date()).toISOString();
    if (wakeDue(Object.values(snapshot.doc.tasks), queue.config(snapshot.doc), nowIso)) {
      await queue.schedule();
      snapshot = await repository.store.read({ why: "poll" });
    }
    const config = queue.config(snapshot.doc);
    lastSeen = { doc: snapshot.doc, config, at: (opts.clock?.() ?? new Date()).getTime() };
    // Every worker's poll finds a burst's dispatches at once: each tries its own order of them.
    for (const task of claimOrder(waitingHere(snapshot.doc, running, opts.accepts), name, POLL_SPREAD_MS)) {
      if (running.size >= concurrency) break;
      hands.start(task.id, queue, config);
    }
  }

  function poll(): Promise<void> {
    polling ??= pollOnce()
      .catch((error) => log(`poll failed: ${(error as Error).message}`))
      .finally(() => {
        polling = undefined;
      });
    return polling;
  }

  const timer = setInterval(() => void poll(), opts.pollMs ?? 5_000);
  void poll();

  return {
    name,
    get running() {
      return running.size;
    },
    poll,
    idle: () => (running.size === 0 ? Promise.resolve() : new Promise<void>((r) => idleWaiters.push(r))),
    async stop() {
      clearInterval(timer);
      stopping.abort();
      await polling;
      // A job may begin as another ends (a claim that waited for it, or given back): wait for all.
      while (running.size > 0) await Promise.allSettled([...running.values()]);
      // Edits still waiting for their 15 s window are written now, so no issue shows a stale state.
      await repository.tracker
        .flush()
        .catch((e) => log(`tracking comment edits failed: ${(e as Error).message}`));
    },
  };
}

/**
 * The worker's repository: heartbeats, claims and transitions of all its tasks share one write queue; the
 * tracker keeps the tracking comments' ids for the worker's life; the file is read at most once a
 * minute (polls are frequent, config changes are not).
 */
function workerRepository(opts: LocalWorkerOptions, log: (message: string) => void): Repository {
  return openRepository({
    github: opts.github,
    repo: opts.repo,
    store: opts.store,
    clock: opts.clock,
    trackerIntervalMs: opts.trackerIntervalMs,
    configTtlMs: 60_000,
    ...(opts.loadConfig ? { loadConfig: opts.loadConfig } : {}),
    dispatcherFor: () => localDispatcher,
    ...(opts.local ? { local: true } : {}),
    log,
  });
}

/** Tasks dispatched to any local worker that this one accepts and has no job for yet. */
function waitingHere(
  doc: FleetStateDoc,
  running: ReadonlyMap<string, unknown>,
  accepts: LocalWorkerOptions["accepts"],
): Task[] {
  return Object.values(doc.tasks).filter(
    (t) =>
      t.state === "dispatched" &&
      t.lease?.holder === dispatchHolder("local") &&
      !running.has(t.id) &&
      (accepts?.(t, doc) ?? true),
  );
}

/**
 * A worker on this machine was killed hard: its runs go back to the queue now, not when their leases
 * expire (see goneRunsHere). Whether any did.
 */
async function giveBackGoneRuns(
  doc: FleetStateDoc,
  queue: RepoQueue,
  log: (message: string) => void,
): Promise<boolean> {
  const gone = await goneRunsHere(doc);
  if (gone.length === 0) return false;
  const back = new Set((await queue.reclaimGoneRuns(gone)).map((t) => t.id));
  for (const g of gone.filter((g) => back.has(g.taskId)))
    log(`${g.taskId}: its worker ${g.holder} is gone; the run goes back to the queue`);
  return back.size > 0;
}

/** What executeTask needs from this worker for one task. */
function executeDeps(
  opts: LocalWorkerOptions,
  repository: Repository,
  queue: RepoQueue,
  config: FleetConfig,
  holder: string,
  signal: AbortSignal,
  log: (message: string) => void,
): ExecuteDeps {
  return {
    repo: opts.repo,
    github: opts.github,
    store: repository.store,
    queue,
    tracker: repository.tracker,
    config,
    cloneUrl: opts.cloneUrl,
    gitAuth: opts.gitAuth,
    workDir: opts.workDir,
    adapterFor: opts.adapterFor,
    credentialFor: opts.credentialFor,
    credentialValue: opts.credentialValue,
    ...(opts.windowBook ? { windowBook: opts.windowBook } : {}),
    modelBaseUrl: opts.modelBaseUrl,
    agentEnv: opts.agentEnv,
    secrets: opts.secrets,
    sandbox: opts.sandbox,
    ...(opts.egressHosts ? { egressHosts: opts.egressHosts } : {}),
    ...(opts.local ? { local: true } : {}),
    holder,
    clock: opts.clock,
    signal,
    heartbeatMs: opts.heartbeatMs,
    leaseTtlMs: opts.leaseTtlMs,
    log,
  };
}
