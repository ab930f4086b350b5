import type { ChecklistItem } from "../core/checklist.ts";
import { stateAfterOutcome } from "../core/outcomes.ts";
import type { TaskState } from "../core/task.ts";
import type { TokenUsage } from "../core/usage.ts";
import type { GitHub, IssueRef } from "../github/port.ts";
import { createTracker, type Tracker } from "../queue/tracker.ts";
import { renderChecklist } from "../render/checklist.ts";
import { hasMarker, trackingMarker } from "../render/markers.ts";
import {
  AWAITING_APPROVAL_LINE,
  localAwaitingApprovalLine,
  PLAN_POSTED_LINE,
  renderPlanComment,
} from "../render/plan-comment.ts";
import {
  GITHUB_COMMENT_LIMIT,
  type RunReportView,
  renderRunReport,
  truncateMiddle,
} from "../render/run-report.ts";
import { renderTokenReport, type TokenReportView } from "../render/token-report.ts";

export type Redact = (text: string) => string;

/** Room the state part of a tracking comment may take above the run's sections. */
const STATE_ROOM = 4_000;

export interface IssueReporterOptions {
  /**
   * The repository's tracker: the sections go out with the task's next state edit (one edit for both),
   * and the caller flushes the task after its last transition. Without one, each report is written at
   * once under a state line of its own (`describe`).
   */
  tracker?: Tracker;
  /** The task's coder and model, for the state line when the reporter writes the comment itself. */
  describe?: { coder: string; model: string };
  /** Local mode: the plan asks for `fleet approve <id>`, and the reporter's own tracker has no `/fleet` footer. */
  local?: boolean;
}

/**
 * Writes a run's plan and final report into its task's tracking comment, below the state, as sections
 * with their own markers (a rerun replaces them instead of adding any): the task's ONE comment, since
 * every comment is a content-creating request. Every text passes through `redact` before it leaves.
 */
export function createIssueReporter(
  github: GitHub,
  issue: IssueRef,
  taskId: string,
  redact: Redact,
  /** The issue's comments listed at the run's start (they hold the tracking comment and its sections). */
  listed?: ReadonlyArray<{ id: number; body?: string | null; user?: { type?: string } | null }>,
  opts: IssueReporterOptions = {},
) {
  const tracker =
    opts.tracker ??
    // Its plan and report are written at once (flushed); checklist edits at most one per 15 s.
    createTracker({
      github,
      repo: { owner: issue.owner, repo: issue.repo },
      minIntervalMs: 15_000,
      ...(opts.local ? { local: true } : {}),
    });
  const tracking = listed?.find((c) => c.user?.type === "Bot" && hasMarker(c.body, trackingMarker(taskId)));
  if (tracking) tracker.remember(taskId, tracking.id, tracking.body);
  /** Without the repository's tracker, the comment is written now, under a state line of the reporter's own. */
  const writeNow = async (state: TaskState) => {
    if (opts.tracker) return;
    const d = opts.describe ?? { coder: "?", model: "?" };
    await tracker.show(issue.issue_number, {
      taskKey: taskId,
      taskId,
      state,
      coder: d.coder,
      model: d.model,
    });
    await tracker.flush(taskId);
  };
  return {
    plan: async (plan: string, awaitingApproval: boolean) => {
      const text = redact(
        renderPlanComment({ taskId, plan: redact(plan), awaitingApproval, local: opts.local === true }),
      );
      tracker.setSections(issue.issue_number, taskId, (s) => ({ ...s, plan: text }));
      await writeNow(awaitingApproval ? "awaiting-approval" : "running");
    },
    /** The agent's checklist as it stands: written with the comment's next (throttled) edit. */
    progress: async (items: readonly ChecklistItem[]) => {
      const text = redact(renderChecklist(items));
      tracker.setSections(issue.issue_number, taskId, (s) => ({ ...s, progress: text || undefined }));
      await tracker.touch(issue.issue_number, taskId);
    },
    /**
     * The run's final report: the token report (when the run used tokens) and the run report with the
     * log's tail, below the plan (the plan keeps at most half the comment, so the report always has
     * room). The log is redacted before its tail is cut, so a secret split by the cut cannot slip through.
     */
    final: async (v: { tokens?: Omit<TokenReportView, "taskId">; run: Omit<RunReportView, "taskId"> }) => {
      const tokens = v.tokens ? redact(renderTokenReport({ ...v.tokens, taskId })) : "";
      const log = v.run.log === undefined ? undefined : redact(v.run.log);
      tracker.setSections(issue.issue_number, taskId, (s) => {
        const plan =
          s.plan &&
          truncateMiddle(
            s.plan
              .replace(AWAITING_APPROVAL_LINE, PLAN_POSTED_LINE)
              .replace(localAwaitingApprovalLine(taskId), PLAN_POSTED_LINE),
            GITHUB_COMMENT_LIMIT / 2,
          );
        const head = tokens ? `${tokens}\n\n` : "";
        const limit = GITHUB_COMMENT_LIMIT - STATE_ROOM - (plan?.length ?? 0) - head.length;
        const run = redact(
          renderRunReport({ ...v.run, taskId, log, limit, ...(opts.local ? { local: true } : {}) }),
        );
        return { ...s, plan, report: head + run };
      });
      await writeNow(
        stateAfterOutcome(v.run.outcome, {
          retriesLeft: false,
          cancelledByUser: true,
          onOpenPr: v.run.onPullRequest === true,
        }),
      );
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
