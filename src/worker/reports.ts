import type { TaskState } from "../core/task.ts";
import type { TokenUsage } from "../core/usage.ts";
import type { GitHubClient, IssueRef } from "../github/client.ts";
import { upsertMarkedComment } from "../github/upsert-comment.ts";
import { hasMarker } from "../render/markers.ts";
import {
  AWAITING_APPROVAL_LINE,
  PLAN_POSTED_LINE,
  planMarker,
  renderPlanComment,
} from "../render/plan-comment.ts";
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
export function createIssueReporter(
  octokit: GitHubClient,
  issue: IssueRef,
  taskId: string,
  redact: Redact,
  /** The issue's comments listed at the run's start (only this run posts this task's reports since). */
  listed?: ReadonlyArray<{ id: number; body?: string | null; user?: { type?: string } | null }>,
) {
  // Without a listing from the run's start, the first report lists the comments once (it must look anyway).
  let comments = listed;
  const listOnce = async () => {
    comments ??= await octokit.paginate(octokit.rest.issues.listComments, { ...issue, per_page: 100 });
    return comments;
  };
  const known = new Map<string, number>();
  const posted = new Map<string, string>();
  const post = async (marker: string, body: string) => {
    const all = known.has(marker) ? [] : await listOnce();
    const earlier = all.find((c) => c.user?.type === "Bot" && hasMarker(c.body, marker))?.id;
    const r = await upsertMarkedComment(
      octokit,
      issue,
      marker,
      finalBody(body, redact),
      known.get(marker) ?? earlier ?? null,
    );
    known.set(marker, r.id);
    posted.set(marker, body);
    return r;
  };
  /** The plan part of the task's report comment (this run's, or an earlier run's), without any report below it. */
  const planPart = async (): Promise<string | undefined> => {
    const body =
      posted.get(planMarker(taskId)) ??
      (await listOnce()).find((c) => c.user?.type === "Bot" && hasMarker(c.body, planMarker(taskId)))?.body ??
      undefined;
    if (!body) return undefined;
    const cuts = [tokenReportMarker(taskId), runReportMarker(taskId)]
      .map((m) => body.indexOf(m))
      .filter((i) => i >= 0);
    const plan = body.slice(0, cuts.length ? Math.min(...cuts) : body.length).replace(/\s*(---\s*)?$/, "");
    // The plan keeps at most half a comment, so the report below it always has room.
    return truncateMiddle(plan.replace(AWAITING_APPROVAL_LINE, PLAN_POSTED_LINE), GITHUB_COMMENT_LIMIT / 2);
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
    final: async (v: { tokens?: Omit<TokenReportView, "taskId">; run: Omit<RunReportView, "taskId"> }) => {
      const plan = await planPart();
      const head = `${plan ? `${plan}\n\n---\n\n` : ""}${v.tokens ? `${renderTokenReport({ ...v.tokens, taskId })}\n\n` : ""}`;
      const log = v.run.log === undefined ? undefined : redact(v.run.log);
      const run = renderRunReport({ ...v.run, taskId, log, limit: GITHUB_COMMENT_LIMIT - head.length });
      // Below the plan when there is one: the plan's comment becomes the run's report.
      return post(plan ? planMarker(taskId) : runReportMarker(taskId), head + run);
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
