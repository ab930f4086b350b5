import { homedir } from "node:os";
import type { AgentAdapter } from "../agents/types.ts";
import type { FleetConfig } from "../core/config.ts";
import { DEFAULT_LEASE_TTL_MS } from "../core/leases.ts";
import { networkPolicyOf } from "../core/network-policy.ts";
import { resourceLimitsOf } from "../core/resource-limits.ts";
import { runKindOf } from "../core/run-history.ts";
import type { FleetStateDoc } from "../core/state-doc.ts";
import type { Task, TaskContext, TaskState } from "../core/task.ts";
import { perTaskLimits } from "../economy/budgets.ts";
import { type WindowBook, writeWindows } from "../economy/credential-windows.ts";
import type { GitHub, RepoRef } from "../github/port.ts";
import type { RepoQueue } from "../queue/repo-queue.ts";
import type { Tracker } from "../queue/tracker.ts";
import { tasksOf } from "../queue/transitions.ts";
import { abSides } from "../render/ab-comparison.ts";
import type { StateSnapshot, StateStore } from "../state/store.ts";
import { type ClaimedTask, claimTaskState, startHeartbeat } from "./1-claim.ts";
import { type Gathered, type GatherInput, gatherIssue } from "./2-gather.ts";
import { runTask, type TaskOutcome, type TaskSpec, type WorkerDeps } from "./3-attempt.ts";
import { credentialPool, type PoolInput, type RecordInput, recordOutcome } from "./5-record.ts";
import { coderNotReady } from "./coder-preflight.ts";
import { postQuestion } from "./question.ts";
import { postAbComparisonIfDue } from "./runs/ab-comparison.ts";
import { queueCrossReview } from "./runs/cross-review.ts";
import { type DiscoveredWorkDeps, fileDiscoveredWork } from "./runs/discovered-work.ts";
import { applySplitOutcome } from "./runs/kinds.ts";
import { runRebase } from "./runs/rebase.ts";
import type { SandboxMode } from "./sandbox/bubblewrap.ts";
import type { GitAuth } from "./workspace/git.ts";

export { claimTask, claimTaskState } from "./1-claim.ts";

export interface ExecuteDeps {
  repo: RepoRef;
  github: GitHub;
  store: StateStore;
  queue: RepoQueue;
  /** The queue's tracker, told the tracking comment's id when the issue's comments are listed anyway. */
  tracker?: Tracker;
  config: FleetConfig;
  cloneUrl: string;
  gitAuth?: GitAuth;
  workDir: string;
  adapterFor: (coder: string) => AgentAdapter | undefined;
  /** The credential for a coder: its name and value, looked up by name in the worker's environment. */
  credentialFor?: (coder: string) => { name: string; value: string } | undefined;
  /**
   * A credential's value by name (e.g. `process.env[name]` at the edge). With it, a run draws on the
   * coder's whole pool (`coders.<c>.credentials`) and moves on to the next credential on a rate limit.
   */
  credentialValue?: (name: string) => string | undefined;
  /** What this worker saw of its credentials' windows; default: the process's own (one per process). */
  windowBook?: WindowBook;
  modelBaseUrl?: string;
  agentEnv?: Record<string, string>;
  /** How agents are contained; default: `config.sandbox`. */
  sandbox?: SandboxMode;
  /** The HOME whose coder files a `home: inherit` coder's agents see; default: this user's. */
  userHome?: string;
  /** Lease holder: this worker or Actions run. */
  holder: string;
  clock?: () => Date;
  signal?: AbortSignal;
  heartbeatMs?: number;
  leaseTtlMs?: number;
  secrets?: string[];
  /** Names the operator maps to addresses for the egress proxy (`FLEET_EGRESS_HOSTS`). */
  egressHosts?: Readonly<Record<string, string>>;
  /** Local mode (queue/local-github.ts): the plan and PR name `fleet approve` and `fleet merge`. */
  local?: boolean;
  /**
   * Inside the claim's compare-and-swap: whether this claimer may take the task (a worker's room, see
   * hasRoomFor; an Actions run's own attempt, see runAction).
   */
  mayClaim?: (doc: FleetStateDoc) => boolean;
  /**
   * The run is over (its agent, if any, stopped), before its end is recorded: a worker whose end commit
   * claims the next task (DispatchedTaker) counts this run out and reads the repository's settings now.
   */
  runOver?: () => Promise<void>;
  log?: (message: string) => void;
}

