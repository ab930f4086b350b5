// The lifecycle as users are promised it, against the real queue and state code: a world of issues,
// pull requests and workers driving the same RepoQueue operations the app's handlers, the CLI and the
// worker drive (over the in-memory state transport), a small reference model of what each event must
// do, and the invariants checked after every step. lifecycle-model.test.ts runs random sequences of
// these commands; lifecycle-examples.test.ts keeps the sequences it shrank to as plain tests.
import fc from "fast-check";
import { answerWaitingTask } from "../../src/app/on-answer.ts";
import { taskForPullRequest } from "../../src/app/pull-request-tasks.ts";
import { renderTaskTable, taskRow } from "../../src/cli/format.ts";
import { type FleetConfig, modelFor, parseFleetConfig } from "../../src/core/config.ts";
import { dispatchHolder, renewLease, takeDispatched } from "../../src/core/leases.ts";
import {
  ACTIVE_STATES,
  CANCELLABLE_STATES,
  isTerminal,
  LIVE_STATES,
  RETRYABLE_STATES,
} from "../../src/core/lifecycle.ts";
import type { RunKind } from "../../src/core/run-history.ts";
import { nextWakeAt, wakeDue } from "../../src/core/scheduler.ts";
import type { FleetStateDoc } from "../../src/core/state-doc.ts";
import { TASK_STATES, type Task, type TaskState } from "../../src/core/task.ts";
import type { RunTotals } from "../../src/core/usage.ts";
import { budgetHoldEndsAt, budgetReadiness } from "../../src/economy/budgets.ts";
import { localDispatcher } from "../../src/queue/dispatcher.ts";
import { createRepoQueue, type RepoQueue } from "../../src/queue/repo-queue.ts";
import { tasksOnPullRequest, tasksToRebaseAfterMerge } from "../../src/queue/transitions.ts";
import { prMarker } from "../../src/render/pr-body.ts";
import { describeState, renderTrackingComment } from "../../src/render/tracking-comment.ts";
import {
  createMemoryRepo,
  createMemoryStateStore,
  type MemoryStateStore,
} from "../../src/state/memory-store.ts";
import { claimTaskState } from "../../src/worker/1-claim.ts";
import type { TaskOutcome } from "../../src/worker/3-attempt.ts";
import { recordOutcome } from "../../src/worker/5-record.ts";
import { startIn } from "../../src/worker/execute-task.ts";

export const TTL_MS = 15 * 60_000;
const START = Date.parse("2026-03-02T20:00:00.000Z");
const REPO = "octo/widgets";
const PERSON = "mona";
/** How `.github/fleet.yml` asks for plans: none, a plan phase before the work, or a plan waiting for `/fleet approve`. */
export type PlanMode = "off" | "phase" | "approval";
export const PLAN_MODES: readonly PlanMode[] = ["off", "phase", "approval"];
export type ClaimMode = "commit" | "ref";
export const CLAIM_MODES: readonly ClaimMode[] = ["commit", "ref"];

const fileConfig = (plan: PlanMode) => `dispatch: local
max_concurrent: 2
plan_phase: ${plan !== "off"}
plan_approval: ${plan === "approval"}
retries: { max: 2, backoff_seconds: 60 }
coders:
  codex: { max_concurrent: 1 }
budgets: { daily_usd: 6 }
`;

/** The coder and model a label names: `fleet:claude`, `fleet:claude:opus`, `fleet:codex`. */
export const SIDES = [
  { coder: "claude", model: undefined },
  { coder: "claude", model: "opus" },
  { coder: "codex", model: undefined },
] as const;

/** Issues 1-4; 3 depends on 1, 4 on 1 and 2. Sub-issues of a split are numbered from 100. */
const ISSUE_DEPS: Record<number, number[]> = { 1: [], 2: [], 3: [1], 4: [1, 2] };

/** How a worker's run ends, as the worker reports it. */
export const RESULTS = [
  "change",
  "no-change",
  "failed",
  "timeout",
  "rate-limited",
  "over-budget",
  "split-invalid",
  "asked",
] as const;
export type RunResult = (typeof RESULTS)[number];

/** Settings a person changes with `/fleet config set` between events. */
export const CONFIG_CHANGES = [
  ["max_concurrent", 1],
  ["max_concurrent", 3],
  ["max_concurrent", 0],
  ["coders.claude.max_concurrent", 1],
  ["plan_phase", true],
  ["plan_approval", true],
  ["plan_approval", false],
  ["plan_phase", false],
  ["retries.max", 0],
  ["budgets.daily_usd", 1],
  ["ask_human.expire_after_hours", 1],
] as const;

interface ModelIssue {
  number: number;
  deps: number[];
  closed: boolean;
  /** Labeled `fleet:split`: the default coder's run makes sub-issues, unless a coder label names that coder too (isSplitRun). */
  split: boolean;
  /** The coders its `fleet:<coder>` labels name. */
  coders: Set<string>;
  epic?: number;
}

interface ModelPr {
  number: number;
  taskId: string;
  branch: string;
  state: "open" | "merged" | "closed";
  /** When the run opened it (the webhook's `pull_request.created_at`, whole seconds as GitHub's). */
  createdAt: string;
  /** Its body as the run wrote it: Fleet's marker naming the task first. */
  body: string;
}

/** What the model knows of a task beyond the state document: its runs, its PR, what people did. */
interface ModelTask {
  id: string;
  issue: number;
  /** The figures of each run the workers finished, in order, with what the run was. */
  runs: Array<{ kind: RunKind; input: number; at: string }>;
  pr?: number;
  /** A person did something that may start an ended task again (label, retry). */
  restartable: boolean;
  /** The split's plan was applied (its sub-issues queued). */
  splitApplied: boolean;
  /** A person retried it since its last rate limit (`/fleet retry` does not wait for the reset). */
  retried: boolean;
  /** A person answered its agent's question since it last asked. */
  answered: boolean;
}

/** A run a worker is in the middle of: the task as claimed, and the config it was claimed under. */
interface SimRun {
  task: Task;
  config: FleetConfig;
  phase: "plan" | "work";
  /** The plan phase ended (no approval needed) and `running` waits for the next commit. */
  aheadWaiting: boolean;
  kind: RunKind;
  split: boolean;
  /**
   * The run is over and its end is on its way (a commit losing its races on a busy branch, recordOutcome
   * trying again within the lease): its outcome is made (a PR opened), its heartbeat stopped, and it
   * lands at a later step, or is given up once `heldUntilMs` passes (the lease as last renewed).
   */
  ending?: { outcome: TaskOutcome; lost: string | undefined; heldUntilMs: number };
}

interface SimWorker {
  name: string;
  alive: boolean;
  /** A worker cut off from the state (its beats fail); it goes on running until it hears again. */
  connected: boolean;
  /** SIGTERM received: it takes no more tasks. */
  stopping: boolean;
  runs: Map<string, SimRun>;
  /** The worker's own queue: its commits also claim the dispatched tasks it has room for (DispatchedTaker). */
  queue: RepoQueue;
  /** The worker's store: the world's, or (claims by ref) one of its own on the same branch, its own cache. */
  store: MemoryStateStore;
}

export class LifecycleViolation extends Error {}

/** How often each path was walked, over every world of a run (printed by the long run, to show what it covered). */
export const tally = new Map<string, number>();
const count = (what: string) => tally.set(what, (tally.get(what) ?? 0) + 1);

const fail = (message: string): never => {
  throw new LifecycleViolation(message);
};

/** The world one sequence runs in: the real queue over a memory state branch, and the model beside it. */
export class World {
  clockMs = START;
  readonly clock = () => new Date(this.clockMs);
  readonly store: MemoryStateStore;
  readonly fileConfig: FleetConfig;
  readonly queue: RepoQueue;
  readonly issues = new Map<number, ModelIssue>();
  readonly prs = new Map<number, ModelPr>();
  readonly tasks = new Map<string, ModelTask>();
  readonly workers: SimWorker[] = [];
  private runSeq = 0;
  private prSeq = 500;
  private subSeq = 100;
  private workerSeq = 0;
  /** The step's log, for a failing sequence's report. */
  readonly log: string[] = [];

