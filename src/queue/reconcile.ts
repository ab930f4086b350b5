import { modelFor } from "../core/config.ts";
import { parseDependencies } from "../core/dependencies.ts";
import { filesNamedIn } from "../core/file-paths.ts";
import { parseFleetLabel, taskRequestFromLabels } from "../core/labels.ts";
import { isCancellable, isTerminal } from "../core/lifecycle.ts";
import type { FleetStateDoc } from "../core/state-doc.ts";
import { answersRequestAt, type Task } from "../core/task.ts";
import { perUserQuota } from "../economy/budgets.ts";
import { lastLabeler } from "../github/issue-events.ts";
import { getRepoRole } from "../github/permissions.ts";
import type { GitHub, Issue, RepoRef } from "../github/port.ts";
import type { RepoQueue } from "./repo-queue.ts";

export interface ReconcileReport {
  cancelled: string[];
  /** Tasks queued for coder labels whose webhook never arrived or was not handled (issue numbers). */
  recovered: number[];
  /** Tasks whose pull request was merged (done) or closed (failed) without Fleet hearing of it. */
  ended: string[];
  changed: number;
}

/** How old a state a sweep's scheduling pass may find nothing on without a second read. */
const RECONCILE_TRUST_MS = 30_000;

/**
 * The safety net behind event-driven scheduling, for a crash or a missed webhook: a live task whose
 * issue was closed or lost its coder label is cancelled, a task whose PR was merged or closed ends
 * (settleEndedPullRequests), a label without its task is queued; then one scheduling pass reclaims
 * leases past expiry, releases unblocked and rate-limited tasks and fills free slots.
 *
 * A full sweep (no `since`) costs one issue read per live task that has not opened its PR yet, one PR
 * read per task that has, the open issues' listing, one events read per labeled issue without its
 * task, plus the state reads. With `since` (the start of the last sweep that completed), only issues
 * and PRs updated since then are listed, in one request when nothing changed: closing, labeling and
 * unlabeling all update an issue, so an issue not in that list has nothing the last sweep did not see;
 * only the PRs it shows closed are read.
 */
