import type { FleetStateDoc } from "../../core/state-doc.ts";
import type { Task } from "../../core/task.ts";
import { markLocalPullMerged, readLocalPulls } from "../../queue/local-github.ts";
import { localBaseOf, localRepositoryOf, mergeLocalTask } from "../../queue/local-issues.ts";
import type { RepoQueue } from "../../queue/repo-queue.ts";
import { tasksToRebaseAfterMerge } from "../../queue/transitions.ts";
import { parse, TARGET_HELP, TARGET_OPTIONS, taskRefArgument } from "../args.ts";
import { CliError } from "../errors.ts";
import { json, out } from "../io.ts";
import { conflictingFiles, mergeLocalBranch } from "../local-merge.ts";
import { describeTarget, type LocalTarget, resolveTarget } from "../target.ts";
import { findTaskRef } from "../task-ref.ts";

export const MERGE_USAGE = `Usage: fleet merge <id> [--base <branch>] [--json]

Local mode: merges the task's fleet/* branch into its base branch, in the repository the task was
created in (wherever you run this), as merging its pull request would: a fast-forward when the base
has not moved, else a merge commit (with your git identity). The task is then done, its issue
closed (unless another side of its A/B run is still open), and tasks that depend on it are unblocked.

When the branch conflicts with the base nothing is merged: a rebase run is queued instead, the same
as on GitHub (the task's agent replays the branch onto the base and resolves the conflicting files);
\`fleet run\` runs it, then \`fleet merge <id>\` again. After a merge, as on GitHub, every other task
branch of the repository that now conflicts with the base gets a rebase run too.

Your checkout is never clobbered: when the base branch is checked out, its working tree is updated
(git merge --ff-only), and a checkout with uncommitted changes, or with untracked or ignored files
the merge would overwrite (your ignored .env, say, when the branch adds a tracked one), is refused
before anything moves, naming the files to move.
Against GitHub, merge the pull request there; the Fleet app marks the task done.

The base is the one the task's local pull request names (the branch its run started from), else the
one recorded when its issue was created (\`fleet bd create\` records the branch checked out then).
--base <branch> names it instead: for a task created before Fleet recorded it. The task's own branch
is never its base.

<id> is a task id (fl-a3f) or an issue (#12: its latest task; in an A/B run name the side's task).
Exit codes: 0 merged, 1 not merged (a conflict: rebase queued; or an error), 2 usage, 3 not found.

${TARGET_HELP}`;

const OPTIONS = { ...TARGET_OPTIONS, base: { type: "string" } } as const;

/** What to say about a task that cannot be merged in its state. */
function notMergeable(task: Task): string {
  const what = `Task ${task.id} (#${task.issue}) is ${task.state}`;
  switch (task.state) {
    case "done":
      return `${what}: it is merged or closed already.`;
    case "failed":
    case "cancelled":
      return `${what}: it has no branch to merge. \`fleet retry ${task.id}\` runs it again.`;
    case "awaiting-approval":
      return `${what}: its plan waits for \`fleet approve ${task.id}\`; it has no branch yet.`;
    case "waiting":
      return `${what}: its agent waits for \`fleet answer ${task.id} "<answer>"\`; it has no branch yet.`;
    default:
      return `${what}: only a task whose branch is pushed (pr-open) can be merged. Wait for its run to end (\`fleet tasks\`).`;
  }
}

/** The repository the task's branch is in: its recorded one, or (older tasks) the target's when the name matches. */
function repositoryOf(target: LocalTarget, doc: FleetStateDoc, task: Task): string {
  const recorded = localRepositoryOf(doc, task);
  if (recorded) return recorded.path;
  if (task.repo === target.full) return target.repoPath;
  throw new CliError(
    `Task ${task.id} was queued before Fleet recorded each task's repository; it belongs to ${task.repo}. Run fleet merge inside that repository (or pass --repo-path to it).`,
  );
}