/**
 * Runs one dispatched task to its end, as its lease holder, and records every transition in
 * repository state: the one path both the local worker and the Action take.
 * 1. claim: the lease, and the first state (planning or running), in one commit;
 * 2. gather: the approved issue text, the comments, what kind of run it is;
 * 3. session: the run (runTask, or runRebase for a PR that needs one) under a heartbeat that stops the
 *    agent when the task is cancelled or the lease lost, on a credential from the coder's pool;
 * 4. publish: done inside the run (push, PR, report), and the split plan or discovered work after it;
 * 5. record: the outcome, the ledger, the freed slot (and the next scheduling pass), the A/B comparison.
 */
export async function executeTask(
  taskId: string,
  deps: ExecuteDeps,
  /** Claimed already, in a commit of this worker's (see DispatchedTaker): step 1 is done. */
  claimedAlready?: ClaimedTask,
): Promise<TaskOutcome | undefined> {
  const clock = deps.clock ?? (() => new Date());
  const ttl = deps.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS;
  const log = deps.log ?? (() => {});
  const steps = stepInputs(deps, log);

  // 1.
  const claimed =
    claimedAlready ??
    (await claimTaskState(
      deps.store,
      taskId,
      deps.holder,
      clock(),
      ttl,
      startIn(deps.config),
      deps.mayClaim,
    ));
  if (!claimed) return undefined;
  const { task } = claimed;
  const adapter = deps.adapterFor(task.coder);
  // Until the heartbeat starts, the lease is as the claim left it: an early end keeps trying within it.
  const claimHeldUntil = endDeadline(deps, task.lease ? Date.parse(task.lease.expiresAt) : undefined);
  if (!adapter) {
    await endBeforeAgent(task, `no adapter for coder "${task.coder}" on this worker`, deps, claimHeldUntil);
    return undefined;
  }
  if (await endIfCoderNotReady(task, adapter, deps, log, claimHeldUntil)) return undefined;

  // 2.
  const gathered = await gatherIssue(task, claimed.beads, steps.gather);
  if ("missing" in gathered) {
    await endBeforeAgent(task, gathered.missing, deps, claimHeldUntil);
    return undefined;
  }

  // 3. A credential from the coder's pool; when every one is cooling the task waits for the first reset.
  // The run's context and its credentials' windows go into each heartbeat's commit and the last one.
  // The pool's first look at the state is the claim's own state: no read of its own.
  const rotation = credentialPool(
    task.coder,
    { ...steps.pool, store: readingFirst(deps.store, claimed.snapshot) },
    clock,
  );
  let context: TaskContext | undefined;
  const runDoc = (doc: FleetStateDoc): FleetStateDoc => {
    const current = doc.tasks[taskId];
    const withContext =
      context && current ? { ...doc, tasks: { ...doc.tasks, [taskId]: { ...current, context } } } : doc;
    return writeWindows(withContext, task.coder, rotation.names, rotation.book);
  };
  const ahead = runningAhead(task, deps);
  const heartbeat = startHeartbeat({
    onBeat: () => ahead.commit(),
    store: deps.store,
    taskId,
    holder: deps.holder,
    ttlMs: ttl,
    everyMs: deps.heartbeatMs,
    clock,
    outer: deps.signal,
    log,
    alsoDoc: runDoc,
    ...(claimed.task.lease ? { renewedAt: claimed.task.lease.heartbeatAt } : {}),
  });
  // The run's end, in one commit with `alsoDoc`'s changes, keeps trying while the lease holds.
  const record = (o: TaskOutcome, alsoDoc?: (doc: FleetStateDoc) => FleetStateDoc) =>
    recordOutcome(task, o, steps.record, heartbeat.lost(), alsoDoc, endDeadline(deps, heartbeat.heldUntil()));
  let outcome: TaskOutcome;
  try {
    const first = await rotation.first();
    if (first.kind === "all-cooling") {
      outcome = allCooling(task.coder, first.resetAt);
      await deps.runOver?.();
      await record(outcome);
      return outcome;
    }
    const onContext = (c: TaskContext) => {
      context = c;
    };
    const workerDeps = workerDepsFor(task, adapter, gathered, deps, {
      credential: first.kind === "credential" ? first.credential : undefined,
      rotate: rotation.rotate,
      pool: { coder: task.coder, book: rotation.book, rotate: rotation.rotate, next: rotation.next },
      onContext,
      signal: heartbeat.signal,
      confirmHeld: heartbeat.confirm,
      clock,
      ahead,
    });
    outcome = await runFor(task)(taskSpecFor(task, gathered, deps), workerDeps);
  } finally {
    heartbeat.stop();
  }
  await deps.runOver?.();

  // 4. The split plan becomes sub-issues; otherwise the agent's follow-ups become issues discovered from it.
  if (gathered.special.split) await applySplitOutcome(task, outcome, steps.split);
  else await fileDiscoveredWork(task, outcome, steps.discovered);
  // A Fleet PR that just opened is reviewed by another coder first (`cross_review`).
  await queueCrossReview(task, outcome, deps).catch((e) =>
    log(`cross-review of ${task.id} was not queued: ${(e as Error).message}`),
  );

  // 5. Out of credentials: the task waits until the first one of the pool is free again.
  const poolReset = outcome.outcome === "rate-limited" ? rotation.resetAt() : undefined;
  if (poolReset) outcome.rateLimit = { ...outcome.rateLimit, resetsAt: poolReset };
  await record(outcome, runDoc);
  // The outcome's state edit carried the report; without one (the task had moved on), it goes out now.
  await deps.tracker?.flush(task.id);
  await afterRecord(task, outcome, deps, steps.ab, log);
  return outcome;
}

