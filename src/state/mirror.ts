import {
  type BeadIssue,
  beadFromTask,
  externalRefFor,
  issueNumberOf,
  liveIssues,
  parseJsonl,
  rewriteJsonl,
  toRfc3339,
} from "../beads/index.ts";
import { parseDependencies } from "../core/dependencies.ts";
import { promptPinDigest } from "../core/prompt-pin.ts";
import type { Task } from "../core/task.ts";

/** What the mirror needs to know about a GitHub issue. */
export interface MirroredIssue {
  number: number;
  title: string;
  body: string | null;
  labels: string[];
  state: "open" | "closed";
  /** Sub-issue numbers: the parent waits for them. */
  subIssues?: number[];
}

export interface MirrorInput {
  issue: MirroredIssue;
  /** The fleet task for the issue; undefined once the issue no longer carries a fleet label. */
  task?: Task;
  /** "owner/name", so `owner/name#12` in a body counts as this repository's issue. */
  repo: string;
  now: Date;
}

export interface MirrorResult {
  beads: string;
  /** The issue's bead id (undefined when it has none and none was needed). */
  beadId?: string;
  changed: boolean;
}

/** The live bead that mirrors GitHub issue `n` (found by `external_ref: gh-<n>`). */
export function findBeadForIssue(beads: readonly BeadIssue[], n: number): BeadIssue | undefined {
  return beads.find((b) => issueNumberOf(b) === n);
}

/** The text a task's bead holds (its pinned prompt when the task has a pin), by task id; undefined without a bead. */
export function pinnedTextOf(
  beadsText: string,
  taskId: string,
): { title: string; description?: string } | undefined {
  const bead = liveIssues(parseJsonl(beadsText)).find((b) => b.id === taskId);
  if (!bead) return undefined;
  return bead.description === undefined
    ? { title: bead.title }
    : { title: bead.title, description: bead.description };
}

/**
 * Upserts the bead of one fleet issue in `.beads/issues.jsonl`: exactly one bead per issue, found by
 * external_ref; labels, priority, status and `blocks` dependencies (from `Depends on #N` lines,
 * sub-issues and the task) follow the issue. The title and body are the task's pinned prompt: they
 * follow the issue only while its text is the pinned one (or for a task queued before pins), so an
 * edit nobody approved never reaches the bead. A closed or un-labeled issue closes its bead with a
 * close_reason. Every other line keeps its bytes.
 */
export function mirrorIssue(beadsText: string, input: MirrorInput): MirrorResult {
  const live = liveIssues(parseJsonl(beadsText));
  const { issue, task } = input;
  const existing = findBeadForIssue(live, issue.number);
  const beadIdForIssue = (n: number) => findBeadForIssue(live, n)?.id;
  const at = toRfc3339(input.now);

  let bead: BeadIssue;
  if (task && issue.state === "open") {
    const dependsOn = [
      ...new Set([
        ...task.dependsOn,
        ...parseDependencies(issue.body ?? "", input.repo),
        ...(issue.subIssues ?? []),
      ]),
    ]
      .filter((n) => n !== issue.number)
      .sort((a, b) => a - b);
    bead = beadFromTask({ ...task, dependsOn }, { existing, beadIdForIssue, createdBy: "fleet" });
    bead.external_ref = externalRefFor(issue.number);
  } else if (existing) {
    if (existing.status === "closed") bead = { ...existing };
    else {
      const reason =
        issue.state === "closed"
          ? `issue #${issue.number} was closed on GitHub`
          : `fleet label removed from issue #${issue.number}`;
      bead = { ...existing, status: "closed", closed_at: at, close_reason: reason, updated_at: at };
    }
  } else if (task) {
    // A closed issue with a task but no bead yet: record it, closed.
    bead = beadFromTask(task, { beadIdForIssue, createdBy: "fleet" });
    bead = {
      ...bead,
      status: "closed",
      closed_at: at,
      close_reason: `issue #${issue.number} was closed on GitHub`,
    };
  } else {
    return { beads: beadsText, changed: false };
  }

  // The text changes with the pin only: an issue whose text is not the pinned one keeps the bead's.
  const textFollowsIssue =
    task !== undefined &&
    (task.pin === undefined || promptPinDigest(issue.title, issue.body) === task.pin.sha256);
  if (textFollowsIssue) {
    bead.title = issue.title;
    const body = issue.body ?? "";
    if (body === "") delete bead.description;
    else bead.description = body;
  } else if (existing) {
    bead.title = existing.title;
    if (existing.description === undefined) delete bead.description;
    else bead.description = existing.description;
  }
  const labels = [...new Set(issue.labels)].sort();
  if (labels.length) bead.labels = labels;
  else delete bead.labels;

  const next = rewriteJsonl(beadsText, { upsert: [bead] });
  return { beads: next, beadId: bead.id, changed: next !== beadsText };
}