export async function mergeCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, OPTIONS, MERGE_USAGE);
  const ref = taskRefArgument(positionals, "fleet merge", MERGE_USAGE);
  const target = await resolveTarget(values);
  if (target.kind === "github")
    throw new CliError(
      `fleet merge is for local mode. On ${target.full}, merge the task's pull request on GitHub: the Fleet app then marks it done.`,
    );
  const { doc } = await target.store.read();
  const task = findTaskRef(doc, ref, describeTarget(target));
  if (task.state !== "pr-open" || !task.branch) throw new CliError(notMergeable(task));
  const repo = repositoryOf(target, doc, task);
  const pull = (await readLocalPulls(target.home)).find((p) => p.head === task.branch && p.state === "open");
  const base = baseOf(task, values.base ?? pull?.base ?? localBaseOf(doc, task));
  const message = `Merge ${task.branch} into ${base}: ${task.title} (#${task.issue}, ${task.id})`;
  const merged = await mergeLocalBranch(repo, task.branch, base, message);
  const queue = target.queue((await target.fileConfig()).config);

  if (merged.kind === "conflict") {
    const moved = await queue.move(task.issue, "queued", {
      taskId: task.id,
      from: ["pr-open"],
      patch: {
        rebase: { why: `fleet merge found conflicts with \`${base}\``, onlyIfConflicting: true },
      },
    });
    const files = merged.files.join(", ") || "(git named none)";
    if (values.json)
      json({
        id: task.id,
        merged: false,
        conflicts: merged.files,
        rebase: moved.length ? "queued" : "not queued",
      });
    else
      out(
        `not merged: ${task.branch} conflicts with ${base} in ${files}.\n` +
          (moved.length
            ? `Queued a rebase run of ${task.id}: \`fleet run\` has its agent resolve the conflicts, then run \`fleet merge ${task.id}\` again.`
            : `${task.id} changed state meanwhile; no rebase was queued (see \`fleet tasks --all\`).`),
      );
    return 1;
  }

  const how =
    merged.kind === "already-merged"
      ? `${base} already contains it`
      : `${merged.kind === "fast-forward" ? "fast-forward" : "merge commit"} ${merged.sha.slice(0, 12)}`;
  await markLocalPullMerged(target.home, task.branch);
  const now = new Date().toISOString();
  const write = await target.store.update(({ doc: d, beads }) =>
    mergeLocalTask(d, beads, task.id, { repo: task.repo, now, how }),
  );
  // The merge is a finished run: tasks that waited for this issue may start now.
  await queue.schedule();
  const rebased = await rebaseConflicting(
    queue,
    (await target.store.read()).doc,
    task,
    repo,
    base,
    target.home,
  );
  const after = (await target.store.read()).doc;
  const unblocked = Object.values(after.tasks).filter(
    (t) => t.dependsOn.includes(task.issue) && doc.tasks[t.id]?.state === "blocked" && t.state !== "blocked",
  );
  const state = after.tasks[task.id]?.state ?? task.state;
  if (values.json)
    json({
      id: task.id,
      merged: true,
      how: merged.kind,
      sha: merged.sha,
      branch: task.branch,
      base,
      repository: repo,
      state,
      unblocked: unblocked.map((t) => ({ id: t.id, issue: t.issue, state: t.state })),
      rebased,
    });
  else {
    out(`merged ${task.branch} into ${base} in ${repo} (${how}); ${task.id} is ${state}`);
    if (!write.applied && state !== "done")
      out(`${task.id} changed state meanwhile and was not marked done; see \`fleet tasks --all\`.`);
    for (const t of unblocked) out(`unblocked ${t.id} (#${t.issue}): ${t.state}`);
    for (const r of rebased)
      out(
        `queued a rebase run of ${r.id} (#${r.issue}): its branch now conflicts with ${base} in ${r.files.join(", ")}`,
      );
  }
  return 0;
}

/**
 * As on GitHub after a merge: every other open branch of the repository into the same base that no
 * longer merges cleanly gets a rebase run. The other sides of the merged task's A/B run are left
 * alone: they are alternatives to what was merged, not work on top of it.
 */
async function rebaseConflicting(
  queue: RepoQueue,
  doc: FleetStateDoc,
  merged: Task,
  repo: string,
  base: string,
  home: string,
): Promise<Array<{ id: string; issue: number; files: string[] }>> {
  const pulls = await readLocalPulls(home);
  const out: Array<{ id: string; issue: number; files: string[] }> = [];
  for (const t of tasksToRebaseAfterMerge(doc, { pr: merged.pr ?? -1, task: merged })) {
    if (!t.branch || t.id === merged.id) continue;
    const path = localRepositoryOf(doc, t)?.path ?? (t.repo === merged.repo ? repo : undefined);
    const pull = pulls.find((p) => p.head === t.branch && p.state === "open");
    if (path !== repo || (pull?.base ?? localBaseOf(doc, t) ?? base) !== base) continue;
    const files = await conflictingFiles(repo, base, t.branch).catch(() => []);
    if (files.length === 0) continue;
    const moved = await queue.move(t.issue, "queued", {
      taskId: t.id,
      from: ["pr-open"],
      patch: { rebase: { why: `\`${merged.branch}\` was merged into \`${base}\``, onlyIfConflicting: true } },
    });
    if (moved.length) out.push({ id: t.id, issue: t.issue, files });
  }
  return out;
}

/**
 * The branch to merge `task`'s branch into, refused when unknown or the task's branch itself: HEAD of
 * the repository is no answer (with the task's branch checked out, it would "merge" into itself and
 * close the task with nothing merged).
 */
function baseOf(task: Task, base: string | undefined): string {
  if (!base)
    throw new CliError(
      `Fleet does not know which branch ${task.branch} of ${task.id} (#${task.issue}) merges into: it has no open local pull request, and #${task.issue} was created before Fleet recorded its base branch. Name it: fleet merge ${task.id} --base <branch>. Nothing was merged.`,
    );
  if (base === task.branch)
    throw new CliError(
      `The base branch of ${task.id} (#${task.issue}) is recorded as its own branch ${task.branch}: a branch cannot be merged into itself. Name the branch to merge into: fleet merge ${task.id} --base <branch>. Nothing was merged.`,
    );
  return base;
}