/**
 * How long a run's end keeps trying past the usual retries: while its lease holds (`heldUntil`), unless
 * the worker is stopping (its stop would wait for the end as long; the lease running out hands the task on).
 */
const endDeadline = (deps: ExecuteDeps, heldUntil: number | undefined): number | undefined =>
  deps.signal?.aborted || heldUntil === undefined || Number.isNaN(heldUntil) ? undefined : heldUntil;

/** A run that ends before its agent starts: nothing to record but its end (and `patch`). */
async function endBeforeAgent(
  task: Task,
  reason: string,
  deps: ExecuteDeps,
  retryUntilMs: number | undefined,
  patch: Partial<Task> = {},
): Promise<void> {
  await deps.runOver?.();
  await deps.queue.endRun(
    task.id,
    { holder: deps.holder, to: "failed", reason, patch },
    undefined,
    retryUntilMs,
  );
}

/** Once the run's end is recorded: the agent's question, the A/B comparison. */
async function afterRecord(
  task: Task,
  outcome: TaskOutcome,
  deps: ExecuteDeps,
  ab: ReturnType<typeof stepInputs>["ab"],
  log: (message: string) => void,
): Promise<void> {
  // The agent's question, once the task waits for its answer (local mode: `fleet task <id>` shows it).
  if (outcome.outcome === "waiting" && outcome.question && !deps.local)
    await postQuestion(deps.github, task, outcome.question, deps.config.ask_human.expire_after_hours);
  // The last side of an A/B run to finish posts the comparison.
  // (Only an issue with tasks on two sides has one: an ordinary task costs no state request here.)
  const known = deps.queue.lastState();
  if (!known || abSides(tasksOf(known), task.issue).length > 0)
    await postAbComparisonIfDue(ab, task.issue).catch((e) =>
      log(`A/B comparison of #${task.issue} failed: ${(e as Error).message}`),
    );
}

/** No run: every credential of the coder is rate-limited, and the task waits for the first reset. */
const allCooling = (coder: string, resetsAt: string): TaskOutcome => ({
  outcome: "rate-limited",
  reason: `every credential of ${coder} is rate-limited; the task waits for the first reset`,
  rateLimit: { resetsAt },
  logPath: "",
  artifacts: {},
});

/** The state a claimed task starts in: planning when the repository plans first (a rebase or a review run has no plan). */
export const startIn =
  (config: FleetConfig) =>
  (t: Task): "planning" | "running" =>
    config.plan_phase && !t.approved && !t.rebase && !t.review ? "planning" : "running";

/**
 * A CLI or credential missing here is the worker's setup, not the agent's failure: the task fails now
 * with what was looked for, and the attempt its dispatch counted is given back (a retry would find the
 * worker no different, so none is made). True when the task was ended.
 */
