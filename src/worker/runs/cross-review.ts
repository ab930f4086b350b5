import { type FleetConfig, modelFor } from "../../core/config.ts";
import type { Task } from "../../core/task.ts";
import type { RepoQueue } from "../../queue/repo-queue.ts";
import type { TaskOutcome } from "../3-attempt.ts";

/**
 * `cross_review: <coder>`: when a task's run opens its pull request, another coder reviews it
 * (read-only, one GitHub review: runs/pr-review.ts) before people are asked. Only the PR's opening,
 * not each later round; never the reviewer's own work; a review is not reviewed again.
 */
export async function queueCrossReview(
  task: Task,
  outcome: TaskOutcome,
  deps: { queue: Pick<RepoQueue, "enqueue">; config: FleetConfig },
): Promise<boolean> {
  const reviewer = deps.config.cross_review;
  if (!reviewer || reviewer === task.coder || task.review || task.instructions || task.rebase) return false;
  if (outcome.outcome !== "pr-opened" || !outcome.pr || task.pr === outcome.pr.number) return false;
  if (!deps.config.coders[reviewer]?.enabled) return false;
  const queued = await deps.queue.enqueue({
    issue: outcome.pr.number,
    title: `Review: ${task.title}`,
    coder: reviewer,
    model: modelFor(deps.config, reviewer),
    priority: task.priority,
    dependsOn: [],
    requestedBy: task.requestedBy ?? "fleet",
    review: { pr: outcome.pr.number },
  });
  return queued.applied;
}
