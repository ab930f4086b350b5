import { TASK_STATES, type Task, type TaskState } from "./task.ts";

/** Where a run (dispatched, planning or running) may end besides its own next step. */
const RUN_EXITS = ["queued", "rate-limited", "cancelled", "failed", "done"] as const;

/**
 * Every legal state change. Anything not listed here is a bug and `transition` throws.
 *
 * Main path: queued -> (blocked) -> dispatched -> planning -> (awaiting-approval) -> running -> pr-open -> done.
 * Side exits: failed, cancelled, rate-limited (back to queued once the provider's limit resets).
 * Also: dispatched -> running (plan phase off); dispatched/planning/running -> queued (a lost run or an
 * expired lease goes back to the queue for a retry); pr-open -> queued -> ... -> pr-open (a review round
 * or a rebase run on the open PR, which ends back on it whatever it did); failed/cancelled -> queued (retry).
 * `done` is what a merge of the task's PR makes of it, from any state it can be in while the PR is open
 * (a review round queued or running, a cancel or failure that left the PR open), or a person (a local
 * issue closed with its branch pushed); the one run that ends in `done` is a split, whose product is
 * its sub-issues. A run that changes nothing is `failed` ("no changes"), never `done`.
 * `waiting`: the agent asked a person a question (its `ask_human` tool) and its run ended; the answer
 * sends the task back to the queue, and an unanswered question fails it once it expires.
 */
export const TRANSITIONS: Readonly<Record<TaskState, readonly TaskState[]>> = Object.freeze({
  queued: Object.freeze(["blocked", "dispatched", "cancelled", "failed", "done"] as const),
  // A blocked or awaiting-approval task may have a PR an earlier run opened (a cancel, then a new
  // label): its merge ends the task as done.
  blocked: Object.freeze(["queued", "cancelled", "failed", "done"] as const),
  dispatched: Object.freeze(["planning", "running", ...RUN_EXITS] as const),
  planning: Object.freeze(["awaiting-approval", "running", "waiting", ...RUN_EXITS] as const),
  // Approval sends the task back to the queue: the work phase needs a slot like any run.
  "awaiting-approval": Object.freeze(["queued", "running", "cancelled", "failed", "done"] as const),
  running: Object.freeze(["pr-open", "waiting", ...RUN_EXITS] as const),
  // pr-open -> queued: review-loop instructions wait for a slot like any run.
  "pr-open": Object.freeze(["running", "queued", "done", "cancelled", "failed"] as const),
  // An answer sends the question's task back to the queue; an expired question fails it; a merge of a
  // PR an earlier run opened ends it.
  waiting: Object.freeze(["queued", "cancelled", "failed", "done"] as const),
  done: Object.freeze([] as const),
  // A merged PR ends a task as done even after a cancel or a failure left its PR open.
  failed: Object.freeze(["queued", "done"] as const),
  cancelled: Object.freeze(["queued", "done"] as const),
  "rate-limited": Object.freeze(["queued", "cancelled", "failed", "done"] as const),
});

// The lists of states that decide something, each once. Sets for `has`, frozen lists for `from:`.

/**
 * States that hold a concurrency slot: an agent process is (or is about to be) running. A run's own
 * report, a lost run and an expired lease move a task only out of these.
 * `awaiting-approval` does not: the plan waits for a human, possibly for days, and must not starve the queue.
 * `pr-open` does not either; a review-loop iteration re-enters `running` and takes a slot again; nor
 * does `waiting`, whose question may wait for days.
 */
export const SLOT_HOLDING_STATES: readonly TaskState[] = Object.freeze(["dispatched", "planning", "running"]);
export const ACTIVE_STATES: ReadonlySet<TaskState> = new Set<TaskState>(SLOT_HOLDING_STATES);

/**
 * States in which nothing happens without a human: `done` is final; `failed` and `cancelled` only
 * leave through an explicit retry (or the merge of a PR they left open).
 */
export const TERMINAL_STATES: ReadonlySet<TaskState> = new Set<TaskState>(["done", "failed", "cancelled"]);

