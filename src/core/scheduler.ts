import type { FleetConfig } from "./config.ts";
import { sharedFiles } from "./file-paths.ts";
import { ACTIVE_STATES } from "./lifecycle.ts";
import type { Task } from "./task.ts";

/**
 * What to do next. Apply in the order returned: an expired lease frees its slot for a dispatch in the
 * same batch, a requeued or unblocked task can be dispatched in the same batch.
 */
export type SchedulerDecision =
  /** An active task's lease ran out without a heartbeat: its slot is free; move it to queued (retry) or failed. */
  | { kind: "expire-lease"; taskId: string }
  /** A rate-limited task whose reset time has passed: move it to queued. */
  | { kind: "requeue-rate-limited"; taskId: string }
  /** A waiting task whose question went unanswered for `ask_human.expire_after_hours`: move it to failed. */
  | { kind: "expire-question"; taskId: string; hours: number }
  /** A blocked task whose dependencies are all satisfied: move it to queued. */
  | { kind: "unblock"; taskId: string }
  /** A queued task waiting for these issues: move it to blocked. */
  | { kind: "block"; taskId: string; blockedBy: number[] }
  /**
   * A queued task the scheduler reached but may not start yet (coder disabled, readiness said no, or
   * `waitsFor`: a running task touches the same files and `serialize_overlapping` is on).
   */
  | { kind: "hold"; taskId: string; reason: string; waitsFor?: number }
  /** Start this task in this slot (1..max_concurrent). */
  | { kind: "dispatch"; taskId: string; slot: number };

export type Readiness = { ready: true } | { ready: false; reason: string };

export interface SchedulerInput {
  tasks: readonly Task[];
  config: Pick<FleetConfig, "max_concurrent" | "coders"> & {
    retries?: Pick<FleetConfig["retries"], "backoff_seconds">;
    ask_human?: Pick<FleetConfig["ask_human"], "expire_after_hours">;
    /** Two tasks whose `files` share a path never run at the same time; the later one waits. */
    serialize_overlapping?: boolean;
  };
  /** RFC3339. */
  now: string;
  /** Closed GitHub issues. A dependency on an issue that is not a fleet task is satisfied only when it is closed. */
  closedIssues?: ReadonlySet<number>;
  /** Extra gate for a task about to be dispatched (budgets, per-user quotas, overlapping files). */
  readiness?: (task: Task) => Readiness;
}

/** `ask_human.expire_after_hours` when a caller's config has none. */
const DEFAULT_QUESTION_HOURS = 72;

/** When a waiting task's unanswered question expires (from when it was asked, or the task's last change). */
const questionExpiresMs = (task: Task, afterMs: number): number =>
  ms(task.question?.askedAt ?? task.updatedAt) + afterMs;

const ms = (time: string | undefined): number => {
  if (time === undefined) return Number.NaN;
  return Date.parse(time);
};

/** The issues a task waits for: neither closed nor carried by a `done` fleet task. */
function unmetDependencies(
  task: Task,
  doneIssues: ReadonlySet<number>,
  closed: ReadonlySet<number>,
): number[] {
  let unmet: number[] | undefined;
  for (const dep of task.dependsOn) {
    if (dep === task.issue || doneIssues.has(dep) || closed.has(dep)) continue;
    if (unmet === undefined) unmet = [];
    if (!unmet.includes(dep)) unmet.push(dep);
  }
  return unmet === undefined ? [] : unmet.sort((a, b) => a - b);
}

/**
 * The issues that count as done for their dependents: those with a `done` task, except an epic (an issue
 * split into sub-issues, its split task done once the plan is applied) until every sub-issue counts as done.
 */
