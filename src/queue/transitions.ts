import { findCycles, newBeadId } from "../beads/index.ts";
import { taskBranchName, variantBranchName } from "../core/branch.ts";
import { boundAnswer } from "../core/commands.ts";
import {
  assignmentsText,
  type ConfigProblem,
  type ConfigValue,
  type DroppedOverride,
  type FleetConfig,
  type ResolvedOverrides,
  resolveOverrides,
  updateOverrides,
} from "../core/config.ts";
import { DEFAULT_LEASE_TTL_MS, isLeaseLive, isUnclaimed, newLease } from "../core/leases.ts";
import { canTransition, isActive, isTerminal, transition } from "../core/lifecycle.ts";
import { pinPrompt, promptPinDigest } from "../core/prompt-pin.ts";
import { appendRun, type RunRecord, sumRuns } from "../core/run-history.ts";
import type { SchedulerDecision } from "../core/scheduler.ts";
import { type Readiness, retryNotBefore, retryReason, scheduleNext } from "../core/scheduler.ts";
import { type FleetStateDoc, recordLedger } from "../core/state-doc.ts";
import { newTask, type Task, type TaskRequest, type TaskState } from "../core/task.ts";
import { budgetReadiness } from "../economy/budgets.ts";
import { taskIdOfPrBody } from "../render/pr-body.ts";
import type { PinnedText } from "./beads-sync.ts";

// Pure transitions over the state document: each returns the new document and what changed, so the
// caller can run it inside a compare-and-swap mutation (possibly several times) and act afterwards.

export interface TaskChange {
  task: Task;
  from?: TaskState;
}

export interface TransitionResult {
  doc: FleetStateDoc;
  changes: TaskChange[];
  /** One line per change for the commit message. */
  messages: string[];
  /** Tasks this transition dispatched: their runs must be started once it is committed. */
  dispatched?: string[];
  /** Tasks (by id) whose prompt this transition pinned: the text goes to their beads. */
  pinned?: Record<string, PinnedText>;
}

const withTasks = (doc: FleetStateDoc, tasks: Task[]): FleetStateDoc => {
  if (tasks.length === 0) return doc;
  const next = { ...doc.tasks };
  for (const t of tasks) next[t.id] = t;
  return { ...doc, tasks: next };
};

/**
 * The repository's config: the file with the state's `config set` overrides that are still valid
 * against it (see resolveOverrides: each invalid one is left out on its own). Every front door (the
 * webhook handlers, the reconcile, the wake-up timer, workers, the CLI) reads the config through this.
 */
export function effectiveConfig(fileConfig: FleetConfig, doc: FleetStateDoc): FleetConfig {
  return resolvedConfig(fileConfig, doc).config;
}

/**
 * The overrides as last resolved, by the stored overrides object they were read from: a transition
 * keeps the document's `config` object, so one read of the state resolves its overrides once, however
 * many scheduling passes and config reads follow. A new read (or a `config set`) is a new object.
 */
const resolvedByStored = new WeakMap<object, { fileConfig: FleetConfig; resolved: ResolvedOverrides }>();

/** effectiveConfig with what it applied and what it left out. */
export function resolvedConfig(fileConfig: FleetConfig, doc: FleetStateDoc): ResolvedOverrides {
  if (Object.keys(doc.config).length === 0) return { config: fileConfig, applied: {}, dropped: [] };
  const known = resolvedByStored.get(doc.config);
  if (known?.fileConfig === fileConfig) return known.resolved;
  const resolved = resolveOverrides(fileConfig, doc.config);
  resolvedByStored.set(doc.config, { fileConfig, resolved });
  return resolved;
}

export const tasksOf = (doc: FleetStateDoc): Task[] => Object.values(doc.tasks);

/** The task for this issue and coder/model that is still live (not done, failed or cancelled). */
export function findTask(
  doc: FleetStateDoc,
  q: { issue: number; coder?: string; model?: string; live?: boolean },
): Task | undefined {
  let found: Task | undefined;
  for (const t of tasksOf(doc)) {
    if (t.issue !== q.issue) continue;
    if (q.coder !== undefined && t.coder !== q.coder) continue;
    if (q.model !== undefined && t.model !== q.model) continue;
    if (q.live && isTerminal(t.state)) continue;
    // Prefer the most recently updated one: a retried task supersedes its older records.
    if (!found || t.updatedAt > found.updatedAt) found = t;
  }
  return found;
}

