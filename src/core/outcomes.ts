import type { TaskState } from "./task.ts";

/** How a run ended, as the worker reports it. */
export const RUN_OUTCOMES = [
  "pr-opened",
  "no-changes",
  "awaiting-approval",
  "failed",
  "timeout",
  "stall",
  "cancelled",
  "rate-limited",
  "over-budget",
] as const;
export type RunOutcome = (typeof RUN_OUTCOMES)[number];

/** What decides a run's next state besides its outcome. */
export interface OutcomeContext {
  /** The task may run again (see `hasRetriesLeft`). */
  retriesLeft: boolean;
  /** The failure is final: retrying would not help (e.g. an invalid split plan). */
  noRetry?: boolean;
  /** The task was cancelled from the issue while it ran; otherwise a cancelled run is a worker shutting down. */
  cancelledByUser: boolean;
}

/** As the run itself sees its end: no retry is known of, and a cancel is the user's. */
const AS_REPORTED: OutcomeContext = { retriesLeft: false, cancelledByUser: true };

/**
 * The state a task moves to when its run ends this way. A failure, a timeout or a stall goes back to
 * the queue while retries are left; over budget fails at once (running again would spend the same
 * budget again); a cancel from the issue stays cancelled, while a worker shutting down puts the task
 * back in the queue. Without `context`: the state the run reports as it ends, before the retry policy.
 */
export function stateAfterOutcome(outcome: RunOutcome, context: OutcomeContext = AS_REPORTED): TaskState {
  switch (outcome) {
    case "pr-opened":
      return "pr-open";
    case "no-changes":
      return "done";
    case "awaiting-approval":
      return "awaiting-approval";
    case "rate-limited":
      return "rate-limited";
    case "over-budget":
      return "failed";
    case "cancelled":
      return context.cancelledByUser ? "cancelled" : "queued";
    case "failed":
    case "timeout":
    case "stall":
      return context.retriesLeft && !context.noRetry ? "queued" : "failed";
  }
}

/** Whether moving to `state` after `outcome` is a retry (it waits out the backoff): a requeue that is not a shutdown's. */
export const isRetry = (outcome: RunOutcome, state: TaskState): boolean =>
  state === "queued" && outcome !== "cancelled";

/** Whether a task that has started `attempts` runs may start another, with `retries.max` retries allowed. */
export const hasRetriesLeft = (attempts: number, retriesMax: number): boolean => attempts <= retriesMax;