export async function reconcileRepo(
  queue: RepoQueue,
  github: GitHub,
  repo: RepoRef,
  knownCoders: readonly string[],
  opts: { since?: string } = {},
): Promise<ReconcileReport> {
  const doc = await queue.snapshot();
  const cancelled: string[] = [];
  /** Moves tried (a move that no longer applied read the state afresh too). */
  let moves = 0;
  const listed =
    opts.since === undefined
      ? undefined
      : await github.issues.listForRepo(repo, { state: "all", since: opts.since });
  const updated = listed && new Map(listed.filter((i) => !i.pull_request).map((i) => [i.number, i]));
  const live = Object.values(doc.tasks).filter((t) => isCancellable(t.state));
  for (const task of live) {
    let issue: { state: string; labels: Array<string | { name?: string }> };
    if (updated) {
      const listed = updated.get(task.issue);
      if (!listed) continue;
      issue = listed;
    } else {
      try {
        issue = await github.issues.get(repo, task.issue);
      } catch (error) {
        if ((error as { status?: number }).status === 404 || (error as { status?: number }).status === 410) {
          issue = { state: "closed", labels: [] };
        } else throw error;
      }
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
    moves++;
    const moved = await queue.move(task.issue, "cancelled", { taskId: task.id, reason });
    cancelled.push(...moved.map((t) => t.id));
  }
  const closedPulls =
    listed && new Set(listed.filter((i) => i.pull_request && i.state === "closed").map((i) => i.number));
  const settled = await settleEndedPullRequests(queue, github, repo, Object.values(doc.tasks), closedPulls);
  // Its labels are looked up in the state the sweep last had: as it read it, or as its moves left it (a
  // task to queue is checked again inside the queue's compare-and-swap, so a state another writer has
  // moved since costs at most a lookup of a label's events, not a second task).
  const wrote = moves + settled.moves > 0;
  const recovered = await queueMissedLabels(
    queue,
    github,
    repo,
    knownCoders,
    updated && [...updated.values()].filter((i) => i.state === "open"),
    wrote ? queue.lastState() : doc,
  );
  // A pass that finds nothing on the state the sweep read (or last wrote) is not read again to be sure:
  // the next event or sweep passes again.
  const changed = await queue.schedule({ trustCacheMs: RECONCILE_TRUST_MS });
  // A PR that could not be read fails the sweep only now: the rest of it is done, and the next sweep
  // starts from the same point (see RepoQueues.reconcileOne), so it reads that PR again.
  if (settled.failure !== undefined) throw settled.failure;
  return { cancelled, recovered, ended: settled.ended, changed: changed.length };
}

/**
 * A task waiting on its pull request whose `pull_request.closed` webhook was missed, or whose handling
 * failed after the delivery was answered: merged -> done, closed unmerged -> failed, as the webhook
 * would have moved it. A full sweep reads each such PR (one request per `pr-open` task); with a
 * listing of what was updated since the last sweep, only the PRs it shows closed.
 */
async function settleEndedPullRequests(
  queue: RepoQueue,
  github: GitHub,
  repo: RepoRef,
  tasks: Task[],
  closedSince?: Set<number>,
): Promise<{ ended: string[]; moves: number; failure?: unknown }> {
  const ended: string[] = [];
  let moves = 0;
  let failure: unknown;
  for (const task of tasks) {
    if (task.state !== "pr-open" || task.pr === undefined) continue;
    if (closedSince && !closedSince.has(task.pr)) continue;
    let pr: { state: string; merged: boolean };
    try {
      pr = await github.pulls.get(repo, task.pr);
    } catch (error) {
      const status = (error as { status?: number }).status;
      // No such PR (anymore): nothing to learn from it. Anything else: the others go on (see below).
      if (status !== 404 && status !== 410) failure ??= error;
      continue;
    }
    if (pr.state !== "closed") continue;
    // The task as the sweep read it may have moved on since (a retry opened another PR).
    const samePr = { taskId: task.id, from: ["pr-open" as const], when: (t: Task) => t.pr === task.pr };
    moves++;
    const moved = pr.merged
      ? await queue.move(task.issue, "done", samePr)
      : await queue.move(task.issue, "failed", {
          ...samePr,
          reason: `pull request #${task.pr} was closed without merging (found by reconcile); comment \`/fleet retry\` to run it again`,
        });
    ended.push(...moved.map((t) => t.id));
  }
  return { ended, moves, failure };
}

/**
 * An open issue carrying a `fleet:<coder>` label that has no task for that coder, or only ended
 * ones older than the label, lost its `labeled` webhook (the app was down or died handling it).
 * It is queued as the webhook would have queued it: only when the person who added the label may
 * drive Fleet (a bot's label, or a reader's, stays ignored) and is within their daily quota.
 */
async function queueMissedLabels(
  queue: RepoQueue,
  github: GitHub,
  repo: RepoRef,
  knownCoders: readonly string[],
  /** The open issues to look at; by default every open issue is listed. */
  candidates?: Issue[],
  /** The state as the sweep read it or its moves left it; else read now. */
  known?: FleetStateDoc,
): Promise<number[]> {
  const doc = known ?? (await queue.snapshot());
  const config = queue.config(doc);
  const tasks = Object.values(doc.tasks);
  const issues = candidates ?? (await github.issues.listForRepo(repo, { state: "open" }));
  const recovered: number[] = [];
  for (const issue of issues) {
    if (issue.pull_request) continue;
    const labels = issue.labels.map((l) => (typeof l === "string" ? l : (l.name ?? "")));
    for (const label of labels) {
      const parsed = parseFleetLabel(label, knownCoders);
      if (parsed.kind !== "coder") continue;
      const mine = tasks.filter((t) => t.issue === issue.number && t.coder === parsed.coder);
      if (mine.some((t) => !isTerminal(t.state))) continue;
      const by = await lastLabeler(github, repo, issue.number, label);
      if (!by || by.type === "Bot") continue;
      // The label came before the newest task, or before one was queued again: that was its answer.
      if (mine.some((t) => answersRequestAt(t, Date.parse(by.at)))) continue;
      const role = await getRepoRole(github, repo, by.login);
      if (!(config.allowed_roles as readonly string[]).includes(role)) continue;
      const live: Task[] = Object.values((await queue.snapshot()).tasks);
      if (!perUserQuota(config.per_user_daily_tasks, live, by.login, queue.now()).allowed) continue;
      const outcome = await queue.enqueue({
        issue: issue.number,
        title: issue.title,
        coder: parsed.coder,
        model: modelFor(config, parsed.coder, parsed.model),
        priority: taskRequestFromLabels(labels, knownCoders).priority,
        dependsOn: parseDependencies(issue.body ?? "", `${repo.owner}/${repo.repo}`),
        files: filesNamedIn(issue.body ?? ""),
        requestedBy: by.login,
        labeledAt: by.at,
        // The label's webhook was lost: the issue as it reads now is the best record of what was labeled.
        body: issue.body ?? null,
      });
      if (outcome.applied) recovered.push(issue.number);
    }
  }
  return recovered;
}