/** Every state that is not terminal: the task is still on its way. `/fleet cancel` stops it in any of them. */
export const LIVE_STATES: readonly TaskState[] = Object.freeze(
  TASK_STATES.filter((s) => !TERMINAL_STATES.has(s)),
);

/**
 * Live states a person cancels by removing the coder label or closing the issue (and the reconcile
 * when it finds either); a task with an open PR ends with its PR instead.
 */
export const CANCELLABLE_STATES: readonly TaskState[] = Object.freeze(
  LIVE_STATES.filter((s) => s !== "pr-open"),
);

/** States `/fleet retry` puts back in the queue. */
export const RETRYABLE_STATES: readonly TaskState[] = Object.freeze(["failed", "cancelled", "rate-limited"]);

/** Holds a concurrency slot (see SLOT_HOLDING_STATES). */
export const isActive = (state: TaskState): boolean => ACTIVE_STATES.has(state);
export const isTerminal = (state: TaskState): boolean => TERMINAL_STATES.has(state);
export const isLive = (state: TaskState): boolean => !TERMINAL_STATES.has(state);
export const isCancellable = (state: TaskState): boolean => CANCELLABLE_STATES.includes(state);

/** States whose `reason` field says why the task is there (queued: a retry, or a hold; pr-open: how a round on it ended). */
const STATES_WITH_REASON: ReadonlySet<TaskState> = new Set<TaskState>([
  "failed",
  "cancelled",
  "blocked",
  "rate-limited",
  "queued",
  "pr-open",
]);

export class IllegalTransitionError extends Error {
  override readonly name = "IllegalTransitionError";
  readonly taskId: string;
  readonly from: TaskState;
  readonly to: TaskState;
  constructor(taskId: string, from: TaskState, to: TaskState) {
    const allowed = TRANSITIONS[from];
    const hint =
      allowed.length === 0 ? `${from} is final` : `from ${from} a task can move to: ${allowed.join(", ")}`;
    super(`cannot move task ${taskId} from ${from} to ${to} (${hint})`);
    this.taskId = taskId;
    this.from = from;
    this.to = to;
  }
}

export function canTransition(from: TaskState, to: TaskState): boolean {
  return TRANSITIONS[from]?.includes(to) ?? false;
}

export interface TransitionOptions {
  /** RFC3339; becomes `updatedAt` (and `queuedAt` when the task re-enters the queue). */
  now: string;
  /** Why the task failed, was cancelled, blocked or rate-limited. Dropped for other states. */
  reason?: string;
  /** For `rate-limited`: when the provider's limit resets (RFC3339). */
  resetAt?: string;
}

/**
 * The task in its new state; the input is not modified. Bookkeeping that follows from the move:
 * entering `queued` resets the FIFO key to `now` (a retry goes to the back of its priority), except
 * from `blocked` (a task that waited for its dependencies keeps its place);
 * entering `dispatched` counts a started run in `attempts`; leaving the slot-holding states drops
 * the lease; `reason` is kept only where it explains the state; `resetAt` only while rate-limited or backing off in the queue.
 */
export function transition(task: Task, to: TaskState, options: TransitionOptions): Task {
  if (!canTransition(task.state, to)) throw new IllegalTransitionError(task.id, task.state, to);
  const next: Task = { ...task, state: to, updatedAt: options.now };
  // A retry goes to the back of its priority; a task whose dependencies cleared keeps its place.
  if (to === "queued" && task.state !== "blocked") next.queuedAt = options.now;
  if (to === "dispatched") next.attempts = task.attempts + 1;
  if (!ACTIVE_STATES.has(to)) delete next.lease;
  if (STATES_WITH_REASON.has(to) && options.reason !== undefined) next.reason = options.reason;
  else delete next.reason;
  // Rate-limited: when the provider's window reopens; queued: when a retry's backoff ends.
  if ((to === "rate-limited" || to === "queued") && options.resetAt !== undefined)
    next.resetAt = options.resetAt;
  else delete next.resetAt;
  return next;
}