async function endIfCoderNotReady(
  task: Task,
  adapter: AgentAdapter,
  deps: ExecuteDeps,
  log: (message: string) => void,
  retryUntilMs?: number,
): Promise<boolean> {
  const notReady = await coderNotReady({
    coder: task.coder,
    adapter,
    config: deps.config,
    path: process.env.PATH,
    ...(deps.credentialFor || deps.credentialValue
      ? {
          hasCredential: (n: string) => Boolean(deps.credentialValue?.(n)),
          given: deps.credentialFor?.(task.coder)?.name,
        }
      : {}),
  });
  if (!notReady) return false;
  log(`${task.id}: ${notReady}`);
  await endBeforeAgent(task, notReady, deps, retryUntilMs, { attempts: Math.max(0, task.attempts - 1) });
  return true;
}

/** Each step's input, built once where the pipeline starts: no step reaches more than it needs. */
function stepInputs(deps: ExecuteDeps, log: (message: string) => void) {
  const { github, repo, config, store, queue, clock } = deps;
  return {
    gather: {
      github,
      repo,
      config,
      log,
      ...(deps.tracker ? { tracker: deps.tracker } : {}),
    } satisfies GatherInput,
    pool: {
      config,
      store,
      log,
      ...(deps.credentialFor ? { credentialFor: deps.credentialFor } : {}),
      ...(deps.credentialValue ? { credentialValue: deps.credentialValue } : {}),
      ...(deps.windowBook ? { book: deps.windowBook } : {}),
    } satisfies PoolInput,
    record: {
      queue,
      config,
      holder: deps.holder,
      ...(clock ? { clock } : {}),
      ...(deps.local ? { local: true } : {}),
    } satisfies RecordInput,
    split: { github, repo, config, queue },
    discovered: {
      github,
      repo,
      store,
      queue,
      config,
      log,
      ...(clock ? { clock } : {}),
      ...(deps.secrets ? { secrets: deps.secrets } : {}),
      ...(deps.credentialFor ? { credentialFor: deps.credentialFor } : {}),
      ...(deps.credentialValue ? { credentialValue: deps.credentialValue } : {}),
    } satisfies DiscoveredWorkDeps,
    ab: { store, github, repo, log },
  };
}

/** A store whose next read is `snapshot` (the state a commit of this run just left), later ones its own. */
function readingFirst(store: StateStore, snapshot: StateSnapshot): StateStore {
  let first: StateSnapshot | undefined = snapshot;
  return {
    read: (opts) => {
      const s = first;
      first = undefined;
      return s ? Promise.resolve(s) : store.read(opts);
    },
    update: (mutation, opts) => store.update(mutation, opts),
  };
}

/** A rebase run of an open PR (after a merge elsewhere, or `fleet:rebase`), else the task's own run. */
function runFor(task: Task): typeof runTask {
  const rebase = task.rebase && task.pr !== undefined ? { request: task.rebase, pr: task.pr } : undefined;
  return rebase
    ? (spec, workerDeps) => runRebase({ ...spec, pr: rebase.pr, request: rebase.request }, workerDeps)
    : runTask;
}

/** What the run is asked to do: the approved text, the trusted comments, the phases and limits of the config. */
function taskSpecFor(task: Task, gathered: Gathered, deps: ExecuteDeps): TaskSpec {
  const planPhase = deps.config.plan_phase && !task.approved;
  return {
    taskId: task.id,
    repo: `${deps.repo.owner}/${deps.repo.repo}`,
    issue: task.issue,
    title: gathered.title,
    body: gathered.body,
    comments: gathered.comments,
    coder: task.coder,
    model: task.model,
    branch: task.branch,
    // A review-loop run continues the PR's work: no new plan.
    planPhase: deps.config.plan_phase && !task.instructions,
    planApproval: deps.config.plan_approval,
    approved: task.approved ?? !planPhase,
    timeouts: {
      runMs: deps.config.timeouts.run_minutes * 60_000,
      stallMs: deps.config.timeouts.stall_minutes * 60_000,
    },
    attempt: task.attempts,
    split: gathered.special.split,
    extraPrompt: gathered.special.extraPrompt,
    earlierRuns: task.runs,
    runKind: runKindOf(task),
    maxFollowUps: deps.config.max_follow_ups,
    allowWorkflowChanges: deps.config.allow_workflow_changes,
    ...(deps.config.draft_pr ? { draftPr: true } : {}),
    ...(deps.config.ask_human.enabled && !task.review
      ? {
          askHuman: {
            expireAfterHours: deps.config.ask_human.expire_after_hours,
            ...(task.requestedBy ? { requestedBy: task.requestedBy } : {}),
          },
        }
      : {}),
    ...(task.question?.answer ? { question: task.question } : {}),
    ...(task.instructions && task.pr !== undefined ? { reviewPr: task.pr } : {}),
    // A review's subject is the diff (in extraPrompt); the PR's description is its author's, not a task for the agent.
    ...(task.review
      ? {
          prReview: task.review.pr,
          planPhase: false,
          title: `Review pull request #${task.review.pr}`,
          body: `Review the change of pull request #${task.review.pr}, read-only, as described below.`,
        }
      : {}),
  };
}