export interface EnqueueInput extends TaskRequest {
  repo: string;
  requestedBy: string;
  now: string;
  idPrefix?: string;
  /** Files the issue names (for `serialize_overlapping`). */
  files?: string[];
  /** The epic the issue was split from. */
  epic?: number;
  /** The task is an agent review of this pull request. */
  review?: Task["review"];
  /**
   * The issue's body as the labeler saw it: given, the title and body are pinned on the task (digest)
   * and in its bead (text), and the agent gets this text whatever is edited later without approval.
   */
  body?: string | null;
}

/**
 * Queues a task for (issue, coder, model). Idempotent: a live task for the same triple is left as it
 * is (a redelivered webhook changes nothing); a failed or cancelled one is queued again.
 */
export function enqueueTask(doc: FleetStateDoc, input: EnqueueInput): TransitionResult & { task: Task } {
  const existing = findTask(doc, { issue: input.issue, coder: input.coder, model: input.model });
  if (existing && !isTerminal(existing.state)) return { doc, changes: [], messages: [], task: existing };
  const { body } = input;
  const pinned = body === undefined ? undefined : { title: input.title, body };
  const pin = pinned && pinPrompt(pinned, input.requestedBy, input.now);
  if (existing && existing.state !== "done" && canTransition(existing.state, "queued")) {
    const task = { ...transition(existing, "queued", { now: input.now }), priority: input.priority };
    if (input.files) task.files = input.files;
    if (input.review) task.review = input.review;
    // Labeled again: the labeler approves the issue as it reads now.
    if (pin && pinned) Object.assign(task, { pin, title: pinned.title });
    return {
      doc: withTasks(doc, [task]),
      changes: [{ task, from: existing.state }],
      messages: [`requeue gh-${input.issue} for ${input.coder} (${task.id})`],
      task,
      ...(pinned ? { pinned: { [task.id]: pinned } } : {}),
    };
  }
  const id = newBeadId(
    {
      title: input.title,
      creator: input.requestedBy,
      createdAt: input.now,
      description: `${input.coder}:${input.model}`,
    },
    { prefix: input.idPrefix ?? "fl", existing: Object.keys(doc.tasks) },
  );
  const { body: _body, ...fields } = input;
  const task = newTask({ ...fields, id, ...(pin ? { pin } : {}) });
  return {
    doc: withTasks(doc, [task]),
    changes: [{ task }],
    messages: [`queue gh-${input.issue} for ${input.coder}:${input.model} (${id}, p${input.priority})`],
    task,
    ...(pinned ? { pinned: { [id]: pinned } } : {}),
  };
}

/** The tasks of an issue whose prompt an edit may concern: all but those done (a failed one may be retried). */
const pinnableTasks = (doc: FleetStateDoc, issue: number): Task[] =>
  tasksOf(doc).filter((t) => t.issue === issue && t.state !== "done");

/** An edit of an issue's title or body: the text after it, who made it, when. */
export interface IssueEdit {
  title: string;
  body: string | null | undefined;
  by: string;
  now: string;
}

/**
 * The issue was edited by someone who may drive Fleet: its tasks are pinned to the new text (digest on
 * the task, text in the bead), and a note of an ignored edit is cleared. Null when nothing changes.
 */
export function repinTasks(doc: FleetStateDoc, issue: number, edit: IssueEdit): TransitionResult | null {
  const sha256 = promptPinDigest(edit.title, edit.body);
  const text: PinnedText = { title: edit.title, body: edit.body };
  const changed = pinnableTasks(doc, issue)
    .filter((t) => t.pin?.sha256 !== sha256 || t.pin.ignoredEdit !== undefined || t.title !== edit.title)
    .map(
      (t): Task => ({
        ...t,
        title: edit.title,
        pin: pinPrompt(text, edit.by, edit.now),
        updatedAt: edit.now,
      }),
    );
  if (changed.length === 0) return null;
  return {
    doc: withTasks(doc, changed),
    changes: changed.map((task) => ({ task, from: task.state })),
    messages: changed.map((t) => `re-pin the prompt of gh-${issue} (${t.id}): edited by ${edit.by}`),
    pinned: Object.fromEntries(changed.map((t) => [t.id, text])),
  };
}

