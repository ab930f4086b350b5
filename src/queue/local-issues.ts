import { withDependencyLines } from "../core/dependencies.ts";
import { isTerminal } from "../core/lifecycle.ts";
import type { FleetStateDoc } from "../core/state-doc.ts";
import type { Priority, Task, TaskRequest } from "../core/task.ts";
import { mirrorIssue } from "../state/mirror.ts";
import { syncBeads } from "./beads-sync.ts";
import { enqueueTask, moveTask, setDependencies, type TaskChange, tasksOf } from "./transitions.ts";

// Local mode has no GitHub issues: the issues `fleet bd create` makes live in the state document under
// `local_issues`. These are the named transitions over them (create, edit, close), each with its task
// and its bead, for the CLI to run inside one compare-and-swap update.

/** The git repository a local issue's tasks run in: where it is on this machine, and its remote if it has one. */
export interface LocalRepository {
  /** Absolute path of the repository's top folder. */
  path: string;
  /** `git remote get-url origin`, when there is one (to tell apart clones of one project). */
  remote?: string;
}

export interface LocalIssue {
  number: number;
  title: string;
  body: string;
  labels: string[];
  state: "open" | "closed";
  createdAt: string;
  /** Absent on issues recorded before repositories were (see localRepositoryOf). */
  repository?: LocalRepository;
  /**
   * The branch its tasks' branches merge into (`fleet merge`), recorded when the issue was created:
   * the repository's branch then. Absent on older issues, and when there was none to record.
   */
  base?: string;
}

export const LOCAL_ISSUES_KEY = "local_issues";

export const localIssuesOf = (doc: FleetStateDoc): Record<string, LocalIssue> =>
  (doc[LOCAL_ISSUES_KEY] as Record<string, LocalIssue> | undefined) ?? {};

/**
 * The next issue number for a locally created task: above every local issue, every task and every
 * local pull request (`above`, and the tasks' `pr`): as on GitHub, issues and pull requests share one
 * series of numbers, so a comment on either lands on the right one.
 */
export function nextLocalIssueNumber(doc: FleetStateDoc, above = 0): number {
  let max = above;
  for (const k of Object.keys(localIssuesOf(doc))) max = Math.max(max, Number(k));
  for (const t of Object.values(doc.tasks)) max = Math.max(max, t.issue, t.pr ?? 0);
  return max + 1;
}

/** A write of the state and its beads mirror, as `StateStore.update` takes it. */
export interface LocalWrite {
  doc: FleetStateDoc;
  beads: string;
  message: string;
}

/** One coder and model a local issue is run with; several make an A/B run, each side its own task and branch. */
export type LocalSide = Pick<TaskRequest, "coder" | "model">;

export interface NewLocalIssue extends Omit<TaskRequest, "issue" | "coder" | "model"> {
  repo: string;
  /** Where the tasks run. */
  repository: LocalRepository;
  /** The branch the tasks' branches are to merge into (see LocalIssue.base). */
  base?: string;
  sides: LocalSide[];
  body: string;
  labels: string[];
  requestedBy: string;
  now: string;
  /** The highest local pull request number, which the issue's number must be above. */
  numberAbove?: number;
}

/** A new local issue in its repository and a queued task per side (the first is `task`). */
export function createLocalIssue(
  doc: FleetStateDoc,
  beads: string,
  input: NewLocalIssue,
): LocalWrite & { task: Task; tasks: Task[]; issue: number } {
  if (input.sides.length === 0) throw new RangeError("createLocalIssue: a local issue needs a side");
  const number = nextLocalIssueNumber(doc, input.numberAbove);
  const { repo, repository, title, body, labels, now } = input;
  const issue: LocalIssue = {
    number,
    title,
    body,
    labels,
    state: "open",
    createdAt: now,
    repository,
    ...(input.base ? { base: input.base } : {}),
  };
  const { priority, dependsOn, requestedBy } = input;
  let d = doc;
  const changes: TaskChange[] = [];
  const messages: string[] = [];
  const tasks: Task[] = [];
  for (const { coder, model } of input.sides) {
    const r = enqueueTask(d, {
      repo,
      issue: number,
      title,
      coder,
      model,
      priority,
      dependsOn,
      requestedBy,
      now,
    });
    d = r.doc;
    changes.push(...r.changes);
    messages.push(...r.messages);
    tasks.push(r.task);
  }
  return {
    ...issueWrite(
      d,
      beads,
      changes,
      issue,
      { repo, now },
      messages.join("\n") || `create local issue #${number}`,
    ),
    task: tasks[0]!,
    tasks,
    issue: number,
  };
}

/** The repository a local task runs in; undefined for a task recorded before repositories were. */
export const localRepositoryOf = (doc: FleetStateDoc, task: Task): LocalRepository | undefined =>
  localIssuesOf(doc)[String(task.issue)]?.repository;

/** The branch a local task's branch merges into, as recorded on its issue; undefined when not recorded. */
export const localBaseOf = (doc: FleetStateDoc, task: Task): string | undefined =>
  localIssuesOf(doc)[String(task.issue)]?.base;

