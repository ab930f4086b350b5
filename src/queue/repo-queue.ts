import type { ConfigValue, DroppedOverride, FleetConfig } from "../core/config.ts";
import { dispatchHolder } from "../core/leases.ts";
import { canTransition } from "../core/lifecycle.ts";
import { queuePosition } from "../core/scheduler.ts";
import { emptyStateDoc, type FleetStateDoc } from "../core/state-doc.ts";
import { answersRequestAt, type Task, type TaskRequest, type TaskState } from "../core/task.ts";
import type { Mutation, StateSnapshot, StateStore } from "../state/store.ts";
import { syncBeads } from "./beads-sync.ts";
import type { Dispatcher } from "./dispatcher.ts";
import type { Tracker } from "./tracker.ts";
import {
  answerQuestion,
  applySchedule,
  effectiveConfig,
  endRun,
  enqueueTask,
  findTask,
  holdAfterStateReset,
  moveTask,
  noteIgnoredEdit,
  patchTask,
  type RunEnd,
  reclaimGoneRuns,
  repinTasks,
  resolvedConfig,
  type SetConfigOutcome,
  setConfigOverrides,
  setDependencies,
  type TaskChange,
  type TransitionResult,
  tasksOf,
} from "./transitions.ts";

export interface RepoQueueDeps {
  repo: string;
  store: StateStore;
  /** `.github/fleet.yml` as loaded; `config set` overrides in the state are applied on top. */
  fileConfig: FleetConfig;
  dispatcher: Dispatcher;
  tracker?: Tracker;
  clock?: () => Date;
  /** Lease holder name for dispatched tasks not yet claimed by a worker. */
  holder?: string;
  leaseTtlMs?: number;
  log?: (message: string) => void;
  /** Called with the state as every operation left it (applied or not), e.g. to arm a wake-up timer. */
  onState?: (doc: FleetStateDoc, config: FleetConfig) => void;
  /**
   * Stored `config set` overrides that no longer apply to this file config are removed from the state
   * in the next commit, each alone, and reported here (the app says so on the issue). Only a front door
   * whose file config is current should: a worker with a stale copy of the file would drop good ones.
   */
  onOverridesDropped?: (dropped: DroppedOverride[]) => Promise<void> | void;
  /** A worker's queue: every commit it writes also claims the dispatched tasks the worker has room for (see DispatchedTaker). */
  taker?: DispatchedTaker;
}

/**
 * How a worker takes dispatched tasks in its own commits (core/leases.ts takeDispatched): `take` runs
 * inside the compare-and-swap, after the scheduling pass, on each attempt's state; `taken` hears of the
 * tasks once the commit holding their claims is written, with the state as that commit left it.
 */
export interface DispatchedTaker {
  take(doc: FleetStateDoc): { doc: FleetStateDoc; taken: Task[]; messages: string[] } | null;
  taken(tasks: readonly Task[], snapshot: StateSnapshot): void;
}

/** States a task leaves before any worker has written to its tracking comment (in this round). */
const BEFORE_ANY_RUN: ReadonlySet<TaskState> = new Set<TaskState>(["queued", "blocked"]);

/** One reply per person per issue per hour to people who may not drive Fleet. */
export const REPLY_WINDOW_MS = 60 * 60_000;

export interface Outcome {
  applied: boolean;
  task?: Task;
  message?: string;
}

/** What `enqueue` takes: the task to queue for an issue. */
export interface EnqueueRequest extends TaskRequest {
  requestedBy: string;
  files?: string[];
  epic?: number;
  /** The issue's body as the labeler saw it: the title and body are pinned as the task's prompt. */
  body?: string | null;
  /**
   * When the label asking for the task was added: a task of the issue for the same coder and
   * model created or queued again since then already answers it (a repeated or late delivery, a
   * second replica, a sweep finding a relabel whose requeued run has ended), even if that task has
   * ended meanwhile (see answersRequestAt).
   */
  labeledAt?: string;
  /** The task is an agent review of this pull request. */
  review?: Task["review"];
}

