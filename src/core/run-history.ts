import { combineTotals, type RunTotals } from "./usage.ts";

/**
 * What a run of a task was: a plan phase alone (waiting for approval), the work (with its plan
 * phase when no approval was asked), a split's plan, a review round on its PR, a rebase of the PR, or an
 * agent review of a pull request (pr-review).
 */
export type RunKind = "plan" | "work" | "split" | "review" | "rebase" | "pr-review";

/** One finished run of a task and what it cost (its phases together): each run once, in a task's `runs`. */
export interface RunRecord {
  kind: RunKind;
  /** RFC3339: when the run ended. */
  at: string;
  totals: RunTotals;
}

/** Runs kept per task; older ones are folded into the first row so totals stay whole. */
export const MAX_RUN_RECORDS = 50;

/** The task's run history with `run` added last. */
export function appendRun(runs: readonly RunRecord[] | undefined, run: RunRecord): RunRecord[] {
  const all = [...(runs ?? []), run];
  if (all.length <= MAX_RUN_RECORDS) return all;
  const head = all.slice(0, all.length - MAX_RUN_RECORDS + 1);
  return [{ ...head.at(-1)!, totals: sumRuns(head)! }, ...all.slice(head.length)];
}

/** Every run's figures added up; undefined when there are none. */
export function sumRuns(runs: readonly RunRecord[]): RunTotals | undefined {
  return runs.reduce<RunTotals | undefined>((a, r) => combineTotals(a, r.totals), undefined);
}

/** The kind of the task's next run, from what it was asked for (a run may learn it was a plan or a split). */
export const runKindOf = (task: { rebase?: unknown; instructions?: string; review?: unknown }): RunKind =>
  task.review ? "pr-review" : task.rebase ? "rebase" : task.instructions ? "review" : "work";