/** A local issue's title, description or priority changed; null when its task is gone. */
export function editLocalIssue(
  doc: FleetStateDoc,
  beads: string,
  taskId: string,
  edit: { repo: string; now: string; title?: string; priority?: Priority; body?: (task: Task) => string },
): LocalWrite | null {
  const t = doc.tasks[taskId];
  if (!t) return null;
  const next: Task = { ...t, updatedAt: edit.now };
  if (edit.title !== undefined) next.title = edit.title;
  if (edit.priority !== undefined) next.priority = edit.priority;
  const issue = { ...issueOf(doc, t) };
  if (edit.title !== undefined) issue.title = edit.title;
  if (edit.body) issue.body = edit.body(t);
  const withTask = { ...doc, tasks: { ...doc.tasks, [t.id]: next } };
  return issueWrite(
    withTask,
    beads,
    [{ task: next, from: t.state }],
    issue,
    edit,
    `update ${t.id} (#${t.issue})`,
  );
}

/** Whether issue `n` is known in local mode: a local issue, or the issue of a task. */
export const localIssueExists = (doc: FleetStateDoc, n: number): boolean =>
  localIssuesOf(doc)[String(n)] !== undefined || tasksOf(doc).some((t) => t.issue === n);

/**
 * The local issue of `taskId` depends on `dependsOn` now: its tasks wait for them (setDependencies) and
 * its text's `Depends on` lines say so. null when the task is gone or nothing changes.
 */
export function setLocalIssueDependencies(
  doc: FleetStateDoc,
  beads: string,
  taskId: string,
  change: { repo: string; now: string; dependsOn: readonly number[] },
): LocalWrite | null {
  const t = doc.tasks[taskId];
  if (!t) return null;
  const moved = setDependencies(doc, t.issue, change.dependsOn, change.now);
  const before = issueOf(doc, t);
  const issue = { ...before, body: withDependencyLines(before.body, change.dependsOn) };
  if (!moved && issue.body === before.body) return null;
  const message = moved?.messages.join("\n") ?? `#${t.issue} depends on ${change.dependsOn.join(", ")}`;
  return issueWrite(moved?.doc ?? doc, beads, moved?.changes ?? [], issue, change, message);
}

/**
 * A local issue closed: its task ends (done once its branch was pushed, cancelled before), as closing
 * a GitHub issue does. null when its task is gone.
 */
export function closeLocalIssue(
  doc: FleetStateDoc,
  beads: string,
  taskId: string,
  close: { repo: string; now: string; reason: string },
): LocalWrite | null {
  const t = doc.tasks[taskId];
  if (!t) return null;
  const to = t.state === "pr-open" ? "done" : "cancelled";
  const moved = isTerminal(t.state)
    ? null
    : moveTask(doc, t.id, to, { now: close.now, reason: close.reason });
  const d = moved?.doc ?? doc;
  const issue: LocalIssue = { ...issueOf(d, t), state: "closed" };
  return issueWrite(
    d,
    beads,
    moved?.changes ?? [],
    issue,
    close,
    `close #${t.issue} (${t.id}): ${close.reason}`,
  );
}

/**
 * `fleet merge` put the task's branch into its base: the task is done, and its issue closes unless
 * another side of its A/B run is still live. null when the task is gone or has no open branch.
 */
export function mergeLocalTask(
  doc: FleetStateDoc,
  beads: string,
  taskId: string,
  merge: { repo: string; now: string; how: string },
): LocalWrite | null {
  const t = doc.tasks[taskId];
  if (t?.state !== "pr-open") return null;
  const moved = moveTask(doc, t.id, "done", { now: merge.now });
  if (!moved) return null;
  const othersLive = tasksOf(moved.doc).some(
    (o) => o.issue === t.issue && o.id !== t.id && !isTerminal(o.state),
  );
  const issue: LocalIssue = { ...issueOf(moved.doc, t), ...(othersLive ? {} : { state: "closed" as const }) };
  const message = `merge ${t.branch ?? t.id} (#${t.issue}, ${t.id}): ${merge.how}`;
  return issueWrite(moved.doc, beads, moved.changes, issue, merge, message);
}

/** The task's local issue, or one made from the task for a task queued before issues were recorded. */
const issueOf = (doc: FleetStateDoc, t: Task): LocalIssue =>
  localIssuesOf(doc)[String(t.issue)] ?? {
    number: t.issue,
    title: t.title,
    body: "",
    labels: [],
    state: "open",
    createdAt: t.createdAt,
  };

/** The write that records `issue` in `doc` after `changes`, with its beads. */
function issueWrite(
  doc: FleetStateDoc,
  beads: string,
  changes: TaskChange[],
  issue: LocalIssue,
  at: { repo: string; now: string },
  message: string,
): LocalWrite {
  const next = withIssue(doc, issue);
  return { doc: next, beads: localBeads(beads, next, changes, issue, at.repo, at.now), message };
}

const withIssue = (doc: FleetStateDoc, issue: LocalIssue): FleetStateDoc => ({
  ...doc,
  [LOCAL_ISSUES_KEY]: { ...localIssuesOf(doc), [issue.number]: issue },
});

/** The beads text after `changes`, with the local issue's description and labels on its bead. */
function localBeads(
  beads: string,
  doc: FleetStateDoc,
  changes: TaskChange[],
  issue: LocalIssue,
  repo: string,
  now: string,
): string {
  const synced = syncBeads(
    beads,
    changes.map((c) => c.task),
    tasksOf(doc),
  );
  const task = changes.find((c) => c.task.issue === issue.number)?.task ?? latestTask(doc, issue.number);
  return mirrorIssue(synced, { issue, task, repo, now: new Date(now) }).beads;
}

const latestTask = (doc: FleetStateDoc, issue: number): Task | undefined =>
  tasksOf(doc)
    .filter((t) => t.issue === issue)
    .sort((a, b) => (a.updatedAt < b.updatedAt ? 1 : -1))[0];