/** How `move` moves: which tasks, with what reason, patch and extra change to the document. */
export interface MoveOptions {
  reason?: string;
  resetAt?: string;
  patch?: Partial<Task>;
  taskId?: string;
  from?: TaskState[];
  /** Only tasks this holds for, as the compare-and-swap sees them (e.g. still on the same PR). */
  when?: (task: Task) => boolean;
  /** More changes to the document in the same commit (e.g. the run's line in the token ledger). */
  alsoDoc?: (doc: FleetStateDoc) => FleetStateDoc;
  /**
   * A state passed through on the way when `to` cannot be reached directly but can from it, in the same
   * commit (a run's outcome from `planning` whose `running` was not committed yet).
   */
  via?: TaskState;
  /** The task's run is known to have stopped (its Actions run ended): a retry need not wait for it. */
  runOver?: boolean;
}

/**
 * The task queue of one repository: every operation is one compare-and-swap transition on the
 * repository state (beads mirror included), then its side effects (dispatch, tracking comments).
 * The app, the CLI and the workers all go through it.
 */
export class RepoQueue {
  /** The queue's clock (injected in tests), for handlers that compute times. */
  readonly now: () => Date;
  private readonly holder: string;
  private lastDoc: FleetStateDoc | undefined;
  private readonly deps: RepoQueueDeps;

  constructor(deps: RepoQueueDeps) {
    this.deps = deps;
    this.now = deps.clock ?? (() => new Date());
    this.holder = deps.holder ?? dispatchHolder(deps.dispatcher.mode);
  }

  /** The file config with the state's valid `config set` overrides. */
  readonly config = (doc: FleetStateDoc): FleetConfig => effectiveConfig(this.deps.fileConfig, doc);

  /** The state as this queue's last operation left it (no request); undefined before any. */
  lastState(): FleetStateDoc | undefined {
    return this.lastDoc;
  }

  async snapshot(): Promise<FleetStateDoc> {
    return (await this.deps.store.read()).doc;
  }

  /**
   * A scheduling pass on its own (reconcile, a config change, a worker's poll). `trustCacheMs`: a pass
   * that finds nothing to do on a state read at most this long ago is not checked on a fresh read (a
   * poller's next pass looks again anyway; see UpdateOptions).
   */
  async schedule(opts: { trustCacheMs?: number } = {}): Promise<Task[]> {
    const { result } = await this.commit(() => null, { schedule: true, ...opts });
    return result ? result.changes.map((c) => c.task) : [];
  }

  /** Runs whose worker process is gone go back to the queue (see reclaimGoneRuns), and are scheduled again in the same commit. */
  async reclaimGoneRuns(gone: ReadonlyArray<{ taskId: string; holder: string }>): Promise<Task[]> {
    const { result } = await this.commit((d) =>
      reclaimGoneRuns(d, gone, { now: this.iso(), retriesMax: this.config(d).retries.max }),
    );
    return result ? result.changes.map((c) => c.task) : [];
  }

  /** The state branch was deleted: the fresh state holds dispatches for a lease's length (see holdAfterStateReset). */
  async holdAfterReset(holdMs?: number): Promise<void> {
    await this.commit((d) => holdAfterStateReset(d, this.iso(), holdMs), { schedule: false });
  }

  /** Queues a task (see enqueueTask), unless a task made since the label was added already answers it. */
  async enqueue(input: EnqueueRequest): Promise<Outcome> {
    let created = false;
    const { labeledAt, ...request } = input;
    const since = labeledAt === undefined ? Number.NaN : Date.parse(labeledAt);
    const { doc } = await this.commit((d) => {
      created = false;
      const answered = tasksOf(d).some(
        (t) =>
          t.issue === input.issue &&
          t.coder === input.coder &&
          t.model === input.model &&
          answersRequestAt(t, since),
      );
      if (answered) return null;
      const r = enqueueTask(d, { ...request, repo: this.deps.repo, now: this.iso() });
      created = r.changes.length > 0;
      return r;
    });
    const task = findTask(doc, { issue: input.issue, coder: input.coder, model: input.model, live: true });
    return { applied: created, task };
  }

  /** Moves every live task of the issue (or just `taskId`) to `to`. */
  async move(issue: number, to: TaskState, opts: MoveOptions = {}): Promise<Task[]> {
    const moved: Task[] = [];
    await this.commit((d) => {
      const r = moveTasks(d, issue, to, opts, this.iso());
      moved.length = 0;
      moved.push(...(r?.changes.map((c) => c.task) ?? []));
      return r;
    });
    return moved;
  }