  private readonly repo = createMemoryRepo();

  /**
   * `claims`: how workers claim. "ref": by a ref of their own per dispatch (core/claims.ts), as over git,
   * each worker with a store (and cache) of its own, so the app's writes decide on state that may lack
   * a claim; "commit": a commit on the branch, every party on one store.
   */
  readonly claims: ClaimMode;

  constructor(plan: PlanMode = "off", claims: ClaimMode = "commit") {
    this.claims = claims;
    const parsed = parseFleetConfig(fileConfig(plan));
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
    this.fileConfig = parsed.config;
    this.store = this.newStore();
    this.queue = createRepoQueue({
      repo: REPO,
      store: this.store,
      fileConfig: this.fileConfig,
      dispatcher: localDispatcher,
      clock: this.clock,
      leaseTtlMs: TTL_MS,
    });
    for (const [n, deps] of Object.entries(ISSUE_DEPS))
      this.issues.set(Number(n), { number: Number(n), deps, closed: false, split: false, coders: new Set() });
    this.startWorker();
    this.startWorker();
  }

  now = (): string => this.clock().toISOString();
  async doc(): Promise<FleetStateDoc> {
    return (await this.store.read()).doc;
  }

  // ---- people, as the app's handlers act on their events ----

  /** `issues.labeled` with a coder label (onIssueLabeled). */
  async label(issue: number, side: number, priority: 0 | 1 | 2 | 3 | 4 = 2): Promise<void> {
    const iss = this.issues.get(issue);
    if (!iss) return;
    const { coder, model } = SIDES[side % SIDES.length]!;
    iss.coders.add(coder);
    await this.queue.enqueue({
      issue,
      title: `Issue ${issue}`,
      coder,
      model: modelFor(this.fileConfig, coder, model),
      labeledAt: this.now(),
      priority,
      dependsOn: iss.deps,
      requestedBy: PERSON,
      files: [],
      body: `Body of ${issue}${iss.deps.map((d) => `\nDepends on #${d}`).join("")}`,
      ...(iss.epic !== undefined ? { epic: iss.epic } : {}),
    });
    await this.learnTasks();
    for (const t of Object.values((await this.doc()).tasks))
      if (t.issue === issue && t.coder === coder) this.tasks.get(t.id)!.restartable = true;
  }

  /** `issues.labeled` with `fleet:split` (onSplitLabel): a planning task whose run makes sub-issues. */
  async labelSplit(issue: number): Promise<void> {
    const iss = this.issues.get(issue);
    if (!iss) return;
    iss.split = true;
    const coder = this.fileConfig.default_coder;
    await this.queue.enqueue({
      issue,
      title: `Issue ${issue}`,
      coder,
      model: modelFor(this.fileConfig, coder),
      labeledAt: this.now(),
      priority: 2,
      dependsOn: [],
      requestedBy: PERSON,
      body: `Body of ${issue}`,
    });
    await this.learnTasks();
    for (const t of Object.values((await this.doc()).tasks))
      if (t.issue === issue && t.coder === coder) this.tasks.get(t.id)!.restartable = true;
  }

  /** `issues.unlabeled` (a coder label) and `issues.closed` (onIssueEnded). */
  async endIssue(issue: number, how: { unlabel?: number; close?: boolean }): Promise<void> {
    const iss = this.issues.get(issue);
    if (!iss) return;
    const coder = how.unlabel === undefined ? undefined : SIDES[how.unlabel % SIDES.length]!.coder;
    if (how.close) iss.closed = true;
    if (coder) iss.coders.delete(coder);
    const doc = await this.queue.snapshot();
    const live = Object.values(doc.tasks).filter(
      (t) => t.issue === issue && CANCELLABLE_STATES.includes(t.state) && (!coder || t.coder === coder),
    );
    for (const t of live)
      await this.queue.move(t.issue, "cancelled", {
        reason: how.close ? "issue closed" : "label removed",
        taskId: t.id,
        from: [...CANCELLABLE_STATES],
      });
  }

  reopen(issue: number): void {
    const iss = this.issues.get(issue);
    if (iss) iss.closed = false;
  }

  /** `/fleet cancel|retry|approve` on the issue (onCommand). */
  async command(issue: number, what: "cancel" | "retry" | "approve"): Promise<Task[]> {
    if (what === "cancel")
      return this.queue.move(issue, "cancelled", {
        reason: `cancelled by @${PERSON}`,
        from: [...LIVE_STATES],
      });
    if (what === "retry") {
      const moved = await this.queue.move(issue, "queued", { from: [...RETRYABLE_STATES] });
      for (const t of moved) Object.assign(this.tasks.get(t.id)!, { restartable: true, retried: true });
      return moved;
    }
    return this.queue.move(issue, "queued", { from: ["awaiting-approval"], patch: { approved: true } });
  }

  /**
   * A maintainer's reply (or `/fleet answer [id]`) on the issue (onAnswer, onCommand): the waiting task it
   * names, or the only one; with two sides waiting and none named, nothing is answered.
   */
  async answer(issue: number, pick?: number): Promise<void> {
    const waiting = Object.values((await this.doc()).tasks).filter(
      (t) => t.issue === issue && t.state === "waiting",
    );
    const named = pick === undefined || waiting.length === 0 ? undefined : waiting[pick % waiting.length]!.id;
    const r = await answerWaitingTask(this.queue, issue, {
      text: "Blue, please.",
      by: PERSON,
      ...(named ? { taskId: named } : {}),
    });
    if ("answered" in r) this.tasks.get(r.answered)!.answered = true;
    if ("ambiguous" in r && waiting.length < 2)
      fail(`an answer on #${issue} found one waiting task ambiguous`);
    if ("none" in r && waiting.length === 1 && !named) fail(`an answer on #${issue} missed its waiting task`);
  }

  /** `/fleet <instructions>` in a review of an open PR (requestReviewRun). */
  async review(pr: ModelPr): Promise<Task[]> {
    const task = taskForPullRequest(await this.queue.snapshot(), {
      number: pr.number,
      head: pr.branch,
      createdAt: pr.createdAt,
      body: pr.body,
    });
    if (task?.state !== "pr-open") return [];
    return this.queue.move(task.issue, "queued", {
      taskId: task.id,
      from: ["pr-open"],
      patch: { instructions: `Rename it\n\n(from @${PERSON})`, pr: pr.number },
    });
  }

  /** `fleet:rebase` on a Fleet PR (onRebaseLabel). */
  async rebaseLabel(pr: ModelPr): Promise<void> {
    const task = taskForPullRequest(await this.queue.snapshot(), {
      number: pr.number,
      head: pr.branch,
      createdAt: pr.createdAt,
      body: pr.body,
    });
    if (task?.state !== "pr-open") return;
    await this.queue.move(task.issue, "queued", {
      taskId: task.id,
      from: ["pr-open"],
      patch: { rebase: { why: `@${PERSON} labeled \`fleet:rebase\``, onlyIfConflicting: false } },
    });
  }

  /**
   * A Fleet PR merged (afterFleetPrMerged): its task done, and each other open Fleet PR that GitHub
   * says no longer merges (`conflicting`, by PR) gets a rebase run.
   */
  async merge(pr: ModelPr, conflicting: (pr: number) => boolean): Promise<void> {
    const doc = await this.queue.snapshot();
    const task = taskForPullRequest(doc, {
      number: pr.number,
      head: pr.branch,
      createdAt: pr.createdAt,
      body: pr.body,
    });
    pr.state = "merged";
    for (const t of tasksOnPullRequest(doc, {
      number: pr.number,
      head: pr.branch,
      createdAt: pr.createdAt,
      body: pr.body,
    }))
      await this.queue.move(t.issue, "done", { taskId: t.id, patch: { pr: pr.number } });
    for (const other of tasksToRebaseAfterMerge(doc, { pr: pr.number, task })) {
      const open = this.prs.get(other.pr!)?.state === "open";
      if (!open || !conflicting(other.pr!)) continue;
      await this.queue.move(other.issue, "queued", {
        taskId: other.id,
        from: ["pr-open"],
        patch: { rebase: { why: `#${pr.number} was merged into \`main\``, onlyIfConflicting: true } },
      });
    }
  }

