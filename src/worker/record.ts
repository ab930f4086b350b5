import { SLOT_HOLDING_STATES } from "../core/lifecycle.ts";
import { hasRetriesLeft, isRetry, stateAfterOutcome } from "../core/outcomes.ts";
import { appendRun, runKindOf } from "../core/run-history.ts";
import { retryNotBefore, retryReason } from "../core/scheduler.ts";
import { type FleetStateDoc, recordLedger } from "../core/state-doc.ts";
import type { Task } from "../core/task.ts";
import { combineTotals } from "../core/usage.ts";
import { createCredentialRotation } from "../economy/rotation.ts";
import { resultSummaryOf } from "./ab-comparison.ts";
import type { ExecuteDeps } from "./execute-task.ts";
import type { TaskOutcome } from "./run-task.ts";

/**
 * Step 5: the run's outcome as one transition of the task (its totals, run row, PR, RESULT.json in
 * figures and the ledger line in the same commit): the state it ends in, a retry after its backoff,
 * or a wait for a rate limit's reset.
 */
export async function recordOutcome(
  task: Task,
  outcome: TaskOutcome,
  deps: ExecuteDeps,
  lost: string | undefined,
  /** What the run adds to the same commit (its last context, its credentials' windows). */
  alsoDoc?: (doc: FleetStateDoc) => FleetStateDoc,
) {
  const clock = deps.clock ?? (() => new Date());
  const totals = combineTotals(outcome.planTotals, outcome.totals);
  const patch: Partial<Task> = {};
  if (totals) patch.totals = totals;
  if (totals) patch.runs = appendRun(task.runs, { kind: runKindOf(task), at: clock().toISOString(), totals });
  if (outcome.pr) patch.pr = outcome.pr.number;
  // A rebase run writes no RESULT.json: the work run's result stays the task's.
  if (!task.rebase) patch.result = resultSummaryOf(task.attempts, outcome.artifacts.result);
  // Review instructions are used once; a later review asks again.
  if (task.instructions) patch.instructions = undefined;
  const reason = outcome.reason;
  const to = stateAfterOutcome(outcome.outcome, {
    retriesLeft: hasRetriesLeft(task.attempts, deps.config.retries.max),
    noRetry: outcome.noRetry,
    // A cancel from the issue already moved the task; a worker shutting down puts it back in the queue.
    cancelledByUser: lost === "cancelled",
  });
  const retrying = isRetry(outcome.outcome, to);
  const now = clock().toISOString();
  const resetAt = retrying
    ? retryNotBefore(now, task.attempts, deps.config.retries.backoff_seconds)
    : (outcome.rateLimit?.resetsAt ??
      (outcome.rateLimit?.retryAfterSeconds !== undefined
        ? new Date(clock().getTime() + outcome.rateLimit.retryAfterSeconds * 1000).toISOString()
        : undefined));
  const why = retrying
    ? retryReason(
        `attempt ${task.attempts} ended (${outcome.outcome}${reason ? `: ${reason}` : ""})`,
        resetAt,
      )
    : reason;
  // The rebase request is used once, unless the run is retried.
  if (task.rebase && to !== "queued" && to !== "rate-limited") patch.rebase = undefined;
  await deps.queue.move(task.issue, to, {
    taskId: task.id,
    // The PR's own webhook may have moved the task to pr-open already: then only the fields are added.
    from: [...SLOT_HOLDING_STATES, to],
    // The end of the plan phase waits for this commit when no heartbeat carried it (see execute-task.ts).
    via: "running",
    reason: why,
    resetAt,
    patch,
    // The run's line in the token ledger goes into the same commit.
    alsoDoc: (doc) => {
      const withRun = alsoDoc ? alsoDoc(doc) : doc;
      return totals
        ? recordLedger(withRun, {
            day: clock().toISOString().slice(0, 10),
            coder: task.coder,
            usage: totals.usage,
            costUsd: totals.costUsd,
          })
        : withRun;
    },
  });
}

/** The coder's credential pool: configured names (plus `credentialFor`'s own, when it is not one of them). */
export function credentialPool(coder: string, deps: ExecuteDeps, clock: () => Date) {
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
    log: deps.log,
  });
}