/**
 * The issue was edited by someone who may not drive Fleet: the pin stays, and the task records who
 * edited (its tracking comment says the agent gets the text as it was queued). An edit back to the
 * pinned text clears the note. Null when nothing changes.
 */
export function noteIgnoredEdit(doc: FleetStateDoc, issue: number, edit: IssueEdit): TransitionResult | null {
  const sha256 = promptPinDigest(edit.title, edit.body);
  const changed: Task[] = [];
  for (const t of pinnableTasks(doc, issue)) {
    if (!t.pin) continue;
    if (t.pin.sha256 === sha256) {
      if (t.pin.ignoredEdit === undefined) continue;
      const { ignoredEdit: _gone, ...pin } = t.pin;
      changed.push({ ...t, pin, updatedAt: edit.now });
    } else if (t.pin.ignoredEdit?.by !== edit.by) {
      changed.push({
        ...t,
        pin: { ...t.pin, ignoredEdit: { by: edit.by, at: edit.now } },
        updatedAt: edit.now,
      });
    }
  }
  if (changed.length === 0) return null;
  return {
    doc: withTasks(doc, changed),
    changes: changed.map((task) => ({ task, from: task.state })),
    messages: changed.map((t) =>
      t.pin?.ignoredEdit
        ? `keep the pinned prompt of gh-${issue} (${t.id}): edited by ${edit.by}, who may not drive Fleet`
        : `gh-${issue} (${t.id}) reads as pinned again`,
    ),
  };
}

/**
 * The issue now depends on `deps` (its body's dependencies changed): each of its tasks but the done ones
 * waits for them; a blocked one goes back to the queue, keeping its place, for the scheduling pass to
 * block again for what it waits for now or run. Null when nothing changes.
 */
export function setDependencies(
  doc: FleetStateDoc,
  issue: number,
  deps: readonly number[],
  now: string,
): TransitionResult | null {
  const dependsOn = [...new Set(deps)].filter((n) => n !== issue).sort((a, b) => a - b);
  const same = (t: Task) =>
    t.dependsOn.length === dependsOn.length && t.dependsOn.every((n, i) => n === dependsOn[i]);
  const changed = pinnableTasks(doc, issue)
    .filter((t) => !same(t))
    .map((t): Task => {
      const next = t.state === "blocked" ? transition(t, "queued", { now }) : { ...t, updatedAt: now };
      return { ...next, dependsOn };
    });
  if (changed.length === 0) return null;
  const text = dependsOn.length ? dependsOn.map((n) => `#${n}`).join(", ") : "nothing";
  return {
    doc: withTasks(doc, changed),
    changes: changed.map((task) => ({ task, from: doc.tasks[task.id]!.state })),
    messages: changed.map((t) => `gh-${issue} (${t.id}) depends on ${text}`),
  };
}

/** The tasks of `issue` whose agent waits for an answer to its question. */
export const waitingTasksOf = (doc: FleetStateDoc, issue: number): Task[] =>
  tasksOf(doc).filter((t) => t.issue === issue && t.state === "waiting");

/**
 * A person's answer to the question a waiting task's agent asked: the task goes back to the queue with
 * the answer, which its next run gets. Null when the task is not waiting (already answered, expired, gone).
 */
export function answerQuestion(
  doc: FleetStateDoc,
  taskId: string,
  answer: { text: string; by: string; now: string },
): TransitionResult | null {
  const current = doc.tasks[taskId];
  if (current?.state !== "waiting") return null;
  const task: Task = {
    ...transition(current, "queued", { now: answer.now }),
    question: {
      text: current.question?.text ?? "",
      askedAt: current.question?.askedAt ?? current.updatedAt,
      answer: { text: boundAnswer(answer.text), by: answer.by, at: answer.now },
    },
  };
  return {
    doc: withTasks(doc, [task]),
    changes: [{ task, from: current.state }],
    messages: [`answer the question of gh-${current.issue} (${taskId}), by ${answer.by}`],
  };
}

