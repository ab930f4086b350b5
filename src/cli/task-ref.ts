import type { FleetStateDoc } from "../core/state-doc.ts";
import type { Task } from "../core/task.ts";
import { NotFoundError, UsageError } from "./errors.ts";

const ISSUE_REF = /^(?:#|gh-)?(\d+)$/;

/** A task by id (`fl-a3f`), or the latest task of an issue (`12`, `#12`, `gh-12`). */
export function findTaskRef(doc: FleetStateDoc, ref: string | undefined, where: string): Task {
  if (!ref) throw new UsageError("Name the task: its id (e.g. fl-a3f) or its issue (#12).");
  const direct = doc.tasks[ref];
  if (direct) return direct;
  const m = ISSUE_REF.exec(ref);
  if (m) {
    const issue = Number(m[1]);
    const latest = Object.values(doc.tasks)
      .filter((t) => t.issue === issue)
      .sort((a, b) => (a.updatedAt < b.updatedAt ? 1 : -1))[0];
    if (latest) return latest;
    throw new NotFoundError(
      `No task for issue #${issue} in ${where}. \`fleet tasks --all\` lists the tasks.`,
    );
  }
  throw new NotFoundError(`No task "${ref}" in ${where}. \`fleet tasks --all\` lists the tasks.`);
}
