import type { FleetConfig } from "../core/config.ts";
import type { Readiness } from "../core/scheduler.ts";
import type { Ledger } from "../core/state-doc.ts";
import type { Task } from "../core/task.ts";

/** Per-task ceilings for one coder: the stricter of the repository's and the coder's own. */
export interface PerTaskLimits {
  tokens?: number;
  usd?: number;
}

/** The stricter of two ceilings; 0 (the repository's way of turning one off) is none. */
const stricter = (a: number | undefined, b: number | undefined) => {
  const x = a ? a : undefined;
  const y = b ? b : undefined;
  return x === undefined ? y : y === undefined ? x : Math.min(x, y);
};

export function perTaskLimits(budgets: FleetConfig["budgets"], coder: string): PerTaskLimits {
  const own = budgets.per_coder[coder] ?? {};
  const limits: PerTaskLimits = {};
  const tokens = stricter(budgets.per_task_tokens, own.per_task_tokens);
  const usd = stricter(budgets.per_task_usd, own.per_task_usd);
  if (tokens !== undefined) limits.tokens = tokens;
  if (usd !== undefined) limits.usd = usd;
  return limits;
}

const fmtUsd = (n: number) => `$${n.toFixed(2)}`;

/** Why a task that used `tokens` (and `costUsd`) must stop, or undefined while it is within its ceilings. */
export function overPerTaskBudget(
  limits: PerTaskLimits,
  used: { tokens: number; costUsd?: number | null },
): string | undefined {
  if (limits.tokens !== undefined && used.tokens > limits.tokens) {
    return `stopped: the task used ${used.tokens} tokens, over the per-task budget of ${limits.tokens}`;
  }
  if (limits.usd !== undefined && typeof used.costUsd === "number" && used.costUsd > limits.usd) {
    return `stopped: the task cost ${fmtUsd(used.costUsd)}, over the per-task budget of ${fmtUsd(limits.usd)}`;
  }
  return undefined;
}

/** The next 00:00 UTC after `now`: when a daily budget resets. */
export function nextUtcMidnight(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1));
}

/** The first instant of the next UTC month: when a monthly budget resets. */
export function nextMonthStart(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
}

/** Dollars the ledger records for days starting with `prefix` ("YYYY-MM-DD" or "YYYY-MM"), for one coder or all. */
export function ledgerSpend(ledger: Ledger, prefix: string, coder?: string): number {
  let sum = 0;
  for (const [day, coders] of Object.entries(ledger)) {
    if (!day.startsWith(prefix)) continue;
    for (const [c, entry] of Object.entries(coders)) {
      if (coder === undefined || c === coder) sum += entry.costUsd ?? 0;
    }
  }
  return sum;
}

/**
 * The daily/monthly ceilings as a scheduler readiness gate: a task whose repository or coder has
 * spent its ceiling (ledger, UTC days) is held, with a reason naming the budget and when it resets.
 * Spend is only known after a run, so the gate closes once the spent amount reaches the ceiling.
 */
export function budgetReadiness(
  budgets: FleetConfig["budgets"],
  ledger: Ledger,
  now: Date,
): (task: Pick<Task, "coder">) => Readiness {
  const day = now.toISOString().slice(0, 10);
  const month = day.slice(0, 7);
  const dayReset = nextUtcMidnight(now).toISOString();
  const monthReset = nextMonthStart(now).toISOString();
  const check = (
    limit: number | undefined,
    spent: number,
    what: string,
    resets: string,
  ): string | undefined =>
    limit !== undefined && spent >= limit
      ? `held: the ${what} of ${fmtUsd(limit)} is used (${fmtUsd(spent)} spent); it resets at ${resets}`
      : undefined;
  const repoDaily = check(budgets.daily_usd, ledgerSpend(ledger, day), "daily budget", dayReset);
  const repoMonthly = check(budgets.monthly_usd, ledgerSpend(ledger, month), "monthly budget", monthReset);
  return (task) => {
    const own = budgets.per_coder[task.coder] ?? {};
    const reason =
      repoDaily ??
      repoMonthly ??
      check(own.daily_usd, ledgerSpend(ledger, day, task.coder), `daily budget of ${task.coder}`, dayReset) ??
      check(
        own.monthly_usd,
        ledgerSpend(ledger, month, task.coder),
        `monthly budget of ${task.coder}`,
        monthReset,
      );
    return reason ? { ready: false, reason } : { ready: true };
  };
}

/** Tasks `user` requested that were created on `now`'s UTC day. */
export function tasksRequestedToday(tasks: readonly Task[], user: string, now: Date): number {
  const day = now.toISOString().slice(0, 10);
  return tasks.filter((t) => t.requestedBy === user && t.createdAt.slice(0, 10) === day).length;
}

/** Whether `user` may queue one more task today under `per_user_daily_tasks`; the reason says why not. */
export function perUserQuota(
  limit: number | undefined,
  tasks: readonly Task[],
  user: string,
  now: Date,
): { allowed: true } | { allowed: false; reason: string } {
  if (limit === undefined) return { allowed: true };
  const count = tasksRequestedToday(tasks, user, now);
  if (count < limit) return { allowed: true };
  return {
    allowed: false,
    reason: `@${user} has queued ${count} tasks today, the limit per user is ${limit} (\`per_user_daily_tasks\`); it resets at ${nextUtcMidnight(now).toISOString()}.`,
  };
}

/**
 * When the daily/monthly ceilings stop holding a queued task: the next UTC midnight when a task held
 * now would pass the gate then, else the next month's start. Undefined when no queued task is held.
 * The app wakes at that moment, so a held task starts by itself when its budget resets.
 */
export function budgetHoldEndsAt(
  budgets: FleetConfig["budgets"],
  ledger: Ledger,
  tasks: readonly Pick<Task, "coder" | "state">[],
  now: Date,
): string | undefined {
  const gateNow = budgetReadiness(budgets, ledger, now);
  const midnight = nextUtcMidnight(now);
  const gateTomorrow = budgetReadiness(budgets, ledger, midnight);
  let held = false;
  for (const t of tasks) {
    if (t.state !== "queued" || gateNow(t).ready) continue;
    held = true;
    if (gateTomorrow(t).ready) return midnight.toISOString();
  }
  return held ? nextMonthStart(now).toISOString() : undefined;
}