/** Records fields on a task without a state change (e.g. a run's totals when an event already moved it). */
export function patchTask(
  doc: FleetStateDoc,
  taskId: string,
  patch: Partial<Task>,
  now: string,
): TransitionResult | null {
  const current = doc.tasks[taskId];
  if (!current) return null;
  const task = { ...current, ...patch, updatedAt: now };
  return {
    doc: withTasks(doc, [task]),
    changes: [{ task, from: current.state }],
    messages: [`update gh-${current.issue} (${taskId}): ${Object.keys(patch).join(", ")}`],
  };
}

/** Moves one task; null when the move is not legal any more (a late or repeated event), so it is dropped. */
export function moveTask(
  doc: FleetStateDoc,
  taskId: string,
  to: TaskState,
  opts: {
    now: string;
    reason?: string;
    resetAt?: string;
    patch?: Partial<Task>;
    /** The caller knows the task's run has stopped (its Actions run ended): nothing to wait for. */
    runOver?: boolean;
  },
): TransitionResult | null {
  const current = doc.tasks[taskId];
  if (!current || !canTransition(current.state, to)) return null;
  const moved = transition(current, to, opts);
  // A worker's run still going when the task leaves its slot stops at its next heartbeat: until it says
  // so (endRun) or its lease runs out, the task is not started again (see the scheduler).
  const lease = current.lease;
  if (lease && !moved.lease && !opts.runOver && !isUnclaimed(lease) && isLeaseLive(lease, new Date(opts.now)))
    moved.stopping = { holder: lease.holder, until: lease.expiresAt };
  const task = { ...moved, ...opts.patch };
  return {
    doc: withTasks(doc, [task]),
    changes: [{ task, from: current.state }],
    messages: [
      `${current.state} -> ${to}: gh-${current.issue} (${taskId})${opts.reason ? `: ${opts.reason}` : ""}`,
    ],
  };
}

/**
 * The tasks that worked on pull request `pr` (branch `head`), the live one first: those that recorded
 * it (several when a task was queued again on an issue whose earlier task ended with the PR open: the
 * branch and its PR are taken over); else, for a PR no task recorded (opened by hand on a task's
 * branch, or by a run whose end has not landed yet), the task its body names (Fleet's marker), else the
 * one task on that branch not done yet that existed when the PR was opened: the one at work on it, else
 * the live one or the latest.
 */
export function tasksOnPullRequest(
  doc: FleetStateDoc,
  /**
   * `createdAt`, `body`: when the PR was opened and its text (the webhook's `pull_request.created_at`
   * and `body`), when known.
   */
  pr: { number: number; head: string; createdAt?: string; body?: string | null },
): Task[] {
  const all = tasksOf(doc);
  const liveFirst = (a: Task, b: Task) =>
    Number(isTerminal(a.state)) - Number(isTerminal(b.state)) || b.updatedAt.localeCompare(a.updatedAt);
  const recorded = all.filter((t) => t.pr === pr.number).sort(liveFirst);
  if (recorded.length) return recorded;
  // Opened by a run whose end has not landed yet (or never did: its worker died): the body names its task.
  const named = taskIdOfPrBody(pr.body);
  const opener = named === undefined ? undefined : all.find((t) => t.id === named && t.branch === pr.head);
  if (opener) return [opener];
  // A task made after the PR was opened did not open it (it took the branch over later: an issue's next
  // task), whatever it does now; GitHub's times are whole seconds. Of the others, the one at work (holding
  // a lease, or cancelled with its run still stopping: the run's end, with the PR, may not have landed
  // yet) before one that only kept the branch.
  const opened = pr.createdAt === undefined ? Number.NaN : Date.parse(pr.createdAt);
  const before = (t: Task) =>
    Number.isNaN(opened) || Math.floor(Date.parse(t.createdAt) / 1000) * 1000 <= opened;
  // A run still stopping since before the PR (not one left stopping by a worker that died long before).
  const stoppingSince = (t: Task) =>
    t.stopping !== undefined && (Number.isNaN(opened) || Date.parse(t.stopping.until) > opened);
  const working = (t: Task) => t.lease !== undefined || stoppingSince(t);
  const atWork = (a: Task, b: Task) => Number(working(b)) - Number(working(a));
  return all
    .filter((t) => t.branch === pr.head && t.state !== "done" && before(t))
    .sort((a, b) => atWork(a, b) || liveFirst(a, b))
    .slice(0, 1);
}