export function doneIssuesOf(tasks: readonly Task[]): Set<number> {
  const done = new Set<number>();
  const subsOf = new Map<number, Set<number>>();
  for (const t of tasks) {
    if (t.state === "done") done.add(t.issue);
    if (t.epic !== undefined) subsOf.set(t.epic, (subsOf.get(t.epic) ?? new Set()).add(t.issue));
  }
  // Until nothing changes: an epic's sub-issue may be an epic of its own.
  for (let changed = subsOf.size > 0; changed; ) {
    changed = false;
    for (const [epic, subs] of subsOf) {
      if (done.has(epic) && [...subs].some((s) => !done.has(s))) {
        done.delete(epic);
        changed = true;
      }
    }
  }
  return done;
}

interface Candidate {
  task: Task;
  queuedMs: number;
}

/** Queue order: priority 0 first, then FIFO by queuedAt, then issue number, then id. */
function compareCandidates(a: Candidate, b: Candidate): number {
  return (
    a.task.priority - b.task.priority ||
    a.queuedMs - b.queuedMs ||
    a.task.issue - b.task.issue ||
    (a.task.id < b.task.id ? -1 : a.task.id > b.task.id ? 1 : 0)
  );
}

const EMPTY_SET: ReadonlySet<number> = new Set();

/** When a rate-limited task may run again: the provider's reset time, else the backoff after its last change. */
const rateLimitEndsMs = (task: Task, backoffMs: number): number => {
  const reset = ms(task.resetAt);
  return Number.isNaN(reset) ? ms(task.updatedAt) + backoffMs : reset;
};

/** Who holds which slot, as the tasks already running say. */
interface SlotUse {
  max: number;
  /** `taken[n]`: slot n is pinned by a live lease. */
  taken: Uint8Array;
  busy: number;
  /** Busy tasks whose lease pins no usable slot number: they take the lowest free numbers. */
  anonymous: number;
  busyPerCoder: Map<string, number>;
  /** Tasks holding a slot (or given one in this pass) whose files a candidate must not share. */
  inUse: Task[];
}

/** The first pass over the tasks: what changes without a slot, what could take one, and who holds which. */
interface Sorted {
  expired: SchedulerDecision[];
  requeued: SchedulerDecision[];
  unblocked: SchedulerDecision[];
  blocked: SchedulerDecision[];
  candidates: Candidate[];
  slots: SlotUse;
}

/** A slot-holding task: its lease expired (a decision), or it counts as busy in `slots`. */
function countRunning(task: Task, now: number, serialize: boolean, sorted: Sorted): void {
  const { slots } = sorted;
  const lease = task.lease;
  if (lease && ms(lease.expiresAt) <= now) {
    sorted.expired.push({ kind: "expire-lease", taskId: task.id });
    return;
  }
  slots.busy++;
  slots.busyPerCoder.set(task.coder, (slots.busyPerCoder.get(task.coder) ?? 0) + 1);
  if (serialize && task.files?.length) slots.inUse.push(task);
  // A slot number held twice or out of range still counts as busy; it just does not pin a number.
  if (
    lease &&
    Number.isInteger(lease.slot) &&
    lease.slot >= 1 &&
    lease.slot <= slots.max &&
    !slots.taken[lease.slot]
  )
    slots.taken[lease.slot] = 1;
  else slots.anonymous++;
}

/** A waiting task: requeued, unblocked or blocked as its time and dependencies say, and a candidate when ready. */
function sortWaiting(
  task: Task,
  now: number,
  backoffMs: number,
  unmet: (task: Task) => number[],
  sorted: Sorted,
  questionHours: number,
): void {
  switch (task.state) {
    case "rate-limited": {
      if (rateLimitEndsMs(task, backoffMs) > now) return;
      sorted.requeued.push({ kind: "requeue-rate-limited", taskId: task.id });
      const waits = unmet(task);
      if (waits.length > 0) sorted.blocked.push({ kind: "block", taskId: task.id, blockedBy: waits });
      // Requeueing resets the FIFO key to now, as the transition will.
      else sorted.candidates.push({ task, queuedMs: now });
      return;
    }
    case "waiting": {
      // Only an unanswered question expires; an answered one is queued by its answer.
      if (
        task.question?.answer ||
        ms(task.question?.askedAt ?? task.updatedAt) + questionHours * 3600_000 > now
      )
        return;
      sorted.expired.push({ kind: "expire-question", taskId: task.id, hours: questionHours });
      return;
    }
    case "blocked": {
      if (unmet(task).length > 0) return;
      sorted.unblocked.push({ kind: "unblock", taskId: task.id });
      sorted.candidates.push({ task, queuedMs: ms(task.queuedAt) });
      return;
    }
    case "queued": {
      // A retry backing off, or a task whose previous run has not stopped yet: it keeps its place and waits.
      if (ms(task.resetAt) > now || ms(task.stopping?.until) > now) return;
      const waits = unmet(task);
      if (waits.length > 0) sorted.blocked.push({ kind: "block", taskId: task.id, blockedBy: waits });
      else sorted.candidates.push({ task, queuedMs: ms(task.queuedAt) });
      return;
    }
    default:
      return;
  }
}

