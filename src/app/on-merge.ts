import type { GitHub, RepoRef } from "../github/port.ts";
import { tasksOnPullRequest } from "../queue/transitions.ts";
import { rebaseOthersAfterMerge } from "./on-rebase.ts";
import { closeEpicWhenDone } from "./on-split-label.ts";
import { type MergedFleetPr, prToMatch } from "./pull-request-tasks.ts";

/**
 * A merged `fleet/*` pull request (see onPullRequest, which reads the state once for all of it): every
 * task that worked on it is done, whatever it was doing (dependents unblocked, a review round waiting
 * for its run dropped), the merge moved the base, so other Fleet PRs that now conflict get a rebase
 * run, and a finished split's epic is closed. Each goes on when another fails; the first failure is thrown.
 */
export async function afterFleetPrMerged(
  github: GitHub,
  repo: RepoRef,
  merged: MergedFleetPr,
): Promise<void> {
  const { queue, pr, doc } = merged;
  const onPr = tasksOnPullRequest(doc, prToMatch(pr));
  const results = await Promise.allSettled([
    ...onPr.map((t) => queue.move(t.issue, "done", { taskId: t.id, patch: { pr: pr.number } })),
    closeEpicWhenDone(github, repo, merged),
    rebaseOthersAfterMerge(github, repo, merged),
  ]);
  const failed = results.find((r) => r.status === "rejected");
  if (failed) throw failed.reason;
}