/** How a worker's run of a task ended, as one transition (see endRun). */
export interface RunEnd {
  /** The worker whose run it was (its lease's holder). */
  holder: string;
  /** Where the run's outcome sends the task, and the state passed through on the way (see MoveOptions.via). */
  to: TaskState;
  via?: TaskState;
  reason?: string;
  resetAt?: string;
  /** What the outcome records on the task when it moves it (its PR, RESULT.json in figures, requests used up). */
  patch: Partial<Task>;
  /** The run's record (what it was, when it ended, its figures); none when it spent nothing. */
  run?: RunRecord;
  now: string;
}

/**
 * A run's end: its record joins the task's runs (the task's totals are their sum) and the ledger of the
 * day it ended, whatever happened to the task meanwhile, since the tokens were spent; the task moves to
 * `to` only while it still holds this run's lease. An event that got there first (a cancel) keeps its
 * state and gets the outcome's fields; a task that moved on (merged, failed, or taken by another worker
 * after this run's lease expired) keeps its state and fields. Null when the task is gone.
 */
export function endRun(doc: FleetStateDoc, taskId: string, end: RunEnd): TransitionResult | null {
  const current = doc.tasks[taskId];
  if (!current) return null;
  const runs = end.run ? appendRun(current.runs, end.run) : current.runs;
  const figures: Partial<Task> = end.run ? { runs, totals: sumRuns(runs!) } : {};
  // This run has stopped: the task may start again.
  if (current.stopping?.holder === end.holder) figures.stopping = undefined;
  let result: TransitionResult | null = null;
  if (current.lease?.holder === end.holder && current.state !== end.to) {
    const through =
      end.via && !canTransition(current.state, end.to) && canTransition(current.state, end.via)
        ? moveTask(doc, taskId, end.via, { now: end.now })
        : null;
    // The run's own end: nothing of it is left to stop.
    const moved = moveTask(through?.doc ?? doc, taskId, end.to, {
      now: end.now,
      reason: end.reason,
      resetAt: end.resetAt,
      patch: { ...end.patch, ...figures, stopping: undefined },
    });
    if (moved)
      result = {
        ...moved,
        changes: [{ task: moved.changes[0]!.task, from: current.state }],
        messages: [...(through?.messages ?? []), ...moved.messages],
      };
  }
  if (!result) {
    const patch = current.state === end.to ? { ...end.patch, ...figures } : figures;
    if (Object.keys(patch).length === 0) return null;
    result = patchTask(doc, taskId, patch, end.now);
  }
  if (!result || !end.run) return result;
  const day = end.run.at.slice(0, 10);
  const { usage, costUsd } = end.run.totals;
  return { ...result, doc: recordLedger(result.doc, { day, coder: current.coder, usage, costUsd }) };
}

/**
 * The tasks whose open PR may need a rebase run after the PR `merged.pr` (of task `merged.task`, if
 * Fleet's) was merged: every other task waiting on its PR, except the other sides of the merged task's
 * A/B run, which are alternatives to what was merged, not work to go on top of it.
 */
export function tasksToRebaseAfterMerge(doc: FleetStateDoc, merged: { pr: number; task?: Task }): Task[] {
  return tasksOf(doc).filter(
    (t) =>
      t.state === "pr-open" &&
      t.pr !== undefined &&
      t.pr !== merged.pr &&
      (merged.task === undefined || t.issue !== merged.task.issue),
  );
}

/**
 * Runs whose worker process is gone (it was killed on the machine that says so, see canJudgeProcess):
 * each task still on that holder's lease goes back to the queue at once, or fails when it has no
 * retries left. A task no longer on that lease (reclaimed already, moved on) is left alone, so a run
 * is retried once however many workers saw it gone.
 */