/** The first pass: each task counted as running or sorted as waiting. */
function sortTasks(input: SchedulerInput, now: number): Sorted {
  const { tasks, config } = input;
  const closed = input.closedIssues ?? EMPTY_SET;
  const backoffMs = (config.retries?.backoff_seconds ?? 60) * 1000;
  const questionHours = config.ask_human?.expire_after_hours ?? DEFAULT_QUESTION_HOURS;
  const serialize = config.serialize_overlapping === true;
  const doneIssues = doneIssuesOf(tasks);
  const unmet = (task: Task) => unmetDependencies(task, doneIssues, closed);
  const max = config.max_concurrent;
  const sorted: Sorted = {
    expired: [],
    requeued: [],
    unblocked: [],
    blocked: [],
    candidates: [],
    slots: { max, taken: new Uint8Array(max + 1), busy: 0, anonymous: 0, busyPerCoder: new Map(), inUse: [] },
  };
  for (const task of tasks) {
    if (ACTIVE_STATES.has(task.state)) countRunning(task, now, serialize, sorted);
    else sortWaiting(task, now, backoffMs, unmet, sorted, questionHours);
  }
  return sorted;
}

/** Why `task` may not take a slot now, as a hold decision; "full" when its coder is at its cap (no decision). */
function holdOf(task: Task, input: SchedulerInput, slots: SlotUse): SchedulerDecision | "full" | undefined {
  const coder = input.config.coders[task.coder];
  if (!coder?.enabled) {
    const reason = coder
      ? `coder "${task.coder}" is disabled in the config`
      : `coder "${task.coder}" is not configured`;
    return { kind: "hold", taskId: task.id, reason };
  }
  if ((slots.busyPerCoder.get(task.coder) ?? 0) >= (coder.max_concurrent ?? Number.POSITIVE_INFINITY))
    return "full";
  if (input.config.serialize_overlapping === true && task.files?.length) {
    const clash = overlapping(task, slots.inUse);
    if (clash) {
      const reason = `waits for gh-${clash.with.issue}: both touch ${clash.files.join(", ")}`;
      return { kind: "hold", taskId: task.id, reason, waitsFor: clash.with.issue };
    }
  }
  const r = input.readiness?.(task);
  return r && !r.ready ? { kind: "hold", taskId: task.id, reason: r.reason } : undefined;
}

/** The second pass: candidates in queue order take the free slots, unless held. */
function fillSlots(
  candidates: Candidate[],
  slots: SlotUse,
  input: SchedulerInput,
): { held: SchedulerDecision[]; dispatched: SchedulerDecision[] } {
  const held: SchedulerDecision[] = [];
  const dispatched: SchedulerDecision[] = [];
  let free = slots.max - slots.busy;
  if (free <= 0 || candidates.length === 0) return { held, dispatched };
  candidates.sort(compareCandidates);
  // Slots pinned by no lease take the lowest free numbers, so dispatches never reuse them.
  const freeSlots: number[] = [];
  for (let s = 1; s <= slots.max; s++) if (!slots.taken[s]) freeSlots.push(s);
  let nextSlot = slots.anonymous;
  const coderFull = new Set<string>();
  for (const { task } of candidates) {
    if (free <= 0) break;
    if (coderFull.has(task.coder)) continue;
    const hold = holdOf(task, input, slots);
    if (hold === "full") {
      coderFull.add(task.coder);
      continue;
    }
    if (hold) {
      held.push(hold);
      continue;
    }
    const slot = freeSlots[nextSlot++];
    if (slot === undefined) break;
    dispatched.push({ kind: "dispatch", taskId: task.id, slot });
    slots.busyPerCoder.set(task.coder, (slots.busyPerCoder.get(task.coder) ?? 0) + 1);
    if (input.config.serialize_overlapping === true && task.files?.length) slots.inUse.push(task);
    free--;
  }
  return { held, dispatched };
}

