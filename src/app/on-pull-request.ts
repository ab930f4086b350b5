import type { Context } from "probot";
import { isLeaseLive, isUnclaimed } from "../core/leases.ts";
import type { HandlerDeps } from "./handler-deps.ts";
import { loadRepoConfig } from "./load-config.ts";
import { afterFleetPrMerged } from "./on-merge.ts";
import { fromFork, prToMatch, taskForPullRequest } from "./pull-request-tasks.ts";

/**
 * `pull_request.opened|closed` on a `fleet/*` branch: opened -> pr-open; merged -> done (dependents
 * unblocked, slot already free) and what a merge starts (afterFleetPrMerged), on one read of the state;
 * closed unmerged -> failed, retry allowed.
 */
export async function onPullRequest(
  context: Context<"pull_request.opened"> | Context<"pull_request.closed">,
  deps: HandlerDeps,
): Promise<void> {
  const pr = context.payload.pull_request;
  if (!pr.head.ref.startsWith("fleet/") || fromFork(pr)) return;
  // Opened by Fleet's own worker: the worker records pr-open with the run's outcome, in one commit.
  if (context.payload.action === "opened" && context.isBot) return;
  const repo = (context as Context<"pull_request">).repo();
  const loaded = await loadRepoConfig(deps.github, repo, deps.configs);
  if (!loaded.ok) return;
  const queue = await deps.queues.forContext(context, loaded.config);
  const doc = await queue.snapshot();
  const task = taskForPullRequest(doc, prToMatch(pr));
  if (context.payload.action === "closed" && pr.merged) {
    const closed = context as Context<"pull_request.closed">;
    return afterFleetPrMerged(deps.github, repo, {
      pr: closed.payload.pull_request,
      queue,
      doc,
      task,
    });
  }
  if (!task) return;
  if (context.payload.action === "opened") {
    // A run in progress records its own PR with its outcome (one commit); a PR opened by hand on the
    // branch of a task whose run is over moves the task here.
    if (task.lease && !isUnclaimed(task.lease) && isLeaseLive(task.lease, queue.now())) return;
    await queue.move(task.issue, "pr-open", { taskId: task.id, from: ["running"], patch: { pr: pr.number } });
    return;
  }
  await queue.move(task.issue, "failed", {
    taskId: task.id,
    reason: `pull request #${pr.number} was closed without merging; comment \`/fleet retry\` to run it again`,
  });
}