export function reclaimGoneRuns(
  doc: FleetStateDoc,
  gone: ReadonlyArray<{ taskId: string; holder: string }>,
  opts: { now: string; retriesMax: number },
): TransitionResult | null {
  const changed: TaskChange[] = [];
  const messages: string[] = [];
  for (const { taskId, holder } of gone) {
    const task = doc.tasks[taskId];
    if (!task?.lease || task.lease.holder !== holder || !isActive(task.state)) continue;
    const retry = task.attempts <= opts.retriesMax;
    const to = retry ? "queued" : "failed";
    if (!canTransition(task.state, to)) continue;
    const why = `its worker ${holder} ended without finishing the run`;
    const reason = retry ? `${why}; retrying` : `${why}; no retries left`;
    changed.push({ task: transition(task, to, { now: opts.now, reason }), from: task.state });
    messages.push(`${task.state} -> ${to}: gh-${task.issue} (${taskId}): ${why}`);
  }
  if (changed.length === 0) return null;
  return {
    doc: withTasks(
      doc,
      changed.map((c) => c.task),
    ),
    changes: changed,
    messages,
  };
}

export interface ScheduleOptions {
  now: string;
  /** Who holds the leases of dispatched tasks until a worker claims them. */
  holder: string;
  leaseTtlMs?: number;
  closedIssues?: ReadonlySet<number>;
  /** Extra gate before a dispatch; default: the daily/monthly budgets against the ledger. */
  readiness?: (task: Task) => Readiness;
}

/**
 * One scheduling pass applied to the document: expired leases retried or failed, rate-limited tasks
 * back in the queue after their reset, blocked tasks released, and queued tasks dispatched into free
 * slots. Because it runs inside a compare-and-swap, two replicas can never both take the last slot.
 */
export function applySchedule(
  doc: FleetStateDoc,
  config: FleetConfig,
  opts: ScheduleOptions,
): TransitionResult {
  const first = schedulePass(doc, config, opts);
  // A task whose lease just expired went back to the queue after this pass chose what to dispatch;
  // one more pass lets it take the slot it freed now rather than at the next event.
  const requeued = first.changes.some(
    (c) => c.task.state === "queued" && c.from !== "queued" && c.from !== "blocked",
  );
  if (!requeued) return first;
  const second = schedulePass(first.doc, config, opts);
  if (second.changes.length === 0) return first;
  const changes = new Map(first.changes.map((c) => [c.task.id, c]));
  for (const c of second.changes)
    changes.set(c.task.id, { task: c.task, from: changes.get(c.task.id)?.from ?? c.from });
  return {
    doc: second.doc,
    changes: [...changes.values()],
    messages: [...first.messages, ...second.messages],
    dispatched: [...(first.dispatched ?? []), ...(second.dispatched ?? [])],
  };
}

/** A scheduling pass being applied: the tasks as changed so far, the changes and the commit message lines. */
interface Pass {
  doc: FleetStateDoc;
  config: FleetConfig;
  opts: ScheduleOptions;
  tasks: Record<string, Task>;
  changes: Map<string, TaskChange>;
  messages: string[];
  gated: Set<string>;
  cycles?: Map<number, number[]>;
}

/** Records a task's change in the pass (a task changed twice keeps its first `from`). */
function note(pass: Pass, before: Task, after: Task): void {
  pass.tasks[after.id] = after;
  const prior = pass.changes.get(after.id);
  pass.changes.set(after.id, { task: after, from: prior ? prior.from : before.state });
}

function schedulePass(doc: FleetStateDoc, config: FleetConfig, opts: ScheduleOptions): TransitionResult {
  // Tasks held by the gate show why on their tracking comment (the reason is kept while queued).
  const budgets = opts.readiness ?? budgetReadiness(config.budgets, doc.ledger, new Date(opts.now));
  // After the state branch was deleted, nothing starts until runs from before are certainly over.
  const hold =
    doc.resetHold && Date.parse(doc.resetHold.until) > Date.parse(opts.now) ? doc.resetHold : undefined;
  const gate = hold ? () => ({ ready: false as const, reason: hold.reason }) : budgets;
  const pass: Pass = {
    doc,
    config,
    opts,
    tasks: { ...doc.tasks },
    changes: new Map(),
    messages: [],
    gated: new Set(),
  };
  const decisions = scheduleNext({
    tasks: tasksOf(doc),
    config,
    now: opts.now,
    closedIssues: opts.closedIssues,
    readiness: (task) => {
      const r = gate(task);
      if (!r.ready) pass.gated.add(task.id);
      return r;
    },
  });
  for (const d of decisions) {
    const task = pass.tasks[d.taskId];
    if (task) applyDecision(pass, d, task);
  }
  noteNewCycles(pass);
  const changed = [...pass.changes.values()];
  const dispatched = decisions.flatMap((d) =>
    d.kind === "dispatch" && pass.tasks[d.taskId]?.state === "dispatched" ? [d.taskId] : [],
  );
  return {
    doc: changed.length ? { ...doc, tasks: pass.tasks } : doc,
    changes: changed,
    messages: pass.messages,
    dispatched,
  };
}