  /** A Fleet PR closed without merging (onPullRequest). */
  async closePr(pr: ModelPr): Promise<void> {
    const task = taskForPullRequest(await this.queue.snapshot(), {
      number: pr.number,
      head: pr.branch,
      createdAt: pr.createdAt,
      body: pr.body,
    });
    pr.state = "closed";
    if (!task) return;
    await this.queue.move(task.issue, "failed", {
      taskId: task.id,
      reason: `pull request #${pr.number} was closed without merging; comment \`/fleet retry\` to run it again`,
    });
  }

  /** `/fleet config set key=value`. */
  async configSet(key: string, value: number | boolean): Promise<void> {
    await this.queue.setConfig([{ key, value }], PERSON);
  }

  /** Time passes: connected workers beat as their timers would (a third of the lease), then the wake-up pass. */
  async advance(minutes: number): Promise<void> {
    let left = minutes * 60_000;
    while (left > 0) {
      const step = Math.min(left, TTL_MS / 3);
      this.clockMs += step;
      left -= step;
      this.giveUpLateEnds();
      for (const w of this.workers) if (w.alive && w.connected) await this.heartbeat(w);
    }
    await this.queue.schedule();
  }

  /**
   * The app's wake-up timer (repo-queues.ts armWake), armed at `armedMs` from the state then: when a
   * backoff, a rate limit, a lease, a previous run's stop or a budget hold has run out since, a pass.
   */
  async wake(armedMs: number): Promise<void> {
    const doc = await this.doc();
    const config = this.queue.config(doc);
    const armed = new Date(armedMs);
    const at = [
      nextWakeAt(Object.values(doc.tasks), config, armed.toISOString()),
      budgetHoldEndsAt(config.budgets, doc.ledger, Object.values(doc.tasks), armed),
    ]
      .filter((t): t is string => t !== undefined)
      .sort()[0];
    if (at !== undefined && Date.parse(at) <= this.clockMs) await this.queue.schedule();
  }

  // ---- workers, as executeTask drives a run ----

  private newStore(): MemoryStateStore {
    return createMemoryStateStore({
      repo: this.repo,
      branch: "fleet/state",
      clock: this.clock,
      claimRefs: this.claims === "ref",
    });
  }

  startWorker(): SimWorker {
    const name = `local:host:${++this.workerSeq}`;
    const store = this.claims === "ref" ? this.newStore() : this.store;
    const w: SimWorker = {
      name,
      store,
      alive: true,
      connected: true,
      stopping: false,
      runs: new Map(),
      // As local-worker.ts's queueFor: a run's end commit claims the task its freed slot was given.
      queue: createRepoQueue({
        repo: REPO,
        store,
        fileConfig: this.fileConfig,
        dispatcher: localDispatcher,
        clock: this.clock,
        leaseTtlMs: TTL_MS,
        taker: {
          take: (doc) =>
            w.alive && w.connected && !w.stopping
              ? takeDispatched(doc, {
                  holder: name,
                  from: dispatchHolder("local"),
                  now: this.clock(),
                  ttlMs: TTL_MS,
                  startIn: startIn(this.queue.config(doc)),
                  concurrency: WORKER_CONCURRENCY,
                  // As the worker (hand-off.ts): every run it has going counts, whatever the state says
                  // of its task (a cancel its heartbeat has not heard yet), and is not taken twice.
                  inHand: new Set(w.runs.keys()),
                })
              : null,
          taken: (tasks, snapshot) => {
            count("claimed in the worker's own commit");
            for (const t of tasks) this.adopt(w, t, this.queue.config(snapshot.doc));
          },
        },
      }),
    };
    this.workers.push(w);
    return w;
  }

  /** A worker's poll (local-worker.ts): the wake-up pass when due, then claims of dispatched tasks. */
  async poll(w: SimWorker): Promise<void> {
    if (!w.alive || !w.connected) return;
    let doc = await this.doc();
    if (wakeDue(Object.values(doc.tasks), this.queue.config(doc), this.now())) {
      await this.queue.schedule();
      doc = await this.doc();
    }
    const config = this.queue.config(doc);
    const waiting = Object.values(doc.tasks).filter(
      (t) => t.state === "dispatched" && t.lease?.holder === dispatchHolder("local") && !w.runs.has(t.id),
    );
    for (const t of waiting) {
      if (w.runs.size >= WORKER_CONCURRENCY) break;
      const claimed = await claimTaskState(w.store, t.id, w.name, this.clock(), TTL_MS, startIn(config));
      if (claimed) count(`claimed by a poll (${this.claims})`);
      if (claimed) this.adopt(w, claimed.task, config);
    }
  }

  /** The worker starts the run of a task it claimed (by a poll, or in a commit of its own). */
  private adopt(w: SimWorker, task: Task, config: FleetConfig): void {
    // No task runs twice at once: nobody else still at work on it.
    for (const other of this.workers)
      if (other !== w && other.alive && other.connected && other.runs.has(task.id))
        fail(`${task.id} claimed by ${w.name} while ${other.name} still runs it`);
    if (w.runs.has(task.id)) fail(`${task.id} claimed by ${w.name} twice at once`);
    const iss = this.issues.get(task.issue);
    const split = iss?.split === true && !iss.coders.has(task.coder) && !task.instructions && !task.rebase;
    const kind: RunKind = task.rebase ? "rebase" : task.instructions ? "review" : split ? "split" : "work";
    // A review round has no plan phase: claimed in planning, it shows running at once (committed later).
    const planning = task.state === "planning" && kind === "work";
    w.runs.set(task.id, {
      task,
      config,
      phase: planning ? "plan" : "work",
      aheadWaiting: task.state === "planning" && !planning && !split,
      split,
      kind,
    });
  }

  /** A heartbeat of each of the worker's runs (startHeartbeat's beat): renewed, or the run stops. */
  async heartbeat(w: SimWorker): Promise<void> {
    for (const [taskId, run] of [...w.runs]) {
      // A run whose end is on its way has stopped its heartbeat.
      if (run.ending) continue;
      let refused: "cancelled" | "gone" | undefined;
      await w.store.update(({ doc }) => {
        const renewed = renewLease(doc, taskId, { holder: w.name, now: this.clock(), ttlMs: TTL_MS });
        refused = renewed.ok ? undefined : renewed.reason;
        return renewed.ok ? renewed : null;
      });
      if (!refused && run.aheadWaiting) {
        run.aheadWaiting = false;
        await w.queue.move(run.task.issue, "running", { taskId, from: ["planning"] });
      }
      if (refused)
        await this.endRun(w, taskId, "aborted", refused === "cancelled" ? "cancelled" : "lease lost");
    }
  }

  /** The plan phase ended and no approval is asked: the work phase starts (committed with the next commit). */
  progress(w: SimWorker, taskId: string): void {
    const run = w.runs.get(taskId);
    if (run?.phase !== "plan" || run.config.plan_approval || run.ending) return;
    run.phase = "work";
    run.aheadWaiting = true;
  }

  /** The worker process dies with its agents (kill -9): its runs never report. */
  crash(w: SimWorker): void {
    w.alive = false;
    w.runs.clear();
  }

  /** SIGTERM: the worker stops its agents; their tasks go back to the queue. */
  async shutdown(w: SimWorker): Promise<void> {
    w.stopping = true;
    // A run whose end is on its way: the stop waits for it (within its lease); the others are stopped.
    for (const [taskId, run] of [...w.runs])
      if (run.ending) await this.land(w, taskId);
      else await this.endRun(w, taskId, "aborted", undefined);
    w.alive = false;
  }

