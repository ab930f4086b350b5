import { parseFleetLabel } from "../core/labels.ts";
import { isTerminal } from "../core/lifecycle.ts";
import type { GitHubClient, RepoRef } from "../github/client.ts";
import type { RepoQueue } from "./repo-queue.ts";

export interface ReconcileReport {
  cancelled: string[];
  changed: number;
}

/**
 * The safety net behind event-driven scheduling, for a crash or a missed webhook: a live task whose
 * issue was closed or lost its coder label is cancelled; then one scheduling pass reclaims leases
 * past expiry, releases unblocked and rate-limited tasks and fills free slots. Costs one issue read
 * per live task that has not opened its PR yet, plus the state reads.
 */
export async function reconcileRepo(
  queue: RepoQueue,
  octokit: GitHubClient,
  repo: RepoRef,
  knownCoders: readonly string[],
): Promise<ReconcileReport> {
  const doc = await queue.snapshot();
  const cancelled: string[] = [];
  const live = Object.values(doc.tasks).filter((t) => !isTerminal(t.state) && t.state !== "pr-open");
  for (const task of live) {
    let issue: { state: string; labels: Array<string | { name?: string }> };
    try {
      issue = (await octokit.rest.issues.get({ ...repo, issue_number: task.issue })).data;
    } catch (error) {
      if ((error as { status?: number }).status === 404 || (error as { status?: number }).status === 410) {
        issue = { state: "closed", labels: [] };
      } else throw error;
    }
    const coders = issue.labels
      .map((l) => parseFleetLabel(typeof l === "string" ? l : (l.name ?? ""), knownCoders))
      // A split task runs under its `fleet:split[:<coder>]` label (no coder label of its own).
      .flatMap((p) => (p.kind === "coder" ? [p.coder] : p.kind === "split" ? [p.coder ?? task.coder] : []));
    const reason =
      issue.state === "closed"
        ? "the issue was closed (found by reconcile)"
        : !coders.includes(task.coder)
          ? `the fleet:${task.coder} label is gone (found by reconcile)`
          : undefined;
    if (!reason) continue;
    const moved = await queue.move(task.issue, "cancelled", { taskId: task.id, reason });
    cancelled.push(...moved.map((t) => t.id));
  }
  const changed = await queue.schedule();
  return { cancelled, changed: changed.length };
}