/** One scheduler decision, applied to the pass when the lifecycle still allows it. */
function applyDecision(pass: Pass, d: SchedulerDecision, task: Task): void {
  const { opts, config } = pass;
  switch (d.kind) {
    case "expire-lease": {
      const reason = `the run stopped reporting (lease ${task.lease?.holder ?? ""} expired)`;
      const retry = task.attempts <= config.retries.max;
      const to = retry ? "queued" : "failed";
      if (!canTransition(task.state, to)) return;
      const resetAt = retry
        ? retryNotBefore(opts.now, task.attempts, config.retries.backoff_seconds)
        : undefined;
      const why = retry ? retryReason(reason, resetAt) : `${reason}; no retries left`;
      note(pass, task, transition(task, to, { now: opts.now, reason: why, resetAt }));
      pass.messages.push(`expire lease of gh-${task.issue} (${task.id}) -> ${to}`);
      return;
    }
    case "expire-question": {
      if (!canTransition(task.state, "failed")) return;
      const reason = `The agent's question waited ${d.hours} h without an answer (\`ask_human.expire_after_hours\`); \`/fleet retry\` on the issue or \`fleet retry ${task.id}\` starts the task again.`;
      note(pass, task, transition(task, "failed", { now: opts.now, reason }));
      pass.messages.push(`question of gh-${task.issue} (${task.id}) expired -> failed`);
      return;
    }
    case "requeue-rate-limited":
    case "unblock": {
      if (!canTransition(task.state, "queued")) return;
      note(pass, task, transition(task, "queued", { now: opts.now }));
      pass.messages.push(
        `${d.kind === "unblock" ? "unblock" : "rate limit over for"} gh-${task.issue} (${task.id})`,
      );
      return;
    }
    case "block": {
      if (task.state === "blocked" || !canTransition(task.state, "blocked")) return;
      pass.cycles ??= dependencyCycles(Object.values(pass.tasks));
      const reason = blockedReason(d.blockedBy, pass.cycles.get(task.issue));
      note(pass, task, {
        ...transition(task, "blocked", { now: opts.now, reason }),
        dependsOn: task.dependsOn,
      });
      pass.messages.push(`block gh-${task.issue} (${task.id}): ${reason}`);
      return;
    }
    case "hold": {
      // Holds by the gate or by overlapping files say why on the tracking comment.
      if ((!pass.gated.has(task.id) && d.waitsFor === undefined) || task.reason === d.reason) return;
      note(pass, task, { ...task, reason: d.reason, updatedAt: opts.now });
      pass.messages.push(`hold gh-${task.issue} (${task.id}): ${d.reason}`);
      return;
    }
    case "dispatch":
      dispatchInPass(pass, task, d.slot);
  }
}

/** Dispatches a task into `slot`: its lease for the dispatcher, a fresh run, its branch (a variant one in an A/B run). */
function dispatchInPass(pass: Pass, task: Task, slot: number): void {
  const { opts, config } = pass;
  if (!canTransition(task.state, "dispatched")) return;
  const lease = newLease(opts.holder, slot, new Date(opts.now), opts.leaseTtlMs);
  const moved = transition(task, "dispatched", { now: opts.now });
  // A new attempt gets its own run: late events of the previous run must not match it.
  delete moved.runId;
  delete moved.runUrl;
  delete moved.stopping;
  // Another coder or model on the same issue (an A/B run): each side has its own branch and PR.
  const sibling = Object.values(pass.tasks).some(
    (t) =>
      t.id !== task.id &&
      t.issue === task.issue &&
      !isTerminal(t.state) &&
      (t.coder !== task.coder || t.model !== task.model),
  );
  const branch =
    task.branch ??
    (sibling
      ? variantBranchName(task.issue, task.title, task.coder, task.model)
      : taskBranchName(task.issue, task.title));
  note(pass, task, { ...moved, lease, branch });
  const busy = Object.values(pass.tasks).filter((t) => t.lease).length;
  pass.messages.push(
    `dispatch gh-${task.issue} to ${task.coder} (slot ${slot}/${config.max_concurrent}, ${busy} busy)`,
  );
}