/**
 * The end of the plan phase (planning -> running) is shown on the issue at once and committed with the
 * task's next commit: its next heartbeat's, or its outcome's (a short run makes one commit of both).
 */
interface RunningAhead {
  show(): Promise<void>;
  /** Commits it now, if it is still waiting (a heartbeat). */
  commit(): Promise<void>;
}

function runningAhead(task: Task, deps: ExecuteDeps): RunningAhead {
  let waiting = false;
  return {
    async show() {
      waiting = true;
      await deps.queue.showAhead(task, "running");
    },
    async commit() {
      if (!waiting) return;
      waiting = false;
      await deps.queue.move(task.issue, "running", { taskId: task.id, from: ["planning"] });
    },
  };
}

/** The repository's workplace for its agents: their network, the setup steps, each run's limits. */
function containmentOf(config: FleetConfig): Pick<WorkerDeps, "network" | "setup" | "limits"> {
  const network = networkPolicyOf(config.network);
  return {
    network,
    setup: {
      commands: config.setup,
      cache: config.setup_cache,
      network: config.setup_network === undefined ? network : networkPolicyOf(config.setup_network),
    },
    limits: resourceLimitsOf(config),
  };
}

/** What the run works with; its planning/running progress moves the task in the state. */
function workerDepsFor(
  task: Task,
  adapter: AgentAdapter,
  gathered: Gathered,
  deps: ExecuteDeps,
  run: {
    credential?: { name: string; value: string };
    rotate: WorkerDeps["rotateCredential"];
    pool: WorkerDeps["credentialPool"];
    onContext: WorkerDeps["onContext"];
    signal: AbortSignal;
    confirmHeld: () => Promise<void>;
    clock: () => Date;
    ahead: RunningAhead;
  },
): WorkerDeps {
  let current: TaskState = task.state;
  return {
    github: deps.github,
    cloneUrl: deps.cloneUrl,
    gitAuth: deps.gitAuth,
    workDir: deps.workDir,
    adapter,
    credential: run.credential,
    rotateCredential: run.rotate,
    perTaskLimits: perTaskLimits(deps.config.budgets, task.coder),
    runLimits: {
      repeatedToolCalls: deps.config.runaway.repeated_tool_calls,
      idleTurns: deps.config.runaway.idle_turns,
      ...(deps.config.max_context_pct ? { maxContextPct: deps.config.max_context_pct } : {}),
    },
    credentialPool: run.pool,
    onContext: run.onContext,
    modelBaseUrl: deps.modelBaseUrl,
    agentEnv: deps.agentEnv,
    sandbox: deps.sandbox ?? deps.config.sandbox,
    ...containmentOf(deps.config),
    ...(deps.egressHosts ? { egressHosts: deps.egressHosts } : {}),
    ...(deps.config.coders[task.coder]?.options
      ? { coderOptions: deps.config.coders[task.coder]!.options }
      : {}),
    ...(deps.config.coders[task.coder]?.home === "inherit"
      ? { inheritHome: deps.userHome ?? homedir() }
      : {}),
    clock: run.clock,
    signal: run.signal,
    confirmHeld: run.confirmHeld,
    secrets: deps.secrets,
    // Listed for the prompt: the final report finds its earlier comment here, not by another listing.
    issueComments: gathered.issueComments,
    // The plan and the report go into the tracking comment, with the task's state edits.
    tracker: deps.tracker,
    ...(deps.local ? { local: true } : {}),
    onProgress: async (p) => {
      if (p.state !== current && (p.state === "planning" || p.state === "running")) {
        const from = current;
        current = p.state;
        if (from === "planning" && p.state === "running") return run.ahead.show();
        await deps.queue.move(task.issue, p.state, { taskId: task.id, from: [from] });
      }
    },
  };
}
