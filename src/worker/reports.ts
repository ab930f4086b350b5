import type { TaskState } from "../core/task.ts";
import type { TokenUsage } from "../core/usage.ts";
import type { GitHubClient, IssueRef } from "../github/client.ts";
import { upsertMarkedComment } from "../github/upsert-comment.ts";
import { hasMarker } from "../render/markers.ts";
import { planMarker, renderPlanComment } from "../render/plan-comment.ts";
import {
  GITHUB_COMMENT_LIMIT,
  type RunReportView,
  renderRunReport,
  runReportMarker,
  truncateMiddle,
} from "../render/run-report.ts";
import { renderTokenReport, type TokenReportView } from "../render/token-report.ts";

export type Redact = (text: string) => string;

/** Redacted, and still within GitHub's limit after redaction changed its length. */
const finalBody = (body: string, redact: Redact): string =>
  truncateMiddle(redact(body), GITHUB_COMMENT_LIMIT);

/**
 * Posts a task's comments on its issue. Each carries a marker, so a rerun edits its comment
 * instead of adding one; every body passes through `redact` right before it leaves.
 */
export function createIssueReporter(
  octokit: GitHubClient,
  issue: IssueRef,
  taskId: string,
  redact: Redact,
  /** The issue's comments listed at the run's start (only this run posts this task's reports since). */
  listed?: ReadonlyArray<{ id: number; body?: string | null; user?: { type?: string } | null }>,
) {
  const known = new Map<string, number>();
  const post = async (marker: string, body: string) => {
    const earlier = listed?.find((c) => c.user?.type === "Bot" && hasMarker(c.body, marker))?.id;
    const r = await upsertMarkedComment(
      octokit,
      issue,
      marker,
      finalBody(body, redact),
      known.get(marker) ?? earlier ?? (listed ? null : undefined),
    );
    known.set(marker, r.id);
    return r;
  };
  return {
    plan: (plan: string, awaitingApproval: boolean) =>
      post(planMarker(taskId), renderPlanComment({ taskId, plan: redact(plan), awaitingApproval })),
    /**
     * The run's final report: the token report (when the run used tokens) and the run report with
     * the log's tail, in ONE comment: each comment is a content-creating request, and GitHub allows
     * 500 of those an hour. The log is redacted before its tail is cut, so a secret split by the cut
     * cannot slip through.
     */
    final: (v: { tokens?: Omit<TokenReportView, "taskId">; run: Omit<RunReportView, "taskId"> }) => {
      const tokens = v.tokens ? `${renderTokenReport({ ...v.tokens, taskId })}\n\n` : "";
      const log = v.run.log === undefined ? undefined : redact(v.run.log);
      const run = renderRunReport({ ...v.run, taskId, log, limit: GITHUB_COMMENT_LIMIT - tokens.length });
      return post(runReportMarker(taskId), tokens + run);
    },
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
