import {
  type BeadIssue,
  beadFromTask,
  fleetMetaOf,
  issueNumberOf,
  parseJsonl,
  rewriteJsonl,
} from "../beads/index.ts";
import type { Task } from "../core/task.ts";

/** A task's pinned prompt: the issue's title and body as they were when the task was queued or re-pinned. */
export interface PinnedText {
  title: string;
  body: string | null | undefined;
}

/**
 * The beads text with each changed task's bead written (created or updated). Beads of other tasks and
 * records Fleet does not own keep their bytes; `dependsOn` issues with a bead become `blocks` edges.
 * A task in `pinned` gets that text as its bead's title and description (the prompt it may be given);
 * any other keeps its bead's description as it is.
 */
export function syncBeads(
  beads: string,
  changed: readonly Task[],
  allTasks: readonly Task[],
  pinned: Readonly<Record<string, PinnedText>> = {},
): string {
  if (changed.length === 0) return beads;
  const existing = parsedBeads(beads);
  const beadForIssue = new Map<number, string>();
  // Beads of issues that are not tasks (yet), e.g. discovered work: a task for the issue takes them over.
  const plainForIssue = new Map<number, BeadIssue>();
  for (const issue of existing.values()) {
    const n = issueNumberOf(issue);
    if (n !== undefined) beadForIssue.set(n, issue.id);
    if (n !== undefined && !fleetMetaOf(issue) && issue.status !== "tombstone") plainForIssue.set(n, issue);
  }
  for (const t of allTasks) beadForIssue.set(t.issue, t.id);
  const remove: string[] = [];
  const upsert = changed.map((task) => {
    let base = existing.get(task.id);
    const plain = base ? undefined : plainForIssue.get(task.issue);
    if (plain && plain.id !== task.id) {
      // One bead per issue: the task's bead keeps the plain bead's history and links, under the task's id.
      base = {
        ...plain,
        id: task.id,
        dependencies: plain.dependencies?.map((d) => ({ ...d, issue_id: task.id })),
      };
      remove.push(plain.id);
      plainForIssue.delete(task.issue);
    }
    const bead = beadFromTask(task, {
      existing: base,
      beadIdForIssue: (issue) => beadForIssue.get(issue),
      createdBy: task.requestedBy ?? "fleet",
    });
    const text = pinned[task.id];
    if (text) {
      bead.title = text.title;
      const body = (text.body ?? "").replace(/\r\n?/g, "\n");
      if (body === "") delete bead.description;
      else bead.description = body;
    }
    return bead;
  });
  const out = rewriteJsonl(beads, { upsert, ...(remove.length ? { remove } : {}) });
  // The text just written is what the next transition of a batch starts from: its beads are known.
  const next = new Map(existing);
  for (const id of remove) next.delete(id);
  for (const bead of upsert) if (!remove.includes(bead.id)) next.set(bead.id, bead);
  lastWritten = new WeakRef({ text: out, beads: next });
  return out;
}

// The beads of the last text syncBeads wrote, while nothing else holds them: the transitions of one
// batch (one synchronous run) each start from the text the one before wrote, and each parsed all of it
// again (a batch cost transitions x beads). Held weakly, so no copy outlives the batch.
let lastWritten: WeakRef<{ text: string; beads: Map<string, BeadIssue> }> | undefined;

/** Every bead of the text by id (the later line wins), parsed or as the last syncBeads left them. */
function parsedBeads(text: string): Map<string, BeadIssue> {
  const known = lastWritten?.deref();
  if (known && known.text === text) return known.beads;
  const beads = new Map<string, BeadIssue>();
  for (const { issue } of parseJsonl(text).records) beads.set(issue.id, issue);
  return beads;
}