  /**
   * A run's end as the worker records it (recordOutcome), with the figures the gateway read. Before it
   * pushes, the worker reads the state (confirmHeld): a run whose task was cancelled or taken over
   * stops instead of publishing, and one that cannot read the state publishes nothing and fails.
   */
  async finish(w: SimWorker, taskId: string, result: RunResult, late = false): Promise<void> {
    if (w.runs.get(taskId)?.ending) return;
    if (result === "change" && !w.connected) return this.endRun(w, taskId, "unconfirmed", undefined);
    if (result === "change") {
      const seen = renewLease(await this.doc(), taskId, { holder: w.name, now: this.clock(), ttlMs: TTL_MS });
      if (!seen.ok)
        return this.endRun(w, taskId, "aborted", seen.reason === "cancelled" ? "cancelled" : "lease lost");
    }
    const run = w.runs.get(taskId);
    const lease = (await this.doc()).tasks[taskId]?.lease;
    if (!late || !run || !w.connected || lease?.holder !== w.name)
      return this.endRun(w, taskId, result, undefined);
    // Its end is made (the PR opened) and on its way: it lands at a later step (land), or is given up.
    run.ending = {
      outcome: await this.outcomeFor(run, result),
      lost: undefined,
      heldUntilMs: Date.parse(lease.expiresAt),
    };
    count("a run's end on its way");
  }

  /**
   * A run's end that was on its way lands (its commit won a race at last), unless its worker is cut off
   * (it keeps trying) or died (it never lands); past its lease it was given up (giveUpLateEnds).
   */
  async land(w: SimWorker, taskId: string): Promise<void> {
    const run = w.runs.get(taskId);
    if (!run?.ending || !w.alive || !w.connected) return;
    const now = (await this.doc()).tasks[taskId];
    const pr = run.ending.outcome.pr ? this.prs.get(run.ending.outcome.pr.number) : undefined;
    count(
      `a run's end landed late on a ${now?.state ?? "gone"} task${pr && pr.state !== "open" ? ` (its PR ${pr.state} meanwhile)` : ""}`,
    );
    await this.recordEnd(w, taskId, run, run.ending.outcome, run.ending.lost);
  }

  /** Ends on their way whose lease ran out are given up (recordOutcome's deadline): the run is lost, its task held until the lease is seen expired. */
  private giveUpLateEnds(): void {
    for (const w of this.workers)
      for (const [taskId, run] of [...w.runs])
        if (run.ending && this.clockMs >= run.ending.heldUntilMs) {
          w.runs.delete(taskId);
          count("a run's end given up at its lease's end");
        }
  }

  /** The run at `pick` among every live worker's runs whose end is on its way, if any. */
  endingAt(pick: number): { worker: SimWorker; taskId: string } | undefined {
    const all = this.workers
      .filter((w) => w.alive)
      .flatMap((w) => [...w.runs].filter(([, r]) => r.ending).map(([taskId]) => ({ worker: w, taskId })));
    return all.length ? all[pick % all.length] : undefined;
  }

  private totals(seq: number, model: string): RunTotals {
    return {
      usage: { input: 1000 * seq + 7, output: 10 * seq, cacheRead: 3, cacheWrite: 1, reasoning: 0 },
      costUsd: 0.5,
      turns: 2,
      durationMs: 60_000,
      model,
      credential: "ANTHROPIC_API_KEY",
    };
  }

  /** The outcome the worker reports for `result`, with the gateway's figures (and the agent's own, off by one). */
  private async outcomeFor(run: SimRun, result: RunResult | "aborted" | "unconfirmed"): Promise<TaskOutcome> {
    const seq = ++this.runSeq;
    const totals = this.totals(seq, run.task.model);
    const agentTotals = { ...totals, usage: { ...totals.usage, input: totals.usage.input + 1 } };
    // A plan phase alone (it waits for approval) or a split's plan: the run is labelled so, however it ends.
    const planOnly = run.phase === "plan" && run.config.plan_approval && !run.task.approved;
    const kind: RunKind | undefined = run.split ? "split" : planOnly ? "plan" : undefined;
    const base = { logPath: "", artifacts: {}, agentTotals, ...(kind ? { kind } : {}) };
    if (run.split || planOnly) {
      const planTotals = totals;
      if (result === "aborted") return { ...base, outcome: "cancelled", reason: "stopped", planTotals };
      // The plan phase offers no ask_human tool: a plan (or split) run ends as if it finished.
      if (result === "unconfirmed" || result === "asked") result = "change";
      if (run.split && result === "change") {
        await this.applySplit(run.task);
        return { ...base, outcome: SPLIT_OUTCOME, planTotals };
      }
      if (run.split && (result === "no-change" || result === "split-invalid"))
        return { ...base, outcome: "failed", noRetry: true, reason: "invalid plan", planTotals };
      if (result === "change" || result === "no-change")
        return { ...base, outcome: "awaiting-approval", planTotals };
      return { ...base, ...failureOf(result), planTotals };
    }
    // A plan phase that went straight on to the work phase: one run, both phases.
    const planTotals = run.phase === "plan" ? this.totals(++this.runSeq, run.task.model) : undefined;
    const both = { ...base, totals, ...(planTotals ? { planTotals } : {}) };
    if (result === "aborted") return { ...both, outcome: "cancelled", reason: "stopped" };
    // A rebase that cannot confirm fails on its PR, like any failed rebase (rebase-run.ts).
    if (run.kind === "rebase")
      return this.rebaseOutcome(
        run,
        both,
        result === "unconfirmed" ? "failed" : result === "asked" ? "change" : result,
      );
    // The agent asked a person with its ask_human tool: the run ends waiting for the answer.
    if (result === "asked") return { ...both, outcome: "waiting", question: "Blue or red, @mona?" };
    if (result === "unconfirmed")
      return { ...both, outcome: "failed", reason: "could not confirm; nothing pushed" };
    if (result === "change") {
      // A review round adds to its PR; merged or closed meanwhile, it pushes nothing (reviewPrGone).
      if (run.kind === "review" && this.prs.get(run.task.pr ?? -1)?.state !== "open")
        return {
          ...both,
          outcome: "failed",
          noRetry: true,
          reason: "the PR was merged or closed; nothing pushed",
        };
      // A branch has one open PR: a push to it updates that one (openOrUpdatePullRequest).
      const branch = run.task.branch ?? `fleet/${run.task.issue}`;
      const open = [...this.prs.values()].find((p) => p.branch === branch && p.state === "open");
      const number = open?.number ?? ++this.prSeq;
      const createdAt = `${this.now().slice(0, 19)}Z`;
      const body = `${prMarker(run.task.id)}\nCloses #${run.task.issue}`;
      // Each publish writes the PR's body again (openOrUpdatePullRequest): the marker names its task.
      if (open) Object.assign(open, { taskId: run.task.id, body });
      else this.prs.set(number, { number, taskId: run.task.id, branch, state: "open", createdAt, body });
      this.tasks.get(run.task.id)!.pr = number;
      return {
        ...both,
        outcome: "pr-opened",
        pr: { number, url: `https://github.test/pull/${number}`, head: branch },
        artifacts: { result: { status: "done", summary: "Changed it." } },
      };
    }
    if (result === "no-change")
      return { ...both, outcome: "no-changes", reason: "The agent changed no files." };
    return { ...both, ...failureOf(result) };
  }

  /**
   * A rebase run (rebase-run.ts): its PR merged or closed before it started ends it at once; otherwise it
   * stays on its PR however the rebase went (a failure is said on the PR).
   */
  private rebaseOutcome(run: SimRun, both: Omit<TaskOutcome, "outcome">, result: RunResult): TaskOutcome {
    const pr = run.task.pr === undefined ? undefined : this.prs.get(run.task.pr);
    if (pr?.state !== "open")
      return { ...both, outcome: pr?.state === "merged" ? "no-changes" : "failed", noRetry: true };
    const reason = result === "change" || result === "no-change" ? undefined : "Rebase failed: conflicts";
    return {
      ...both,
      outcome: "pr-opened",
      pr: { number: pr.number, url: `https://github.test/pull/${pr.number}`, head: pr.branch },
      ...(reason ? { reason } : {}),
    };
  }

