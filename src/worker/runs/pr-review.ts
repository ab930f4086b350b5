import { join } from "node:path";
import { buildReview, parseAgentReview, REVIEW_FILE, reviewJsonIn } from "../../core/pr-review.ts";
import { scanOutgoing } from "../../core/secret-scan.ts";
import { parseRepoFullName } from "../../github/port.ts";
import { runPhase } from "../3-phase.ts";
import { finish } from "../4-finish.ts";
import type { RunContext, TaskOutcome } from "../run-context.ts";
import { keepArtifacts, readAgentFile, readArtifacts } from "../workspace/artifacts.ts";
import { gitIn } from "../workspace/git.ts";
import type { Worktree } from "../workspace/worktree.ts";

/**
 * An agent review of a pull request (anyone's): the read-only plan phase on a checkout of the PR's
 * head, with the diff in its prompt (see gather); what the agent wrote to REVIEW.json becomes ONE
 * GitHub review, inline comments on lines of the diff and every other finding in its summary. Nothing
 * is committed or pushed; the run is counted like any other (budgets, token report).
 */
export async function runPrReview(ctx: RunContext, wt: Worktree, notesDir: string): Promise<TaskOutcome> {
  const { spec, deps } = ctx;
  const ref = parseRepoFullName(spec.repo);
  const prNumber = spec.prReview!;
  ctx.result.kind = "pr-review";
  const pull = await deps.github.pulls.get(ref, prNumber);
  if (pull.state !== "open") {
    ctx.result.noRetry = true;
    return await finish(ctx, "failed", `Pull request #${prNumber} was closed before the review ran.`);
  }
  // The PR's head, when this clone has it (a branch of this repository); else the agent reviews the
  // diff in its prompt against the default branch.
  if (pull.head.sha) await gitIn(wt, ["checkout", "-q", "--detach", pull.head.sha]).catch(() => undefined);
  await ctx.progress({ state: "running", step: `reviewing #${prNumber} (read-only)` }, true);
  const run = await runPhase(ctx, { wt, notesDir, phase: "plan" });
  ctx.result.totals = run.totals;
  const notes = await readArtifacts(notesDir);
  const raw =
    (await readAgentFile(join(notesDir, REVIEW_FILE)).catch(() => undefined)) ?? reviewJsonIn(run.planText);
  await keepArtifacts(notesDir, ctx.artifactsDir);
  ctx.result.artifacts = { plan: notes.plan };
  if (run.kind !== "ok") return await finish(ctx, run.kind, run.reason, run);
  const review = parseAgentReview(raw);
  if ("problem" in review)
    return await finish(ctx, "failed", `No review was posted: ${review.problem}.`, run);
  // The review goes out in public: checked like anything else that leaves the run.
  const hit = scanOutgoing(JSON.stringify(review), ctx.secrets);
  if (hit) {
    ctx.result.noRetry = true;
    return await finish(
      ctx,
      "failed",
      `No review was posted: it gives away a secret, ${hit.label} (${hit.form}).`,
      run,
    );
  }
  // The diff as GitHub shows it now: a comment is checked against the lines GitHub will accept.
  const files = await deps.github.pulls.listFiles(ref, prNumber);
  const header = `**Fleet review** by \`${spec.coder}\` (task \`${spec.taskId}\`, read-only).`;
  const built = buildReview(review, files, header);
  await deps.github.pulls.createReview(ref, prNumber, {
    body: ctx.redact(built.body),
    event: "COMMENT",
    ...(pull.head.sha ? { commit_id: pull.head.sha } : {}),
    comments: built.comments.map((c) => ({ ...c, body: ctx.redact(c.body) })),
  });
  const moved = built.moved ? ` (${built.moved} more in its summary: not on lines of the diff)` : "";
  return await finish(
    ctx,
    "no-changes",
    `Posted a review of #${prNumber} with ${built.comments.length} inline comment${built.comments.length === 1 ? "" : "s"}${moved}.`,
    run,
  );
}