  /**
   * A person answers the question `taskId`'s agent asked: the task is queued again (and dispatched in
   * the same commit when a slot is free). Undefined when the task is not waiting for an answer.
   */
  async answer(taskId: string, text: string, by: string): Promise<Task | undefined> {
    const { result } = await this.commit((d) => answerQuestion(d, taskId, { text, by, now: this.iso() }));
    return result?.changes.find((c) => c.task.id === taskId)?.task;
  }

  /**
   * A worker's run of `taskId` ended (see endRun), with `alsoDoc`'s changes in the same commit (the run's
   * last context, its credentials' windows). The task as the commit left it; undefined when it is gone.
   */
  async endRun(
    taskId: string,
    end: Omit<RunEnd, "now">,
    alsoDoc?: (doc: FleetStateDoc) => FleetStateDoc,
    /** Past the store's usual retries, keep trying until then (see UpdateOptions.retryUntilMs). */
    retryUntilMs?: number,
  ): Promise<Task | undefined> {
    const { doc } = await this.commit(
      (d) => {
        const r = endRun(d, taskId, { ...end, now: this.iso() });
        return r && alsoDoc ? { ...r, doc: alsoDoc(r.doc) } : r;
      },
      { schedule: true, ...(retryUntilMs !== undefined ? { retryUntilMs } : {}) },
    );
    return doc.tasks[taskId];
  }

  /**
   * Shows `task` moved to `to` on its tracking comment before the move is committed: a worker's
   * planning -> running is committed with the task's next commit (see execute-task.ts).
   */
  async showAhead(task: Task, to: TaskState): Promise<void> {
    const doc = this.lastDoc ?? { ...emptyStateDoc(), tasks: { [task.id]: task } };
    await this.show([{ task: { ...task, state: to }, from: task.state }], doc);
  }

  /**
   * `config set`: checked against the file config and the overrides already stored (inside the
   * compare-and-swap, so two people setting at once are both checked against what the other wrote);
   * all or nothing. A scheduling pass follows in the same commit (a raised cap starts tasks now).
   */
  async setConfig(
    assignments: ReadonlyArray<{ key: string; value: ConfigValue }>,
    by: string,
  ): Promise<SetConfigOutcome> {
    let outcome: SetConfigOutcome = { ok: false, problems: [] };
    await this.commit((d) => {
      const set = setConfigOverrides(d, this.deps.fileConfig, assignments, by);
      outcome = set.outcome;
      return set.result;
    });
    return outcome;
  }

  /**
   * Whether Fleet may answer `login` on `issue` now: true at most once per REPLY_WINDOW_MS per person
   * and issue (recorded in the state, so replicas and restarts agree), for people who may not drive
   * Fleet. The record is pruned of entries past the window on every claim.
   */
  async claimReply(issue: number, login: string): Promise<boolean> {
    let claimed = false;
    await this.commit(
      (d) => {
        const r = claimReplyIn(d, issue, login, this.now().getTime());
        claimed = r !== null;
        return r;
      },
      { schedule: false },
    );
    return claimed;
  }

  /**
   * The issue's title or body was edited: re-pinned when `allowed` (the editor may drive Fleet), else
   * noted. An allowed body edit also sets what its tasks wait for (`dependsOn`, its `Depends on` lines).
   */
  async issueEdited(
    issue: number,
    edit: {
      title: string;
      body: string | null | undefined;
      by: string;
      allowed: boolean;
      dependsOn?: readonly number[];
    },
  ): Promise<Task[]> {
    const deps = edit.allowed ? edit.dependsOn : undefined;
    const { result } = await this.commit(
      (d) => {
        const now = this.iso();
        const pinned = (edit.allowed ? repinTasks : noteIgnoredEdit)(d, issue, { ...edit, now });
        const waits = deps && setDependencies(pinned?.doc ?? d, issue, deps, now);
        return pinned && waits ? mergeResults(pinned, waits) : (waits ?? pinned);
      },
      // New dependencies block or release tasks in the same commit.
      { schedule: deps !== undefined },
    );
    return result ? result.changes.map((c) => c.task) : [];
  }

  private iso(): string {
    return this.now().toISOString();
  }

  /** The document without the stored overrides that no longer apply to the file config, and which those were. */
  private withoutInvalidOverrides(doc: FleetStateDoc): { doc: FleetStateDoc; dropped: DroppedOverride[] } {
    const { dropped } = resolvedConfig(this.deps.fileConfig, doc);
    if (dropped.length === 0) return { doc, dropped };
    const kept = { ...doc.config };
    for (const o of dropped) delete kept[o.key];
    return { doc: { ...doc, config: kept }, dropped };
  }