  /** The split's plan becomes two sub-issues, the second depending on the first (applySplitOutcome). */
  private async applySplit(task: Task): Promise<void> {
    const first = ++this.subSeq;
    const second = ++this.subSeq;
    const sub = (deps: number[]): ModelIssue => ({
      number: 0,
      deps,
      closed: false,
      split: false,
      coders: new Set([task.coder]),
      epic: task.issue,
    });
    this.issues.set(first, { ...sub([]), number: first });
    this.issues.set(second, { ...sub([first]), number: second });
    for (const n of [first, second]) {
      await this.queue.enqueue({
        issue: n,
        title: `Issue ${n}`,
        coder: task.coder,
        model: task.model,
        priority: 2,
        dependsOn: this.issues.get(n)!.deps,
        requestedBy: task.requestedBy ?? "fleet",
        epic: task.issue,
      });
    }
    await this.learnTasks();
    this.tasks.get(task.id)!.splitApplied = true;
  }

  private async endRun(
    w: SimWorker,
    taskId: string,
    result: RunResult | "aborted" | "unconfirmed",
    lost: string | undefined,
  ): Promise<void> {
    const run = w.runs.get(taskId);
    if (!run) return;
    w.runs.delete(taskId);
    await this.recordEnd(w, taskId, run, await this.outcomeFor(run, result), lost);
  }

  /** The run's end recorded (recordOutcome), and what it must have done to the task. */
  private async recordEnd(
    w: SimWorker,
    taskId: string,
    run: SimRun,
    outcome: TaskOutcome,
    lost: string | undefined,
  ): Promise<void> {
    w.runs.delete(taskId);
    const recorded = outcome.totals ?? outcome.planTotals;
    const before = (await this.doc()).tasks[taskId];
    const owned = before?.lease?.holder === w.name;
    await recordOutcome(
      run.task,
      outcome,
      { queue: w.queue, config: run.config, clock: this.clock, holder: w.name },
      lost,
    );
    if (recorded && before) {
      const input = (outcome.totals?.usage.input ?? 0) + (outcome.planTotals?.usage.input ?? 0);
      this.tasks.get(taskId)!.runs.push({ kind: outcome.kind ?? run.kind, input, at: this.now() });
    }
    const after = (await this.doc()).tasks[taskId];
    if (!before || !after) return;
    count(
      `run ended: ${outcome.kind ?? run.kind} ${outcome.outcome}${owned ? "" : " (task moved on meanwhile)"} -> ${after.state}`,
    );
    if (owned) this.expectAfterOwnRun(run, outcome, before, after, lost);
    else if (after.state !== before.state && !scheduled(before.state, after.state))
      fail(`${taskId}: a run that no longer held the task moved it ${before.state} -> ${after.state}`);
  }

  /** What the run's end must do to the task it still held (the promises in the README's lifecycle). */
  private expectAfterOwnRun(
    run: SimRun,
    outcome: TaskOutcome,
    before: Task,
    after: Task,
    lost?: string,
  ): void {
    const onPr = run.kind === "review" || run.kind === "rebase";
    const retriesLeft = before.attempts <= run.config.retries.max;
    let want: TaskState;
    switch (outcome.outcome) {
      case "pr-opened":
        want = "pr-open";
        break;
      case "no-changes":
        want = onPr ? "pr-open" : "failed";
        break;
      case "awaiting-approval":
        want = "awaiting-approval";
        break;
      case "waiting":
        want = "waiting";
        break;
      case "rate-limited":
        want = "rate-limited";
        break;
      case "over-budget":
        want = onPr ? "pr-open" : "failed";
        break;
      case "cancelled":
        want = lost === "cancelled" ? "cancelled" : "queued";
        break;
      default:
        if ((outcome.outcome as string) === SPLIT_OUTCOME) want = "done";
        else want = retriesLeft && !outcome.noRetry ? "queued" : onPr ? "pr-open" : "failed";
    }
    const got = after.state;
    if (got !== want && !(want === "queued" && scheduled("queued", got)))
      fail(
        `${before.id}: ${run.kind} run ended ${outcome.outcome}${lost ? ` (${lost})` : ""}: expected ${want}, got ${got}`,
      );
    // Review instructions and a rebase request are used once, unless the run is tried again.
    if (got === "pr-open" && (after.instructions !== undefined || after.rebase !== undefined))
      fail(`${before.id}: back on its PR with a request left over`);
    if (want === "queued" && outcome.outcome !== "cancelled" && run.kind === "review" && !after.instructions)
      fail(`${before.id}: the retried review round lost its instructions`);
  }

  /** Tasks the state has that the model does not know yet. */
  async learnTasks(): Promise<void> {
    for (const t of Object.values((await this.doc()).tasks))
      if (!this.tasks.has(t.id))
        this.tasks.set(t.id, {
          id: t.id,
          issue: t.issue,
          runs: [],
          restartable: true,
          splitApplied: false,
          retried: false,
          answered: false,
        });
  }

  /** The run at `pick` among every live worker's runs (round robin), if any. */
  runAt(pick: number): { worker: SimWorker; taskId: string } | undefined {
    const all = this.workers
      .filter((w) => w.alive)
      .flatMap((w) => [...w.runs.keys()].map((taskId) => ({ worker: w, taskId })));
    return all.length ? all[pick % all.length] : undefined;
  }

  openPrAt(pick: number): ModelPr | undefined {
    const open = [...this.prs.values()].filter((p) => p.state === "open");
    return open.length ? open[pick % open.length] : undefined;
  }

  /** A task waits for a previous run to stop only while that run is still going (or its worker died unheard). */
  private checkStopping(tasks: readonly Task[], step: string): void {
    for (const t of tasks) {
      if (!t.stopping || Date.parse(t.stopping.until) <= this.clockMs) continue;
      const holder = this.workers.find((w) => w.name === t.stopping!.holder);
      if (holder?.alive && !holder.runs.has(t.id))
        fail(`${step}: ${t.id} waits for ${holder.name}'s run to stop, which has stopped and said so`);
    }
  }

  // ---- the invariants, after every step ----

  async check(before: FleetStateDoc, step: string): Promise<void> {
    const doc = await this.doc();
    const tasks = Object.values(doc.tasks);
    const config = this.queue.config(doc);
    for (const t of tasks) {
      const m = this.tasks.get(t.id) ?? fail(`${step}: the model does not know ${t.id}`);
      const was = before.tasks[t.id];
      checkDone(t, m, this.prs, step);
      checkDependencies(t, was, tasks, step);
      checkRuns(t, m, step);
      checkLease(t, step);
      // An ended task starts again only after a person asked (a label, a retry).
      if (was && isTerminal(was.state) && !isTerminal(t.state) && !m.restartable)
        fail(`${step}: ${t.id} left ${was.state} for ${t.state} without a person's retry`);
      if (isTerminal(t.state) && (!was || !isTerminal(was.state))) m.restartable = false;
      if (was && was.state !== t.state) count(`${was.state} -> ${t.state}`);
      const prClosed = m.pr !== undefined && this.prs.get(m.pr)?.state === "closed";
      checkQuestion(t, was, m, config, this.clockMs, step, prClosed);
      if (t.reason?.startsWith("held:") && t.reason !== was?.reason) count("held by a budget");
      // A rate-limited task waits for the reset, unless a person retried it.
      if (t.state === "rate-limited") m.retried = false;
      if (was?.state === "rate-limited" && ACTIVE_STATES.has(t.state) && !m.retried)
        if (Date.parse(was.resetAt ?? "") > this.clockMs)
          fail(`${step}: ${t.id} ran before its rate limit reset at ${was.resetAt}`);
      await checkShown(t, step);
    }
    checkSlots(before, doc, config, step);
    checkBudgets(before, doc, config, this.clock(), step);
    this.checkStopping(tasks, step);
    checkNoIdleSlot(doc, config, this.clock(), step);
    checkLedger(doc, this.tasks, step);
  }
}

/**
 * 7. A waiting task holds its agent's question (no answer yet) and no slot; it leaves for the queue
 * only with a person's answer, and fails on its own only once the question expired (a person closing
 * the PR a review round asked on fails it too: nothing is left to answer for).
 */