/**
 * One scheduling pass: a pure function from the task list, the config and the time to decisions.
 * Rules: at most `max_concurrent` tasks in slot-holding states (dispatched, planning, running) and at
 * most `coders.<c>.max_concurrent` per coder; priority 0 first; FIFO (queuedAt, then issue) within a
 * priority; a task is blocked until every issue it depends on is closed or has a `done` fleet task
 * (an epic: and every one of its sub-issues, see doneIssuesOf);
 * expired leases free their slot; rate-limited tasks return to the queue after `resetAt` (or after
 * `retries.backoff_seconds` when the provider gave no reset time); with `serialize_overlapping`, a
 * task whose files overlap a running or just-dispatched task's is held ("waits for gh-N: both touch
 * src/a.ts") and a later task may take the slot. O(n log n) in the queued tasks (plus the overlap check).
 */
export function scheduleNext(input: SchedulerInput): SchedulerDecision[] {
  const now = ms(input.now);
  if (Number.isNaN(now)) throw new TypeError(`scheduleNext: "now" is not an RFC3339 time: ${input.now}`);
  const sorted = sortTasks(input, now);
  const { held, dispatched } = fillSlots(sorted.candidates, sorted.slots, input);
  return [
    ...sorted.expired,
    ...sorted.requeued,
    ...sorted.unblocked,
    ...sorted.blocked,
    ...held,
    ...dispatched,
  ];
}

/** Longest wait between two attempts of a task, however many attempts failed. */
export const MAX_RETRY_BACKOFF_SECONDS = 6 * 3600;

/**
 * When a task whose attempt `attempt` (1-based) failed may run again: `backoff_seconds` doubled per
 * failed attempt (60 s, 120 s, 240 s, ...), at most MAX_RETRY_BACKOFF_SECONDS. Undefined for no wait.
 */
export function retryNotBefore(now: string, attempt: number, backoffSeconds: number): string | undefined {
  if (backoffSeconds <= 0) return undefined;
  const factor = 2 ** Math.min(Math.max(attempt, 1) - 1, 20);
  const seconds = Math.min(backoffSeconds * factor, Math.max(backoffSeconds, MAX_RETRY_BACKOFF_SECONDS));
  return new Date(ms(now) + seconds * 1000).toISOString();
}

/** The reason shown on a task going back to the queue for another attempt. */
export function retryReason(reason: string, notBefore: string | undefined): string {
  return notBefore ? `${reason}; retrying after ${notBefore.slice(11, 19)} UTC` : `${reason}; retrying`;
}

/**
 * The next moment a scheduling pass would decide something without any event: a rate limit or a
 * retry backoff running out, a lease expiring. Undefined when nothing waits on time. O(n).
 */