  /**
   * Runs a transition and a scheduling pass as ONE compare-and-swap commit (GitHub counts every commit
   * against its content-creation limits), keeping the beads mirror in step with every changed task.
   */
  private async commit(
    transitionFn: (doc: FleetStateDoc) => TransitionResult | null,
    opts: {
      schedule?: boolean;
      /** Tasks whose change this commit records but the caller shows (with more of it): not shown here. */
      shownByCaller?: ReadonlySet<string>;
      trustCacheMs?: number;
      retryUntilMs?: number;
    } = { schedule: true },
  ): Promise<{ result: TransitionResult | null; doc: FleetStateDoc }> {
    const { deps } = this;
    let last: TransitionResult | null = null;
    let dropped: DroppedOverride[] = [];
    let taken: Task[] = [];
    const mutation: Mutation = ({ doc, beads }) => {
      const cleaned = deps.onOverridesDropped ? this.withoutInvalidOverrides(doc) : { doc, dropped: [] };
      dropped = cleaned.dropped;
      const first = transitionFn(cleaned.doc) ?? { doc: cleaned.doc, changes: [], messages: [] };
      if (dropped.length) {
        first.messages = [
          ...dropped.map((o) => `drop override ${o.key}=${o.value}: no longer valid`),
          ...first.messages,
        ];
      }
      const pass = () =>
        applySchedule(first.doc, this.config(first.doc), {
          now: this.iso(),
          holder: this.holder,
          leaseTtlMs: deps.leaseTtlMs,
        });
      last = opts.schedule ? mergeResults(first, pass()) : first;
      taken = [];
      const took = deps.taker?.take(last.doc);
      if (took) {
        taken = took.taken;
        const changes = took.taken.map((task) => ({ task, from: "dispatched" as const }));
        last = mergeResults(last, { doc: took.doc, changes, messages: took.messages });
      }
      if (last.changes.length === 0 && last.doc === doc) return null;
      const changed = last.changes.map((c) => c.task);
      return {
        doc: last.doc,
        beads: syncBeads(beads, changed, tasksOf(last.doc), last.pinned),
        message: last.messages.join("\n") || "update tasks",
      };
    };
    const update = await deps.store.update(mutation, {
      ...(opts.trustCacheMs ? { trustCacheMs: opts.trustCacheMs } : {}),
      ...(opts.retryUntilMs !== undefined ? { retryUntilMs: opts.retryUntilMs } : {}),
    });
    this.lastDoc = update.snapshot.doc;
    const result = update.applied ? (last as TransitionResult | null) : null;
    if (result && taken.length) deps.taker?.taken(taken, update.snapshot);
    if (update.applied && dropped.length) await deps.onOverridesDropped?.(dropped);
    if (result) await this.afterCommit(result, opts.shownByCaller);
    deps.onState?.(update.snapshot.doc, this.config(update.snapshot.doc));
    return { result, doc: update.snapshot.doc };
  }

  /** After a commit: start the runs of newly dispatched tasks, then show every change on its issue. */
  private async afterCommit(result: TransitionResult, shownByCaller?: ReadonlySet<string>): Promise<void> {
    // By the scheduler's word, not by from/to: a retry requeued and re-dispatched in one commit reads dispatched -> dispatched.
    const startedIds = new Set(result.dispatched ?? []);
    const started = result.changes.filter((c) => startedIds.has(c.task.id)).map((c) => c.task);
    const runs = await this.startRuns(started);
    // The tracking comment links the run.
    for (const c of result.changes) {
      const withRun = runs.get(c.task.id);
      if (withRun) c.task = withRun(c.task);
    }
    for (const c of result.changes) {
      if (c.task.state === "cancelled" && c.from !== "cancelled")
        await this.deps.dispatcher.stop(c.task).catch(() => {});
    }
    const toShow = shownByCaller
      ? result.changes.filter((c) => !shownByCaller.has(c.task.id))
      : result.changes;
    await this.show(toShow, this.lastDoc ?? result.doc);
  }