function checkQuestion(
  t: Task,
  was: Task | undefined,
  m: ModelTask,
  config: FleetConfig,
  nowMs: number,
  step: string,
  prClosed: boolean,
): void {
  if (t.state === "waiting") {
    if (!t.question?.text || t.question.answer) fail(`${step}: ${t.id} waits with no open question`);
    if (t.lease) fail(`${step}: ${t.id} waits for an answer holding a lease`);
    if (was?.state !== "waiting") m.answered = false;
  }
  if (was?.state !== "waiting" || t.state === "waiting") return;
  if (t.state === "queued" || ACTIVE_STATES.has(t.state)) {
    if (!m.answered) fail(`${step}: ${t.id} left waiting for ${t.state} without an answer`);
    if (!t.question?.answer) fail(`${step}: ${t.id} was answered, but the answer is not on the task`);
  }
  // Nothing but the question's expiry fails a waiting task.
  if (t.state === "failed" && !prClosed) {
    const asked = Date.parse(was.question?.askedAt ?? was.updatedAt);
    if (nowMs < asked + config.ask_human.expire_after_hours * 3600_000)
      fail(`${step}: ${t.id} failed while its question could still be answered`);
  }
}

/** The split's outcome as the worker reports it. */
export const SPLIT_OUTCOME: TaskOutcome["outcome"] = "split";

function failureOf(result: RunResult): Pick<TaskOutcome, "outcome" | "reason" | "rateLimit" | "noRetry"> {
  switch (result) {
    case "timeout":
      return { outcome: "timeout", reason: "ran too long" };
    case "rate-limited":
      return { outcome: "rate-limited", reason: "limited", rateLimit: { retryAfterSeconds: 600 } };
    case "over-budget":
      return { outcome: "over-budget", reason: "stopped: over the per-task ceiling" };
    default:
      return { outcome: "failed", reason: "the agent failed" };
  }
}

/** What a scheduling pass does to a queued task: dispatch it (and a worker's own commit may claim it), or block it. */
const scheduled = (from: TaskState, to: TaskState): boolean =>
  from === "queued" && (to === "dispatched" || to === "blocked" || to === "planning" || to === "running");

/** Tasks a worker runs at once. */
const WORKER_CONCURRENCY = 2;