/** A new block may close a cycle: the tasks already blocked in it learn that they wait for ever. */
function noteNewCycles(pass: Pass): void {
  if (!pass.cycles?.size) return;
  for (const task of Object.values(pass.tasks)) {
    const cycle = pass.cycles.get(task.issue);
    if (!cycle || task.state !== "blocked" || task.reason?.includes("dependency cycle")) continue;
    const reason = `${task.reason ?? blockedReason(task.dependsOn, undefined)}${cycleNote(cycle)}`;
    note(pass, task, { ...task, reason, updatedAt: pass.opts.now });
    pass.messages.push(`gh-${task.issue} (${task.id}) is in a dependency cycle`);
  }
}

function cycleNote(cycle: readonly number[]): string {
  const walk = [...cycle, cycle[0]].map((n) => `#${n}`).join(" → ");
  return `: a dependency cycle (${walk}) that never clears; remove one of its "Depends on" lines`;
}

function blockedReason(blockedBy: readonly number[], cycle: readonly number[] | undefined): string {
  return `blocked by ${blockedBy.map((n) => `#${n}`).join(", ")}${cycle ? cycleNote(cycle) : ""}`;
}

/**
 * Issues whose live tasks depend on each other in a cycle, each mapped to its cycle's issues in
 * walking order: such tasks block each other for ever, so their tracking comments say so.
 */
export function dependencyCycles(tasks: readonly Task[]): Map<number, number[]> {
  const byIssue = new Map<number, Set<number>>();
  for (const t of tasks) {
    if (isTerminal(t.state)) continue;
    const deps = byIssue.get(t.issue) ?? new Set<number>();
    for (const d of t.dependsOn) deps.add(d);
    byIssue.set(t.issue, deps);
  }
  const nodes = [...byIssue].map(([issue, deps]) => ({
    id: String(issue),
    dependencies: [...deps].map((d) => ({ depends_on_id: String(d), type: "blocks" })),
  }));
  const out = new Map<number, number[]>();
  for (const component of findCycles(nodes)) {
    const issues = component.map(Number);
    for (const n of issues) out.set(n, issues);
  }
  return out;
}

/**
 * The state branch was deleted (an operator starting over) while runs may still be going: the fresh
 * state holds every dispatch for a lease's length. A worker whose task is gone stops its agent at its
 * next heartbeat (a third of the lease), and a dead worker's agent died with it, so by `until` no run
 * from before is left to run beside a new one.
 */
export function holdAfterStateReset(
  doc: FleetStateDoc,
  now: string,
  leaseTtlMs = DEFAULT_LEASE_TTL_MS,
): TransitionResult {
  const until = new Date(Date.parse(now) + leaseTtlMs).toISOString();
  const reason = `Fleet's state was reset (fleet/state deleted); tasks start after ${until.slice(11, 19)} UTC, once any run still going from before has stopped`;
  return {
    doc: { ...doc, resetHold: { until, reason } },
    changes: [],
    messages: [`state reset: dispatch held until ${until}`],
  };
}

/** The answer to `config set`: applied, or refused with every problem (nothing is stored then). */
export type SetConfigOutcome =
  | { ok: true; config: FleetConfig; dropped: DroppedOverride[] }
  | { ok: false; problems: ConfigProblem[] };

/**
 * `config set`: the assignments stored as overrides when the file and the stored overrides that still
 * apply accept them (all or nothing); `result` is null when refused.
 */
export function setConfigOverrides(
  doc: FleetStateDoc,
  file: FleetConfig,
  assignments: ReadonlyArray<{ key: string; value: ConfigValue }>,
  by: string,
): { outcome: SetConfigOutcome; result: TransitionResult | null } {
  const update = updateOverrides(file, doc.config, assignments);
  if (!update.ok) return { outcome: update, result: null };
  return {
    outcome: { ok: true, config: update.config, dropped: update.dropped },
    result: {
      doc: { ...doc, config: update.overrides },
      changes: [],
      messages: [`config set ${assignmentsText(assignments)} (by ${by})`],
    },
  };
}