  /**
   * Starts the dispatched tasks' runs one after another (GitHub asks integrators to send a client's
   * requests serially: https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api#avoid-concurrent-requests)
   * and records the runs, failing each start that failed with its reason, in one commit per
   * RECORD_RUNS_EVERY_MS of starts: a run exchanges its token only once its id is recorded, and a commit
   * per run kept the last runs of a burst of dispatches waiting behind the others' commits for longer
   * than they retry.
   */
  private async startRuns(tasks: readonly Task[]): Promise<Map<string, (t: Task) => Task>> {
    const started = new Map<string, (t: Task) => Task>();
    let recorded = new Map<string, (t: Task) => Task>();
    let failed = new Map<string, string>();
    // The dispatch each start was for: a task dispatched again meanwhile (a cancel and a retry, a lost
    // run requeued) is another dispatch, which this start's run or failure must not be written onto. Its
    // lease's acquiredAt tells it apart where the attempt number does not (an attempt given back is
    // counted again by the next dispatch).
    const dispatchOf = new Map(tasks.map((t) => [t.id, { attempts: t.attempts, at: t.lease?.acquiredAt }]));
    const isStartedDispatch = (t: Task): boolean => {
      const d = dispatchOf.get(t.id);
      return d !== undefined && t.attempts === d.attempts && t.lease?.acquiredAt === d.at;
    };
    const sameDispatch = (t: Task | undefined): t is Task =>
      t?.state === "dispatched" && isStartedDispatch(t);
    let since: number | undefined;
    const record = async () => {
      const [runs, failures] = [recorded, failed];
      [recorded, failed, since] = [new Map(), new Map(), undefined];
      if (runs.size === 0 && failures.size === 0) return;
      await this.commit(
        (d) => {
          let out: TransitionResult = { doc: d, changes: [], messages: [] };
          for (const [id, withRun] of runs) {
            const current = out.doc.tasks[id];
            if (!current) continue;
            const task = withRun(current);
            // A run that claimed its task before this record recorded its own id (claimLease): the record adds its link.
            const claimedByIt =
              isStartedDispatch(current) &&
              (current.state === "planning" || current.state === "running") &&
              current.runId === task.runId &&
              current.runUrl === undefined &&
              task.runUrl !== undefined;
            if (!sameDispatch(current) && !claimedByIt) continue;
            out = mergeResults(out, {
              doc: { ...out.doc, tasks: { ...out.doc.tasks, [id]: task } },
              changes: [{ task, from: current.state }],
              messages: [`run ${task.runId} started for gh-${task.issue}`],
            });
          }
          for (const [id, reason] of failures) {
            if (!sameDispatch(out.doc.tasks[id])) continue;
            const moved = moveTask(out.doc, id, "failed", { now: this.iso(), reason });
            if (moved) out = mergeResults(out, moved);
          }
          return out.changes.length ? out : null;
        },
        // A failed start frees its slot for the next task; recording a run changes no slot. The runs
        // are shown by the commit that dispatched them, once started (afterCommit), with their link:
        // shown here too, each would cost a second edit of its tracking comment.
        { schedule: failures.size > 0, shownByCaller: new Set(runs.keys()) },
      );
    };
    // A record that cannot be written is said, and the burst goes on: its runs still find their task by
    // run-name when they end (taskOfRun), and a task left dispatched is retried when its lease runs out.
    const recordSafely = () =>
      record().catch((error) =>
        this.deps.log?.(`recording started runs failed: ${(error as Error).message}`),
      );
    for (const task of tasks) {
      since ??= this.now().getTime();
      try {
        const run = await this.deps.dispatcher.start(task);
        if (run.runId) {
          const withRun = (t: Task): Task => ({
            ...t,
            runId: run.runId,
            ...(run.runUrl ? { runUrl: run.runUrl } : {}),
          });
          recorded.set(task.id, withRun);
          started.set(task.id, withRun);
        }
      } catch (error) {
        this.deps.log?.(`dispatch of ${task.id} failed: ${(error as Error).message}`);
        failed.set(task.id, `could not start the run: ${(error as Error).message}`);
      }
      if (this.now().getTime() - since >= RECORD_RUNS_EVERY_MS) await recordSafely();
    }
    await recordSafely();
    return started;
  }

