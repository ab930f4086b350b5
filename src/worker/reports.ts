import type { TaskState } from "../core/task.ts";
import type { TokenUsage } from "../core/usage.ts";
import type { GitHubClient, IssueRef } from "../github/client.ts";
import { upsertMarkedComment } from "../github/upsert-comment.ts";
import { planMarker, renderPlanComment } from "../render/plan-comment.ts";
import {
  GITHUB_COMMENT_LIMIT,
  type RunReportView,
  renderRunReport,
  runReportMarker,
  truncateMiddle,
} from "../render/run-report.ts";
import { renderTokenReport, type TokenReportView, tokenReportMarker } from "../render/token-report.ts";

export type Redact = (text: string) => string;

/** Redacted, and still within GitHub's limit after redaction changed its length. */
const finalBody = (body: string, redact: Redact): string =>
  truncateMiddle(redact(body), GITHUB_COMMENT_LIMIT);

/**
 * Posts a task's comments on its issue. Each carries a marker, so a rerun edits its comment
 * instead of adding one; every body passes through `redact` right before it leaves.
 */
export function createIssueReporter(octokit: GitHubClient, issue: IssueRef, taskId: string, redact: Redact) {
  const post = (marker: string, body: string) =>
    upsertMarkedComment(octokit, issue, marker, finalBody(body, redact));
  return {
    plan: (plan: string, awaitingApproval: boolean) =>
      post(planMarker(taskId), renderPlanComment({ taskId, plan: redact(plan), awaitingApproval })),
    tokens: (v: Omit<TokenReportView, "taskId">) =>
      post(tokenReportMarker(taskId), renderTokenReport({ ...v, taskId })),
    // The log is redacted before its tail is cut, so a secret split by the cut cannot slip through.
    run: (v: Omit<RunReportView, "taskId">) =>
      post(
        runReportMarker(taskId),
        renderRunReport({ ...v, taskId, log: v.log === undefined ? undefined : redact(v.log) }),
      ),
  };
}
export type IssueReporter = ReturnType<typeof createIssueReporter>;

export interface Progress {
  state: TaskState;
  step: string;
  usage?: TokenUsage;
  costUsd?: number | null;
}

/**
 * Passes progress on at most once per `intervalMs` of the injected clock. A change of state is
 * passed at once (there are a handful per run, and the tracking comment must not show a stale
 * state); a callback that throws or rejects never stops the run.
 */
export function throttleProgress(
  onProgress: ((p: Progress) => void | Promise<void>) | undefined,
  clock: () => Date,
  intervalMs = 15_000,
): (p: Progress, force?: boolean) => Promise<void> {
  let lastAt = Number.NEGATIVE_INFINITY;
  let lastState: TaskState | undefined;
  return async (p, force = false) => {
    if (!onProgress) return;
    const now = clock().getTime();
    if (!force && p.state === lastState && now - lastAt < intervalMs) return;
    lastAt = now;
    lastState = p.state;
    try {
      await onProgress(p);
    } catch {
      // Progress is best effort: a failed comment edit must not fail the task.
    }
  };
}
