import { type BeadIssue, beadFromTask, issueNumberOf, parseJsonl, rewriteJsonl } from "../beads/index.ts";
import type { Task } from "../core/task.ts";

/**
 * The beads text with each changed task's bead written (created or updated). Beads of other tasks and
 * records Fleet does not own keep their bytes; `dependsOn` issues with a bead become `blocks` edges.
 */
export function syncBeads(beads: string, changed: readonly Task[], allTasks: readonly Task[]): string {
  if (changed.length === 0) return beads;
  const existing = new Map<string, BeadIssue>();
  const beadForIssue = new Map<number, string>();
  for (const { issue } of parseJsonl(beads).records) {
    existing.set(issue.id, issue);
    const n = issueNumberOf(issue);
    if (n !== undefined) beadForIssue.set(n, issue.id);
  }
  for (const t of allTasks) beadForIssue.set(t.issue, t.id);
  const upsert = changed.map((task) =>
    beadFromTask(task, {
      existing: existing.get(task.id),
      beadIdForIssue: (issue) => beadForIssue.get(issue),
      createdBy: task.requestedBy ?? "fleet",
    }),
  );
  return rewriteJsonl(beads, { upsert });
}