/** 1. Done only after its PR merged (a split: once its plan was applied), never while its PR is open; a merged PR's task is done. */
function checkDone(t: Task, m: ModelTask, prs: Map<number, ModelPr>, step: string): void {
  const pr = m.pr === undefined ? undefined : prs.get(m.pr);
  if (t.state === "done") {
    if (pr?.state === "open") fail(`${step}: ${t.id} is done while its PR #${pr.number} is open`);
    if (pr?.state !== "merged" && !m.splitApplied)
      fail(
        `${step}: ${t.id} is done, but its PR was not merged${pr ? ` (#${pr.number} is ${pr.state})` : " (it has none)"}`,
      );
  } else if (pr?.state === "merged" && t.pr === pr.number)
    fail(`${step}: ${t.id}'s PR #${pr.number} was merged, but it is ${t.state}`);
}

/** Whether `issue` counts as done for its dependents: a done task, and (an epic) every sub-issue done. */
function issueDone(issue: number, tasks: readonly Task[], seen = new Set<number>()): boolean {
  if (seen.has(issue)) return false;
  seen.add(issue);
  if (!tasks.some((t) => t.issue === issue && t.state === "done")) return false;
  const subs = new Set(tasks.filter((t) => t.epic === issue).map((t) => t.issue));
  return [...subs].every((s) => issueDone(s, tasks, seen));
}

/**
 * 2. A task becomes ready (unblocked, or started) only while every dependency is done. Checked when it
 * does: an issue's done-ness can be taken back later (split into sub-issues that are not done yet).
 */
function checkDependencies(t: Task, was: Task | undefined, tasks: readonly Task[], step: string): void {
  const started = ACTIVE_STATES.has(t.state) && !(was && ACTIVE_STATES.has(was.state));
  const unblocked = was?.state === "blocked" && (t.state === "queued" || started);
  if (!started && !unblocked) return;
  for (const dep of t.dependsOn)
    if (!issueDone(dep, tasks)) fail(`${step}: ${t.id} (#${t.issue}) became ready while #${dep} is not done`);
}

/** 4. Each run once, labelled as what it was; the task's totals are the sum of its runs. */
function checkRuns(t: Task, m: ModelTask, step: string): void {
  const real = (t.runs ?? []).map((r) => `${r.kind}:${r.totals.usage.input}`);
  const want = m.runs.map((r) => `${r.kind}:${r.input}`);
  if (real.join(",") !== want.join(","))
    fail(`${step}: ${t.id} has runs [${real.join(", ")}], the workers ran [${want.join(", ")}]`);
  const sum = (t.runs ?? []).reduce((a, r) => a + r.totals.usage.input, 0);
  if ((t.totals?.usage.input ?? 0) !== sum)
    fail(`${step}: ${t.id}'s totals say ${t.totals?.usage.input ?? 0} input tokens, its runs ${sum}`);
  // The gateway's figures are counted, never the agent's own (which differ by one here).
  if ((t.runs ?? []).some((r) => r.totals.usage.input % 1000 !== 7 && r.totals.usage.input % 1000 !== 14))
    fail(`${step}: ${t.id} counted the agent's own figures`);
}

/** 3. A lease exactly while the task holds a slot. */
function checkLease(t: Task, step: string): void {
  if (ACTIVE_STATES.has(t.state) !== (t.lease !== undefined))
    fail(`${step}: ${t.id} is ${t.state} ${t.lease ? "with" : "without"} a lease`);
}

/** 3. A dispatch never takes more slots than max_concurrent or a coder's cap; no slot is held twice. */
function checkSlots(before: FleetStateDoc, doc: FleetStateDoc, config: FleetConfig, step: string): void {
  const active = Object.values(doc.tasks).filter((t) => ACTIVE_STATES.has(t.state));
  const slots = active.map((t) => t.lease?.slot);
  if (new Set(slots).size !== slots.length) fail(`${step}: a slot is held twice: ${slots.join(", ")}`);
  const dispatched = active.filter(
    (t) => t.state === "dispatched" && before.tasks[t.id]?.state !== "dispatched",
  );
  if (dispatched.length === 0) return;
  if (active.length > config.max_concurrent)
    fail(
      `${step}: dispatched with ${active.length} tasks holding slots, max_concurrent ${config.max_concurrent}`,
    );
  for (const t of dispatched) {
    const cap = config.coders[t.coder]?.max_concurrent;
    const mine = active.filter((a) => a.coder === t.coder).length;
    if (cap !== undefined && mine > cap)
      fail(`${step}: ${mine} ${t.coder} tasks hold slots, its cap is ${cap}`);
  }
}

/** The scheduler leaves no slot free while a task that may start waits in the queue. */
function checkNoIdleSlot(doc: FleetStateDoc, config: FleetConfig, now: Date, step: string): void {
  const tasks = Object.values(doc.tasks);
  const active = tasks.filter((t) => ACTIVE_STATES.has(t.state));
  if (active.length >= config.max_concurrent) return;
  const gate = budgetReadiness(config.budgets, doc.ledger, now);
  const waiting = tasks.find((t) => {
    if (t.state !== "queued") return false;
    if (Date.parse(t.resetAt ?? "") > now.getTime() || Date.parse(t.stopping?.until ?? "") > now.getTime())
      return false;
    const coder = config.coders[t.coder];
    const busy = active.filter((a) => a.coder === t.coder).length;
    if (!coder?.enabled || busy >= (coder.max_concurrent ?? Number.POSITIVE_INFINITY)) return false;
    return gate(t).ready && t.dependsOn.every((d) => issueDone(d, tasks));
  });
  if (waiting)
    fail(
      `${step}: ${waiting.id} waits in the queue while ${active.length} of ${config.max_concurrent} slots are busy (${JSON.stringify({ reason: waiting.reason, resetAt: waiting.resetAt, stopping: waiting.stopping, now: now.toISOString() })})`,
    );
}

/** No dispatch while a daily or monthly budget was already spent when the step began. */
function checkBudgets(
  before: FleetStateDoc,
  doc: FleetStateDoc,
  config: FleetConfig,
  now: Date,
  step: string,
): void {
  const gate = budgetReadiness(config.budgets, before.ledger, now);
  for (const t of Object.values(doc.tasks)) {
    if (t.state !== "dispatched" || before.tasks[t.id]?.state === "dispatched") continue;
    const r = gate(t);
    if (!r.ready) fail(`${step}: ${t.id} was dispatched although ${r.reason}`);
  }
}

/** 4. The daily ledger is the sum of the runs of that day. */
function checkLedger(doc: FleetStateDoc, model: Map<string, ModelTask>, step: string): void {
  const byDay = new Map<string, number>();
  for (const m of model.values())
    for (const r of m.runs) byDay.set(r.at.slice(0, 10), (byDay.get(r.at.slice(0, 10)) ?? 0) + r.input);
  for (const day of new Set([...byDay.keys(), ...Object.keys(doc.ledger)])) {
    const booked = Object.values(doc.ledger[day] ?? {}).reduce((a, e) => a + e.usage.input, 0);
    if (booked !== (byDay.get(day) ?? 0))
      fail(
        `${step}: the ledger of ${day} holds ${booked} input tokens, that day's runs ${byDay.get(day) ?? 0}`,
      );
  }
}

/** 6. The tracking comment and `fleet tasks` show the state. */
async function checkShown(t: Task, step: string): Promise<void> {
  if (!TASK_STATES.includes(t.state)) fail(`${step}: ${t.id} is in an unknown state ${t.state}`);
  const view = { taskKey: t.id, taskId: t.id, state: t.state, coder: t.coder, model: t.model };
  const comment = renderTrackingComment(view);
  if (!comment.includes(`\`${t.id}\`: ${describeState(view)}`) || comment.includes("undefined"))
    fail(`${step}: the tracking comment cannot show ${t.state}`);
  const table = renderTaskTable([await taskRow(t, Date.parse(t.updatedAt), "/nonexistent")]);
  if (!table.includes(t.state)) fail(`${step}: fleet tasks cannot show ${t.state}`);
}

// ---- commands: one per entry point, each applied to the world and checked ----

type Cmd = fc.AsyncCommand<object, World>;

abstract class Step implements Cmd {
  check(): boolean {
    return true;
  }
  abstract apply(w: World): Promise<void>;
  abstract toString(): string;
  async run(_m: object, w: World): Promise<void> {
    w.clockMs += 1000;
    await w.wake(w.clockMs - 1000);
    const before = await w.doc();
    w.log.push(this.toString());
    await this.apply(w);
    await w.check(before, `step ${w.log.length} (${this.toString()})`);
  }
}

export class Label extends Step {
  readonly issue: number;
  readonly side: number;
  readonly priority: 0 | 1 | 2 | 3 | 4;
  constructor(issue: number, side: number, priority: 0 | 1 | 2 | 3 | 4 = 2) {
    super();
    this.issue = issue;
    this.side = side;
    this.priority = priority;
  }
  apply = (w: World) => w.label(this.issue, this.side, this.priority);
  toString = () =>
    `label #${this.issue} ${sideName(this.side)}${this.priority !== 2 ? ` p${this.priority}` : ""}`;
}

export class LabelSplit extends Step {
  readonly issue: number;
  constructor(issue: number) {
    super();
    this.issue = issue;
  }
  apply = (w: World) => w.labelSplit(this.issue);
  toString = () => `label #${this.issue} fleet:split`;
}

export class Unlabel extends Step {
  readonly issue: number;
  readonly side: number;
  constructor(issue: number, side: number) {
    super();
    this.issue = issue;
    this.side = side;
  }
  apply = (w: World) => w.endIssue(this.issue, { unlabel: this.side });
  toString = () => `unlabel #${this.issue} ${sideName(this.side)}`;
}

export class CloseIssue extends Step {
  readonly issue: number;
  constructor(issue: number) {
    super();
    this.issue = issue;
  }
  apply = (w: World) => w.endIssue(this.issue, { close: true });
  toString = () => `close #${this.issue}`;
}

export class ReopenIssue extends Step {
  readonly issue: number;
  constructor(issue: number) {
    super();
    this.issue = issue;
  }
  apply = async (w: World) => w.reopen(this.issue);
  toString = () => `reopen #${this.issue}`;
}

export class Command extends Step {
  readonly issue: number;
  readonly what: "cancel" | "retry" | "approve";
  constructor(issue: number, what: "cancel" | "retry" | "approve") {
    super();
    this.issue = issue;
    this.what = what;
  }
  apply = async (w: World) => {
    const moved = await w.command(this.issue, this.what);
    if (this.what === "cancel")
      for (const t of moved) if (t.state !== "cancelled") fail(`cancel left ${t.id} ${t.state}`);
  };
  toString = () => `/fleet ${this.what} on #${this.issue}`;
}

export class Answer extends Step {
  readonly issue: number;
  readonly pick?: number;
  constructor(issue: number, pick?: number) {
    super();
    this.issue = issue;
    this.pick = pick;
  }
  apply = async (w: World) => {
    await w.answer(this.issue, this.pick);
  };
  toString = () =>
    `a maintainer answers on #${this.issue}${this.pick === undefined ? "" : ` naming waiting task ${this.pick}`}`;
}

export class Review extends Step {
  readonly pick: number;
  constructor(pick: number) {
    super();
    this.pick = pick;
  }
  apply = async (w: World) => {
    const pr = w.openPrAt(this.pick);
    if (pr) await w.review(pr);
  };
  toString = () => `/fleet review on open PR ${this.pick}`;
}

export class RebaseLabel extends Step {
  readonly pick: number;
  constructor(pick: number) {
    super();
    this.pick = pick;
  }
  apply = async (w: World) => {
    const pr = w.openPrAt(this.pick);
    if (pr) await w.rebaseLabel(pr);
  };
  toString = () => `fleet:rebase on open PR ${this.pick}`;
}

export class Merge extends Step {
  readonly pick: number;
  readonly conflicts: boolean;
  constructor(pick: number, conflicts: boolean) {
    super();
    this.pick = pick;
    this.conflicts = conflicts;
  }
  apply = async (w: World) => {
    const pr = w.openPrAt(this.pick);
    if (!pr) return;
    const before = await w.doc();
    const merged = before.tasks[pr.taskId];
    await w.merge(pr, () => this.conflicts);
    const after = await w.doc();
    count(`merge of a ${merged?.state ?? "taskless"} task's PR`);
    // The task whose run last published to the PR (its body's marker) is done once it merged, recorded on
    // it or not (its end on its way).
    const opener = after.tasks[pr.taskId];
    if (opener && opener.state !== "done")
      fail(`the merge of #${pr.number} left ${opener.id}, whose run published it, ${opener.state}`);
    if (
      merged &&
      Object.values(before.tasks).some(
        (t) => t.issue === merged.issue && t.id !== merged.id && t.state === "pr-open",
      )
    )
      count("merge of one A/B side while another waits on its PR");
    // The other sides of an A/B run are alternatives to what was merged: no rebase for them.
    for (const t of Object.values(after.tasks))
      if (merged && t.issue === merged.issue && t.id !== merged.id && t.rebase && !before.tasks[t.id]?.rebase)
        fail(`the merge of ${merged.id}'s PR queued a rebase of its A/B side ${t.id}`);
  };
  toString = () => `merge open PR ${this.pick}${this.conflicts ? " (others conflict)" : ""}`;
}

export class ClosePr extends Step {
  readonly pick: number;
  constructor(pick: number) {
    super();
    this.pick = pick;
  }
  apply = async (w: World) => {
    const pr = w.openPrAt(this.pick);
    if (pr) await w.closePr(pr);
  };
  toString = () => `close open PR ${this.pick} unmerged`;
}

export class ConfigSet extends Step {
  readonly change: number;
  constructor(change: number) {
    super();
    this.change = change;
  }
  apply = (w: World) => {
    const [key, value] = CONFIG_CHANGES[this.change % CONFIG_CHANGES.length]!;
    return w.configSet(key, value);
  };
  toString = () => {
    const [key, value] = CONFIG_CHANGES[this.change % CONFIG_CHANGES.length]!;
    return `/fleet config set ${key}=${value}`;
  };
}

export class Advance extends Step {
  readonly minutes: number;
  constructor(minutes: number) {
    super();
    this.minutes = minutes;
  }
  apply = (w: World) => w.advance(this.minutes);
  toString = () => `${this.minutes} minutes pass`;
}

/** Which worker: an index into every worker started so far. */
const workerAt = (w: World, n: number) => w.workers[n % w.workers.length]!;

export class Poll extends Step {
  readonly worker: number;
  constructor(worker: number) {
    super();
    this.worker = worker;
  }
  apply = (w: World) => w.poll(workerAt(w, this.worker));
  toString = () => `worker ${this.worker} polls`;
}

export class Beat extends Step {
  readonly worker: number;
  constructor(worker: number) {
    super();
    this.worker = worker;
  }
  apply = async (w: World) => {
    const sim = workerAt(w, this.worker);
    if (sim.alive && sim.connected) await w.heartbeat(sim);
  };
  toString = () => `worker ${this.worker} beats`;
}

export class Progress extends Step {
  readonly pick: number;
  constructor(pick: number) {
    super();
    this.pick = pick;
  }
  apply = async (w: World) => {
    const run = w.runAt(this.pick);
    if (run) w.progress(run.worker, run.taskId);
  };
  toString = () => `run ${this.pick} ends its plan phase`;
}

export class Finish extends Step {
  readonly pick: number;
  readonly result: RunResult;
  /** Its end's commit on its way (it loses its races for a while): it lands at a Land step. */
  readonly late: boolean;
  constructor(pick: number, result: RunResult, late = false) {
    super();
    this.pick = pick;
    this.result = result;
    this.late = late;
  }
  apply = async (w: World) => {
    // A worker cut off from the state finishes its run too, and reports late.
    const run = w.runAt(this.pick);
    if (run) await w.finish(run.worker, run.taskId, this.result, this.late);
  };
  toString = () => `run ${this.pick} ends: ${this.result}${this.late ? ", its end's commit on its way" : ""}`;
}

/** A run ends, and its end's commit is on its way: it lands at a Land step, or is given up. */
export class FinishLate extends Finish {
  constructor(pick: number, result: RunResult) {
    super(pick, result, true);
  }
}

export class Land extends Step {
  readonly pick: number;
  constructor(pick: number) {
    super();
    this.pick = pick;
  }
  apply = async (w: World) => {
    const run = w.endingAt(this.pick);
    if (run) await w.land(run.worker, run.taskId);
  };
  toString = () => `the end on its way ${this.pick} lands`;
}

export class Crash extends Step {
  readonly worker: number;
  constructor(worker: number) {
    super();
    this.worker = worker;
  }
  apply = async (w: World) => {
    w.crash(workerAt(w, this.worker));
    w.startWorker();
  };
  toString = () => `worker ${this.worker} killed (-9), another started`;
}

export class Shutdown extends Step {
  readonly worker: number;
  constructor(worker: number) {
    super();
    this.worker = worker;
  }
  apply = async (w: World) => {
    await w.shutdown(workerAt(w, this.worker));
    w.startWorker();
  };
  toString = () => `worker ${this.worker} stopped (SIGTERM), another started`;
}

export class Partition extends Step {
  readonly worker: number;
  readonly connected: boolean;
  constructor(worker: number, connected: boolean) {
    super();
    this.worker = worker;
    this.connected = connected;
  }
  apply = async (w: World) => {
    const sim = workerAt(w, this.worker);
    sim.connected = this.connected;
    if (this.connected && sim.alive) await w.heartbeat(sim);
  };
  toString = () =>
    `worker ${this.worker} ${this.connected ? "reaches the state again" : "is cut off from the state"}`;
}

const sideName = (side: number) => {
  const s = SIDES[side % SIDES.length]!;
  return `fleet:${s.coder}${s.model ? `:${s.model}` : ""}`;
};

/** The four issues, and the first two sub-issues a split makes (a step on one not made yet does nothing). */
const issue = fc.constantFrom(1, 2, 3, 4, 1, 2, 3, 4, 101, 102);
const pick = fc.nat({ max: 5 });
const worker = fc.nat({ max: 3 });
const w = <T>(weight: number, arbitrary: fc.Arbitrary<T>) => ({ weight, arbitrary });

/** Every entry point, with labels and worker steps weighted up so tasks get somewhere. */
export const commandArbitrary: fc.Arbitrary<Cmd> = fc.oneof(
  w(
    6,
    fc
      .tuple(issue, fc.nat({ max: 2 }), fc.constantFrom<0 | 1 | 2 | 3 | 4>(0, 2, 2, 4))
      .map(([i, s, p]) => new Label(i, s, p) as Cmd),
  ),
  w(
    1,
    issue.map((i) => new LabelSplit(i)),
  ),
  w(
    1,
    fc.tuple(issue, fc.nat({ max: 2 })).map(([i, s]) => new Unlabel(i, s)),
  ),
  w(
    1,
    issue.map((i) => new CloseIssue(i)),
  ),
  w(
    1,
    issue.map((i) => new ReopenIssue(i)),
  ),
  w(
    3,
    fc
      .tuple(issue, fc.constantFrom("cancel" as const, "retry" as const, "approve" as const))
      .map(([i, c]) => new Command(i, c)),
  ),
  w(
    8,
    pick.map((p) => new Review(p)),
  ),
  w(
    2,
    issue.map((i) => new Command(i, "approve")),
  ),
  w(
    3,
    fc.tuple(issue, fc.option(pick, { nil: undefined })).map(([i, p]) => new Answer(i, p)),
  ),
  w(
    1,
    pick.map((p) => new RebaseLabel(p)),
  ),
  w(
    4,
    fc.tuple(pick, fc.boolean()).map(([p, c]) => new Merge(p, c)),
  ),
  w(
    1,
    pick.map((p) => new ClosePr(p)),
  ),
  w(
    2,
    fc.nat({ max: CONFIG_CHANGES.length - 1 }).map((c) => new ConfigSet(c)),
  ),
  w(
    3,
    fc.constantFrom(1, 3, 11, 20, 60, 24 * 60).map((m) => new Advance(m)),
  ),
  w(
    8,
    worker.map((n) => new Poll(n)),
  ),
  w(
    2,
    worker.map((n) => new Beat(n)),
  ),
  w(
    2,
    pick.map((p) => new Progress(p)),
  ),
  w(
    6,
    fc.tuple(pick, fc.constantFrom(...RESULTS)).map(([p, r]) => new Finish(p, r)),
  ),
  w(
    6,
    fc
      .tuple(pick, fc.constantFrom<RunResult>("change", "change", "no-change"))
      .map(([p, r]) => new Finish(p, r)),
  ),
  w(
    3,
    fc
      .tuple(pick, fc.constantFrom<RunResult>("change", "change", ...RESULTS))
      .map(([p, r]) => new FinishLate(p, r)),
  ),
  w(
    4,
    pick.map((p) => new Land(p)),
  ),
  w(
    1,
    worker.map((n) => new Crash(n)),
  ),
  w(
    1,
    worker.map((n) => new Shutdown(n)),
  ),
  w(
    1,
    fc.tuple(worker, fc.boolean()).map(([n, c]) => new Partition(n, c)),
  ),
);

/** Runs `steps` in a fresh world, checking the invariants after each; throws a LifecycleViolation naming the step. */
export async function runSteps(steps: readonly Cmd[], plan: PlanMode = "off"): Promise<World> {
  const world = new World(plan);
  await world.learnTasks();
  for (const s of steps) await s.run({}, world);
  return world;
}
