import type { FleetConfig } from "../core/config.ts";
import { hasRetriesLeft, isRetry, outcomeNote, retryHint, stateAfterOutcome } from "../core/outcomes.ts";
import { runKindOf } from "../core/run-history.ts";
import { retryNotBefore, retryReason } from "../core/scheduler.ts";
import type { FleetStateDoc } from "../core/state-doc.ts";
import type { Task } from "../core/task.ts";
import { combineTotals } from "../core/usage.ts";
import type { WindowBook } from "../economy/credential-windows.ts";
import { createCredentialRotation } from "../economy/rotation.ts";
import type { RepoQueue } from "../queue/repo-queue.ts";
import type { StateStore } from "../state/store.ts";
import type { TaskOutcome } from "./3-attempt.ts";
import { resultSummaryOf } from "./runs/ab-comparison.ts";

/** What step 5 records with: the queue's transitions, the config's retry policy, this worker's lease. */
export interface RecordInput {
  queue: RepoQueue;
  config: FleetConfig;
  holder: string;
  clock?: () => Date;
  /** Local mode: notes name `fleet` commands, not `/fleet` comments. */
  local?: boolean;
}

/** What the credential pool draws on: the configured names, their values on this worker, the state's windows. */
export interface PoolInput {
  config: FleetConfig;
  store: StateStore;
  credentialFor?: (coder: string) => { name: string; value: string } | undefined;
  credentialValue?: (name: string) => string | undefined;
  /** What this worker saw of the credentials' windows (default: the process's own). */
  book?: WindowBook;
  log?: (message: string) => void;
}

/**
 * Step 5: the run's outcome as one transition of the task (its run row, its PR, RESULT.json in figures
 * and the ledger line in the same commit): the state it ends in, a retry after its backoff, or a wait
 * for a rate limit's reset. The run is recorded once whatever happened meanwhile; the state moves only
 * while the task still holds this worker's lease (see RepoQueue.endRun).
 */
export async function recordOutcome(
  task: Task,
  outcome: TaskOutcome,
  deps: RecordInput,
  lost: string | undefined,
  /** What the run adds to the same commit (its last context, its credentials' windows). */
  alsoDoc?: (doc: FleetStateDoc) => FleetStateDoc,
  /**
   * When the run's lease runs out (epoch ms): its end keeps trying past the store's usual retries until
   * then. Given up, the run would be lost: its task dispatched again once the lease ran out, its agent
   * run again.
   */
  heldUntilMs?: number,
) {
  const clock = deps.clock ?? (() => new Date());
  const totals = combineTotals(outcome.planTotals, outcome.totals);
  const patch: Partial<Task> = {};
  if (outcome.pr) patch.pr = outcome.pr.number;
  if (outcome.outcome === "waiting" && outcome.question)
    patch.question = { text: outcome.question, askedAt: clock().toISOString() };
  // A rebase run writes no RESULT.json: the work run's result stays the task's.
  if (!task.rebase) {
    patch.result = resultSummaryOf(task.attempts, outcome.artifacts.result);
    if (outcome.outcome === "no-changes") patch.result.noChanges = true;
  }
  const kind = outcome.kind ?? runKindOf(task);
  const to = stateAfterOutcome(outcome.outcome, {
    retriesLeft: hasRetriesLeft(task.attempts, deps.config.retries.max),
    noRetry: outcome.noRetry,
    // A cancel from the issue already moved the task; a worker shutting down puts it back in the queue.
    cancelledByUser: lost === "cancelled",
    onOpenPr: kind === "review" || kind === "rebase",
    prReview: kind === "pr-review",
  });
  const retrying = isRetry(outcome.outcome, to);
  const now = clock().toISOString();
  const resetAt = retrying
    ? retryNotBefore(now, task.attempts, deps.config.retries.backoff_seconds)
    : (outcome.rateLimit?.resetsAt ??
      (outcome.rateLimit?.retryAfterSeconds !== undefined
        ? new Date(clock().getTime() + outcome.rateLimit.retryAfterSeconds * 1000).toISOString()
        : undefined));
  const reason = outcome.reason;
  const why = retrying
    ? retryReason(
        `attempt ${task.attempts} ended (${outcome.outcome}${reason ? `: ${reason}` : ""})`,
        resetAt,
      )
    : outcomeNote(outcome.outcome, to, reason, retryHint(task.id, deps.local));
  // The answer to the agent's question is for the run it queued (and that run's retries): once that run
  // has ended otherwise, later runs of the task go on without it.
  if (task.question?.answer && outcome.outcome !== "waiting" && to !== "queued" && to !== "rate-limited")
    patch.question = undefined;
  // Review instructions and a rebase request are used once, unless the run goes again (a retry, a rate
  // limit's reset, the answer to the agent's question); a later review asks again.
  if (to !== "queued" && to !== "rate-limited" && to !== "waiting") {
    if (task.instructions) patch.instructions = undefined;
    if (task.rebase) patch.rebase = undefined;
  }
  await deps.queue.endRun(
    task.id,
    {
      holder: deps.holder,
      to,
      // The end of the plan phase waits for this commit when no heartbeat carried it (see execute-task.ts).
      via: "running",
      reason: why,
      resetAt,
      patch,
      ...(totals ? { run: { kind, at: now, totals } } : {}),
    },
    alsoDoc,
    heldUntilMs,
  );
}

/** The coder's credential pool: configured names (plus `credentialFor`'s own, when it is not one of them). */
export function credentialPool(coder: string, deps: PoolInput, clock: () => Date) {
  const names = [...(deps.config.coders[coder]?.credentials ?? [])];
  const given = deps.credentialFor?.(coder);
  if (given && !names.includes(given.name)) names.push(given.name);
  const secretOf =
    deps.credentialValue ?? ((name: string) => (given && given.name === name ? given.value : undefined));
  return createCredentialRotation({
    store: deps.store,
    coder,
    names,
    secretOf,
    clock,
    fallbackSeconds: deps.config.retries.backoff_seconds,
    nearLimitPct: deps.config.credential_near_limit_pct,
    ...(deps.book ? { book: deps.book } : {}),
    log: deps.log,
  });
}
