import type { Context } from "probot";
import type { FleetStateDoc } from "../core/state-doc.ts";
import type { Task } from "../core/task.ts";
import type { RepoQueue } from "../queue/repo-queue.ts";
import { tasksOnPullRequest } from "../queue/transitions.ts";
import { rebaseOthersAfterMerge } from "./on-rebase.ts";
import { closeEpicWhenDone } from "./on-split-label.ts";
import type { MergedFleetPr } from "./pull-request-tasks.ts";

/** A merged `fleet/*` pull request with its repository's queue and the state as read for the event. */

/**
 * A merged `fleet/*` pull request (see onPullRequest, which reads the state once for all of it): every
 * task that worked on it is done, whatever it was doing (dependents unblocked, a review round waiting
 * for its run dropped), the merge moved the base, so other Fleet PRs that now conflict get a rebase
 * run, and a finished split's epic is closed. Each goes on when another fails; the first failure is thrown.
 */
export async function afterFleetPrMerged(
  context: Context<"pull_request.closed">,
  merged: MergedFleetPr,
): Promise<void> {
  const { queue, pr, doc } = merged;
  const onPr = tasksOnPullRequest(doc, { number: pr.number, head: pr.head.ref });
  const results = await Promise.allSettled([
    ...onPr.map((t) => queue.move(t.issue, "done", { taskId: t.id, patch: { pr: pr.number } })),
    closeEpicWhenDone(context, merged),
    rebaseOthersAfterMerge(context, merged),
  ]);
  const failed = results.find((r) => r.status === "rejected");
  if (failed) throw failed.reason;
}
