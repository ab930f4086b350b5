import type { TaskState } from "./task.ts";

/** How a run ended, as the worker reports it. */
export const RUN_OUTCOMES = [
  "pr-opened",
  "no-changes",
  "split",
  "awaiting-approval",
  "waiting",
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
  /**
   * The run worked on the task's open pull request (a review round, a rebase): however it ends, the PR
   * is still open and waits for review, so the task goes back to it.
   */
  onOpenPr?: boolean;
  /** The run was an agent review of a pull request: like a split's, its product (the posted review) ends the task. */
  prReview?: boolean;
}

/** As the run itself sees its end: no retry is known of, and a cancel is the user's. */
const AS_REPORTED: OutcomeContext = { retriesLeft: false, cancelledByUser: true };

/**
 * The state a task moves to when its run ends this way. `done` is only ever a merge's (or a person's)
 * to give, so no run ends a task as done but a split, whose product is its sub-issues. A run with no
 * change fails (a person may retry it: nothing was made to review); a review round or rebase that
 * changes nothing, or fails for good, leaves the task on its still open PR. A failure, a timeout or
 * a stall goes back to the queue while retries are left; over budget is not retried (running again
 * would spend the same budget again); a cancel from the issue stays cancelled, while a worker shutting
 * down puts the task back in the queue. Without `context`: the state the run reports as it ends,
 * before the retry policy, for a run that is not on an open PR.
 */
export function stateAfterOutcome(outcome: RunOutcome, context: OutcomeContext = AS_REPORTED): TaskState {
  const ended: TaskState = context.onOpenPr ? "pr-open" : "failed";
  switch (outcome) {
    case "pr-opened":
      return "pr-open";
    case "split":
      return "done";
    case "no-changes":
      return context.prReview ? "done" : ended;
    case "over-budget":
      return ended;
    case "awaiting-approval":
      return "awaiting-approval";
    case "waiting":
      return "waiting";
    case "rate-limited":
      return "rate-limited";
    case "cancelled":
      return context.cancelledByUser ? "cancelled" : "queued";
    case "failed":
    case "timeout":
    case "stall":
      return context.retriesLeft && !context.noRetry ? "queued" : ended;
  }
}

/** How a person runs the task again: a command on the issue, or in local mode the terminal's. */
export const retryHint = (taskId: string, local: boolean | undefined): string =>
  local ? `run \`fleet retry ${taskId}\`` : "comment `/fleet retry`";

/** Why a task is where its run's outcome put it, when the state alone does not say (no change, a round that ended on its PR). */
export function outcomeNote(
  outcome: RunOutcome,
  to: TaskState,
  reason: string | undefined,
  /** How a person runs the task again where they read this (see retryHint). */
  retry = retryHint("", false),
): string | undefined {
  const why = reason?.trim() ? ` ${reason.trim()}${/[.!?]$/.test(reason.trim()) ? "" : "."}` : "";
  if (outcome === "no-changes" && to === "done") return reason;
  if (outcome === "no-changes" && to !== "pr-open")
    return `No changes, so no pull request.${why} ${retry[0]!.toUpperCase()}${retry.slice(1)} to run it again.`;
  if (to === "pr-open" && outcome === "no-changes")
    return `The round ended without changes; the pull request is as it was.${why}`;
  if (to === "pr-open" && outcome !== "pr-opened")
    return `The round ended (${outcome}); the pull request is as it was.${why}`;
  return reason;
}

/** Whether moving to `state` after `outcome` is a retry (it waits out the backoff): a requeue that is not a shutdown's. */
export const isRetry = (outcome: RunOutcome, state: TaskState): boolean =>
  state === "queued" && outcome !== "cancelled";

/** Whether a task that has started `attempts` runs may start another, with `retries.max` retries allowed. */
export const hasRetriesLeft = (attempts: number, retriesMax: number): boolean => attempts <= retriesMax;