export function nextWakeAt(
  tasks: readonly Task[],
  config: {
    retries?: Pick<FleetConfig["retries"], "backoff_seconds">;
    ask_human?: Pick<FleetConfig["ask_human"], "expire_after_hours">;
  },
  now: string,
): string | undefined {
  const nowMs = ms(now);
  const backoffMs = (config.retries?.backoff_seconds ?? 60) * 1000;
  const questionMs = (config.ask_human?.expire_after_hours ?? DEFAULT_QUESTION_HOURS) * 3600_000;
  let best = Number.POSITIVE_INFINITY;
  const consider = (t: number) => {
    if (t > nowMs && t < best) best = t;
  };
  for (const task of tasks) {
    if (task.state === "rate-limited") consider(rateLimitEndsMs(task, backoffMs));
    else if (task.state === "queued" && (task.resetAt || task.stopping)) {
      if (task.resetAt) consider(ms(task.resetAt));
      if (task.stopping) consider(ms(task.stopping.until));
    } else if (ACTIVE_STATES.has(task.state) && task.lease) consider(ms(task.lease.expiresAt));
    else if (task.state === "waiting" && !task.question?.answer)
      consider(questionExpiresMs(task, questionMs));
  }
  return Number.isFinite(best) ? new Date(best).toISOString() : undefined;
}

/** A queued task that waited (a retry's backoff, its previous run's stop) and may start now. */
const waitEnded = (task: Task, nowMs: number): boolean =>
  (task.resetAt !== undefined || task.stopping !== undefined) &&
  !(ms(task.resetAt) > nowMs) &&
  !(ms(task.stopping?.until) > nowMs);

/** The first running (or just dispatched) task that shares files with `task`, and those files. */
function overlapping(task: Task, running: readonly Task[]): { with: Task; files: string[] } | undefined {
  for (const other of running) {
    if (other.id === task.id) continue;
    const files = sharedFiles(task.files, other.files);
    if (files.length > 0) return { with: other, files };
  }
  return undefined;
}

export interface QueuePosition {
  /** 1-based place among queued tasks, in dispatch order. */
  position: number;
  /** Queued tasks in all. */
  of: number;
  /** Slots in use. */
  busy: number;
  cap: number;
}

/**
 * Where a queued task stands ("queued: position 2 of 5, 3 of 3 slots busy"), in the scheduler's order.
 * Undefined when the task is unknown or not queued. O(n).
 */
export function queuePosition(
  tasks: readonly Task[],
  taskId: string,
  config: Pick<FleetConfig, "max_concurrent"> = { max_concurrent: 3 },
): QueuePosition | undefined {
  const target = tasks.find((t) => t.id === taskId);
  if (target?.state !== "queued") return undefined;
  const mine: Candidate = { task: target, queuedMs: ms(target.queuedAt) };
  let ahead = 0;
  let of = 0;
  let busy = 0;
  for (const t of tasks) {
    if (ACTIVE_STATES.has(t.state)) busy++;
    if (t.state !== "queued") continue;
    of++;
    if (t !== target && compareCandidates({ task: t, queuedMs: ms(t.queuedAt) }, mine) < 0) ahead++;
  }
  return { position: ahead + 1, of, busy, cap: config.max_concurrent };
}

/**
 * Whether a scheduling pass now would move a task that no webhook will move: a rate-limited task
 * past its reset, or a retry past its backoff while a slot is free. A poller (the local worker) runs
 * a pass only then, so a wait costs reads, not commits or runs. O(n).
 */
export function wakeDue(
  tasks: readonly Task[],
  config: Pick<FleetConfig, "max_concurrent"> & {
    retries?: Pick<FleetConfig["retries"], "backoff_seconds">;
    ask_human?: Pick<FleetConfig["ask_human"], "expire_after_hours">;
  },
  now: string,
): boolean {
  const nowMs = ms(now);
  const backoffMs = (config.retries?.backoff_seconds ?? 60) * 1000;
  const questionMs = (config.ask_human?.expire_after_hours ?? DEFAULT_QUESTION_HOURS) * 3600_000;
  let busy = 0;
  let retryDue = false;
  for (const task of tasks) {
    if (task.state === "waiting" && !task.question?.answer && questionExpiresMs(task, questionMs) <= nowMs)
      return true;
    if (ACTIVE_STATES.has(task.state)) busy++;
    else if (task.state === "rate-limited") {
      if (rateLimitEndsMs(task, backoffMs) <= nowMs) return true;
    } else if (task.state === "queued" && waitEnded(task, nowMs)) retryDue = true;
  }
  return retryDue && busy < config.max_concurrent;
}
