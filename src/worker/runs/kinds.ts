import { knownCoders } from "../../agents/index.ts";
import type { FleetConfig } from "../../core/config.ts";
import { reviewInstructions } from "../../core/pr-review.ts";
import type { Task } from "../../core/task.ts";
import { getRepoRole } from "../../github/permissions.ts";
import type { GitHub, RepoRef, ReviewComment } from "../../github/port.ts";
import type { RepoQueue } from "../../queue/repo-queue.ts";
import { type InlineComment, renderReviewFeedback } from "../../render/review-feedback.ts";
import { applySplitPlan } from "../../split/apply-plan.ts";
import { extractPlanJson } from "../../split/plan.ts";
import { isSplitRun, splitInstructions } from "../../split/split-run.ts";
import type { TaskOutcome } from "../3-attempt.ts";

// The two runs that are not "implement the issue": a split (planning) run and a review-loop run.

export interface SpecialRun {
  split: boolean;
  /** Appended to the prompt. */
  extraPrompt?: string;
}

interface RunDeps {
  github: GitHub;
  repo: RepoRef;
  config: FleetConfig;
}

/** What kind of run this task's next run is, and the prompt text that goes with it. */
export async function specialRunFor(
  task: Task,
  issueLabels: ReadonlyArray<string | { name?: string }>,
  deps: RunDeps,
): Promise<SpecialRun> {
  if (task.review) return { split: false, extraPrompt: await prReviewPrompt(deps, task.review.pr) };
  if (isSplitRun(issueLabels, task.coder, deps.config.default_coder)) {
    return { split: true, extraPrompt: splitInstructions(knownCoders) };
  }
  if (task.instructions && task.pr) {
    const comments = await reviewComments(deps, task.pr);
    return { split: false, extraPrompt: renderReviewFeedback(task.pr, task.instructions, comments) };
  }
  return { split: false };
}

/** The review run's instructions, with the PR's diff as GitHub shows it. */
async function prReviewPrompt(deps: RunDeps, pr: number): Promise<string> {
  const pull = await deps.github.pulls.get(deps.repo, pr);
  return reviewInstructions(
    { number: pr, title: pull.title },
    await deps.github.pulls.listFiles(deps.repo, pr),
  );
}

/** Lines of the diff hunk kept for the prompt (the commented line and a few above it). */
const HUNK_TAIL_LINES = 4;

/** Inline review comments on the PR by people with write access (anyone else's text could steer the agent). */
async function reviewComments(deps: RunDeps, pr: number): Promise<InlineComment[]> {
  let raw: ReviewComment[];
  let head: string | undefined;
  try {
    head = (await deps.github.pulls.get(deps.repo, pr)).head.sha;
    raw = await deps.github.pulls.listReviewComments(deps.repo, pr);
  } catch {
    return [];
  }
  const out: InlineComment[] = [];
  const roles = new Map<string, boolean>();
  for (const c of raw) {
    const login = c.user?.login;
    if (!login || c.user?.type === "Bot") continue;
    if (!roles.has(login)) {
      const role = await getRepoRole(deps.github, deps.repo, login);
      roles.set(login, ["admin", "maintain", "write"].includes(role));
    }
    if (!roles.get(login)) continue;
    const line = c.line ?? c.original_line ?? undefined;
    const code = (c.diff_hunk ?? "")
      .split("\n")
      .filter((l) => !l.startsWith("@@"))
      .slice(-HUNK_TAIL_LINES)
      .join("\n");
    out.push({
      author: login,
      path: c.path ?? "",
      ...(line ? { line } : {}),
      body: c.body ?? "",
      ...(code.trim() ? { code } : {}),
      ...(head && c.original_commit_id && c.original_commit_id !== head ? { earlier: true } : {}),
    });
  }
  return out;
}

/**
 * After a split run: the plan becomes sub-issues (queued here, since Fleet's own labels do not
 * drive the app), or the epic says why the plan was rejected and the task fails without a retry.
 */
export async function applySplitOutcome(
  task: Task,
  outcome: TaskOutcome,
  deps: RunDeps & { queue: RepoQueue },
): Promise<void> {
  if (outcome.outcome !== "split") return;
  const raw = extractPlanJson(outcome.artifacts.result, outcome.artifacts.plan);
  try {
    const applied = await applySplitPlan(task.issue, raw, {
      github: deps.github,
      repo: deps.repo,
      config: deps.config,
      knownCoders,
      splitCoder: task.coder,
      enqueue: async (sub) => {
        await deps.queue.enqueue({ ...sub, requestedBy: task.requestedBy ?? "fleet" });
      },
    });
    if (!applied.ok) {
      outcome.outcome = "failed";
      outcome.noRetry = true;
      outcome.reason = `The split plan is invalid (${applied.problems.length} problem${applied.problems.length === 1 ? "" : "s"}); nothing was created.`;
    }
  } catch (error) {
    outcome.outcome = "failed";
    outcome.reason = `Applying the split plan failed: ${(error as Error).message}`;
  }
}