  /** Every changed task's tracking comment: its state, place in the queue, tokens, run link. */
  private async show(changes: readonly TaskChange[], doc: FleetStateDoc): Promise<void> {
    const { tracker } = this.deps;
    if (!tracker) return;
    const tasks = tasksOf(doc);
    const effective = this.config(doc);
    const cap = effective.max_concurrent;
    await Promise.all(
      changes.map(({ task, from }) => {
        const pos =
          task.state === "queued" ? queuePosition(tasks, task.id, { max_concurrent: cap }) : undefined;
        return tracker.show(
          task.issue,
          {
            taskKey: task.id,
            taskId: task.id,
            state: task.state,
            coder: task.coder,
            model: task.model,
            priority: task.priority,
            queue: pos,
            blockedBy: task.state === "blocked" ? task.dependsOn : undefined,
            reason: task.reason,
            resetsAt: task.resetAt,
            tokens: task.totals?.usage,
            costUsd: task.totals?.costUsd,
            runUrl: task.runUrl,
            pr: task.pr,
            sandbox: effective.sandbox,
            promptEditedBy: task.pin?.ignoredEdit?.by,
            ...(task.state === "waiting" && task.question ? { question: task.question.text } : {}),
          },
          // No `from`: the task was created by this commit. A task coming from a run's states may have
          // a plan and report in its comment that a worker wrote: the edit keeps them.
          {
            fresh: from === undefined,
            othersMayHaveWritten: from !== undefined && !BEFORE_ANY_RUN.has(from),
          },
        );
      }),
    );
  }
}

/** The task queue of one repository (see RepoQueue). */
export function createRepoQueue(deps: RepoQueueDeps): RepoQueue {
  return new RepoQueue(deps);
}

/** Moves the issue's tasks (or one) to `to`, as one transition; null when none moved. */
function moveTasks(
  d: FleetStateDoc,
  issue: number,
  to: TaskState,
  opts: MoveOptions,
  now: string,
): TransitionResult | null {
  const targets = tasksOf(d).filter(
    (t) =>
      t.issue === issue &&
      (!opts.taskId || t.id === opts.taskId) &&
      (!opts.from || opts.from.includes(t.state)) &&
      (!opts.when || opts.when(t)),
  );
  let acc: TransitionResult = { doc: d, changes: [], messages: [] };
  for (const t of targets) {
    // Already there (an event got ahead of the worker): keep the fields the mover brings.
    const through =
      opts.via && t.state !== to && !canTransition(t.state, to) && canTransition(t.state, opts.via)
        ? moveTask(acc.doc, t.id, opts.via, { now })
        : undefined;
    if (through)
      acc = { doc: through.doc, changes: acc.changes, messages: [...acc.messages, ...through.messages] };
    const moved =
      t.state === to
        ? opts.patch && patchTask(acc.doc, t.id, opts.patch, now)
        : moveTask(acc.doc, t.id, to, { now, ...opts });
    if (moved)
      acc = {
        doc: moved.doc,
        changes: [...acc.changes, ...moved.changes],
        messages: [...acc.messages, ...moved.messages],
      };
  }
  if (!acc.changes.length) return null;
  return opts.alsoDoc ? { ...acc, doc: opts.alsoDoc(acc.doc) } : acc;
}

/** The reply record with `login` on `issue` claimed (entries past the window pruned); null when already answered. */
function claimReplyIn(
  d: FleetStateDoc,
  issue: number,
  login: string,
  nowMs: number,
): TransitionResult | null {
  const nowS = Math.floor(nowMs / 1000);
  const windowS = REPLY_WINDOW_MS / 1000;
  const key = `${issue}:${login.toLowerCase()}`;
  const replies = Object.fromEntries(Object.entries(d.replies ?? {}).filter(([, at]) => nowS - at < windowS));
  if (replies[key] !== undefined) return null;
  return {
    doc: { ...d, replies: { ...replies, [key]: nowS } },
    changes: [],
    messages: [`answer ${login} on #${issue} (once an hour)`],
  };
}

/** How long a burst of dispatches goes on before the runs started so far are recorded (see startRuns). */
const RECORD_RUNS_EVERY_MS = 10_000;

/** Two transitions applied one after the other, as one: a task changed twice keeps its first `from`. */
function mergeResults(a: TransitionResult, b: TransitionResult): TransitionResult {
  const changes = new Map(a.changes.map((c) => [c.task.id, c]));
  for (const c of b.changes) {
    const prior = changes.get(c.task.id);
    changes.set(c.task.id, prior ? { task: c.task, from: prior.from } : c);
  }
  return {
    doc: b.doc,
    changes: [...changes.values()],
    messages: [...a.messages, ...b.messages],
    dispatched: [...(a.dispatched ?? []), ...(b.dispatched ?? [])],
    pinned: { ...a.pinned, ...b.pinned },
  };
}
