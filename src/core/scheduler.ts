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

/**
 * One scheduling pass: a pure function from the task list, the config and the time to decisions.
 * Rules: at most `max_concurrent` tasks in slot-holding states (dispatched, planning, running) and at
 * most `coders.<c>.max_concurrent` per coder; priority 0 first; FIFO (queuedAt, then issue) within a
 * priority; a task is blocked until every issue it depends on is closed or has a `done` fleet task;
 * expired leases free their slot; rate-limited tasks return to the queue after `resetAt` (or after
 * `retries.backoff_seconds` when the provider gave no reset time); with `serialize_overlapping`, a
 * task whose files overlap a running or just-dispatched task's is held ("waits for gh-N: both touch
 * src/a.ts") and a later task may take the slot. O(n log n) in the queued tasks (plus the overlap check).
 */
export function scheduleNext(input: SchedulerInput): SchedulerDecision[] {
  const { tasks, config } = input;
  const now = ms(input.now);
  if (Number.isNaN(now)) throw new TypeError(`scheduleNext: "now" is not an RFC3339 time: ${input.now}`);
  const closed = input.closedIssues ?? EMPTY_SET;
  const backoffMs = (config.retries?.backoff_seconds ?? 60) * 1000;
  const max = config.max_concurrent;

  const doneIssues = new Set<number>();
  for (const t of tasks) if (t.state === "done") doneIssues.add(t.issue);

  const expired: SchedulerDecision[] = [];
  const requeued: SchedulerDecision[] = [];
  const unblocked: SchedulerDecision[] = [];
  const blocked: SchedulerDecision[] = [];
  const held: SchedulerDecision[] = [];
  const dispatched: SchedulerDecision[] = [];
  const candidates: Candidate[] = [];

  const slotTaken = new Uint8Array(max + 1);
  let busy = 0;
  let anonymous = 0;
  const busyPerCoder = new Map<string, number>();
  // Tasks holding a slot (or given one in this pass) whose files a candidate must not share.
  const serialize = config.serialize_overlapping === true;
  const inUse: Task[] = [];

  for (const task of tasks) {
    if (ACTIVE_STATES.has(task.state)) {
      const lease = task.lease;
      if (lease && ms(lease.expiresAt) <= now) {
        expired.push({ kind: "expire-lease", taskId: task.id });
        continue;
      }
      busy++;
      busyPerCoder.set(task.coder, (busyPerCoder.get(task.coder) ?? 0) + 1);
      if (serialize && task.files?.length) inUse.push(task);
      // A slot number held twice or out of range still counts as busy; it just does not pin a number.
      if (
        lease &&
        Number.isInteger(lease.slot) &&
        lease.slot >= 1 &&
        lease.slot <= max &&
        !slotTaken[lease.slot]
      ) {
        slotTaken[lease.slot] = 1;
      } else {
        anonymous++;
      }
      continue;
    }
    switch (task.state) {
      case "rate-limited": {
        const reset = ms(task.resetAt);
        const readyAt = Number.isNaN(reset) ? ms(task.updatedAt) + backoffMs : reset;
        if (readyAt <= now) {
          requeued.push({ kind: "requeue-rate-limited", taskId: task.id });
          const unmet = unmetDependencies(task, doneIssues, closed);
          if (unmet.length > 0) blocked.push({ kind: "block", taskId: task.id, blockedBy: unmet });
          // Requeueing resets the FIFO key to now, as the transition will.
          else candidates.push({ task, queuedMs: now });
        }
        break;
      }
      case "blocked": {
        if (unmetDependencies(task, doneIssues, closed).length === 0) {
          unblocked.push({ kind: "unblock", taskId: task.id });
          candidates.push({ task, queuedMs: ms(task.queuedAt) });
        }
        break;
      }
      case "queued": {
        // A retry backing off: it keeps its place in the queue and waits for its time.
        if (ms(task.resetAt) > now) break;
        const unmet = unmetDependencies(task, doneIssues, closed);
        if (unmet.length > 0) blocked.push({ kind: "block", taskId: task.id, blockedBy: unmet });
        else candidates.push({ task, queuedMs: ms(task.queuedAt) });
        break;
      }
      default:
        break;
    }
  }

  let free = max - busy;
  if (free > 0 && candidates.length > 0) {
    candidates.sort(compareCandidates);
    // Slots pinned by no lease take the lowest free numbers, so dispatches never reuse them.
    const freeSlots: number[] = [];
    for (let s = 1; s <= max; s++) if (!slotTaken[s]) freeSlots.push(s);
    let nextSlot = anonymous;
    const coderFull = new Set<string>();
    for (const { task } of candidates) {
      if (free <= 0) break;
      const coder = config.coders[task.coder];
      if (!coder?.enabled) {
        held.push({
          kind: "hold",
          taskId: task.id,
          reason: coder
            ? `coder "${task.coder}" is disabled in the config`
            : `coder "${task.coder}" is not configured`,
        });
        continue;
      }
      if (coderFull.has(task.coder)) continue;
      const cap = coder.max_concurrent ?? Number.POSITIVE_INFINITY;
      const coderBusy = busyPerCoder.get(task.coder) ?? 0;
      if (coderBusy >= cap) {
        coderFull.add(task.coder);
        continue;
      }
      if (serialize && task.files?.length) {
        const clash = overlapping(task, inUse);
        if (clash) {
          held.push({
            kind: "hold",
            taskId: task.id,
            reason: `waits for gh-${clash.with.issue}: both touch ${clash.files.join(", ")}`,
            waitsFor: clash.with.issue,
          });
          continue;
        }
      }
      if (input.readiness) {
        const r = input.readiness(task);
        if (!r.ready) {
          held.push({ kind: "hold", taskId: task.id, reason: r.reason });
          continue;
        }
      }
      const slot = freeSlots[nextSlot++];
      if (slot === undefined) break;
      dispatched.push({ kind: "dispatch", taskId: task.id, slot });
      busyPerCoder.set(task.coder, coderBusy + 1);
      if (serialize && task.files?.length) inUse.push(task);
      free--;
    }
  }

  return [...expired, ...requeued, ...unblocked, ...blocked, ...held, ...dispatched];
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
  config: { retries?: Pick<FleetConfig["retries"], "backoff_seconds"> },
  now: string,
): string | undefined {
  const nowMs = ms(now);
  const backoffMs = (config.retries?.backoff_seconds ?? 60) * 1000;
  let best = Number.POSITIVE_INFINITY;
  const consider = (t: number) => {
    if (t > nowMs && t < best) best = t;
  };
  for (const task of tasks) {
    if (task.state === "rate-limited") {
      const reset = ms(task.resetAt);
      consider(Number.isNaN(reset) ? ms(task.updatedAt) + backoffMs : reset);
    } else if (task.state === "queued" && task.resetAt) consider(ms(task.resetAt));
    else if (ACTIVE_STATES.has(task.state) && task.lease) consider(ms(task.lease.expiresAt));
  }
  return Number.isFinite(best) ? new Date(best).toISOString() : undefined;
}

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
  config: Pick<FleetConfig, "max_concurrent"> & { retries?: Pick<FleetConfig["retries"], "backoff_seconds"> },
  now: string,
): boolean {
  const nowMs = ms(now);
  const backoffMs = (config.retries?.backoff_seconds ?? 60) * 1000;
  let busy = 0;
  let retryDue = false;
  for (const task of tasks) {
    if (ACTIVE_STATES.has(task.state)) busy++;
    else if (task.state === "rate-limited") {
      const reset = ms(task.resetAt);
      if ((Number.isNaN(reset) ? ms(task.updatedAt) + backoffMs : reset) <= nowMs) return true;
    } else if (task.state === "queued" && task.resetAt && ms(task.resetAt) <= nowMs) retryDue = true;
  }
  return retryDue && busy < config.max_concurrent;
}
