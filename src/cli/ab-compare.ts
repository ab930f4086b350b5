import type { FleetStateDoc } from "../core/state-doc.ts";
import type { Task } from "../core/task.ts";
import { localDiffStat, readLocalPulls } from "../queue/local-github.ts";
import { localRepositoryOf } from "../queue/local-issues.ts";
import { type AbSide, abFinished, abSides, renderAbComparison } from "../render/ab-comparison.ts";
import { CliError } from "./errors.ts";
import type { Target } from "./target.ts";

/** An issue's A/B run as `fleet task <id> compare` shows it: the sides, and whether all have finished. */
export interface AbComparisonView {
  issue: number;
  finished: boolean;
  sides: AbSide[];
  /** The comparison as the GitHub comment has it (markdown table). */
  table: string;
}

/** The diff of a side's branch: from git in local mode, from its pull request on GitHub. */
async function diffOf(target: Target, doc: FleetStateDoc, task: Task): Promise<AbSide["diff"] | undefined> {
  if (target.kind === "github") {
    if (task.pr === undefined) return undefined;
    const data = await target.github.pulls.get(target.repo, task.pr);
    return { files: data.changed_files, additions: data.additions, deletions: data.deletions };
  }
  if (!task.branch || task.pr === undefined) return undefined;
  const path = localRepositoryOf(doc, task)?.path ?? target.repoPath;
  const pull = (await readLocalPulls(target.home)).find((p) => p.head === task.branch);
  return pull ? localDiffStat(path, pull.base, pull.head) : undefined;
}

/** The comparison of the A/B run `task` is a side of; an error saying how to make one when it is not. */
export async function abComparisonOf(
  target: Target,
  doc: FleetStateDoc,
  task: Task,
): Promise<AbComparisonView> {
  const tasks = abSides(Object.values(doc.tasks), task.issue);
  if (tasks.length === 0)
    throw new CliError(
      `Task ${task.id}'s issue #${task.issue} is not an A/B run (it has one coder and model). \`fleet bd create --coder claude --coder codex ...\` (or --ab claude:opus,codex) makes one.`,
    );
  const sides: AbSide[] = [];
  for (const t of tasks) {
    const side: AbSide = { taskId: t.id, coder: t.coder, model: t.model, state: t.state };
    if (t.totals) side.totals = t.totals;
    if (t.result) side.result = t.result;
    if (t.pr !== undefined) side.pr = { number: t.pr };
    const diff = await diffOf(target, doc, t).catch(() => undefined);
    if (diff) side.diff = diff;
    sides.push(side);
  }
  // The comment's hidden marker is for finding it again on GitHub: not printed here.
  const table = renderAbComparison(task.issue, sides).replace(/^<!--.*-->\n/, "");
  return { issue: task.issue, finished: abFinished(tasks), sides, table };
}
