import type { Context } from "probot";
import { parseFleetLabel } from "../core/labels.ts";
import type { RebaseRequest, Task } from "../core/task.ts";
import type { GitHub, PullRequest, RepoRef } from "../github/port.ts";
import { tasksToRebaseAfterMerge } from "../queue/transitions.ts";
import { allowedOrExplain } from "./guard.ts";
import type { HandlerDeps } from "./handler-deps.ts";
import { loadRepoConfig } from "./load-config.ts";
import { fromFork, type MergedFleetPr, prToMatch, taskForPullRequest } from "./pull-request-tasks.ts";

type IssueContext = Context<"issues" | "issue_comment">;
type Queue = Awaited<ReturnType<HandlerDeps["queues"]["forContext"]>>;

/** GitHub computes `mergeable` in the background after the base moves: ask a few times before giving up. */
const MERGEABLE_TRIES = 4;
const MERGEABLE_WAIT_MS = 750;

/**
 * After a `fleet/*` pull request is merged: every other open Fleet PR of the repository
 * that no longer merges cleanly gets a rebase run. GitHub's `mergeable` decides; when GitHub has not
 * computed it yet, the run is queued anyway and the worker tests the merge with git before touching
 * the branch.
 */
export async function rebaseOthersAfterMerge(
  github: GitHub,
  repo: RepoRef,
  { pr: merged, queue, doc, task: mergedTask }: MergedFleetPr,
): Promise<void> {
  const candidates = tasksToRebaseAfterMerge(doc, { pr: merged.number, task: mergedTask });
  for (const task of candidates) {
    // Only PRs into the branch that moved; "closed": merged or closed meanwhile.
    const mergeable = await mergeableOf(github, repo, task.pr!, merged.base.ref);
    if (mergeable === "closed" || mergeable === true) continue;
    await requestRebase(queue, task, {
      why: `#${merged.number} was merged into \`${merged.base.ref}\``,
      onlyIfConflicting: true,
    });
  }
}

async function mergeableOf(
  github: GitHub,
  repo: RepoRef,
  pr: number,
  base: string,
): Promise<boolean | null | "closed"> {
  for (let i = 0; i < MERGEABLE_TRIES; i++) {
    let data: PullRequest;
    try {
      data = await github.pulls.get(repo, pr);
    } catch {
      return null;
    }
    if (data.state !== "open") return "closed";
    if (data.base.ref !== base) return true;
    if (data.mergeable === true || data.mergeable === false) return data.mergeable;
    await new Promise((r) => setTimeout(r, MERGEABLE_WAIT_MS));
  }
  return null;
}

/** pr-open -> queued with the rebase request on the task; false when the task was not waiting on its PR. */
async function requestRebase(queue: Queue, task: Task, rebase: RebaseRequest): Promise<boolean> {
  const moved = await queue.move(task.issue, "queued", {
    taskId: task.id,
    from: ["pr-open"],
    patch: { rebase },
  });
  return moved.length > 0;
}

/**
 * `fleet:rebase` on a Fleet PR (`pull_request.labeled`) or on its issue (`issues.labeled`): a rebase
 * run of the task on demand, even when the PR still merges cleanly. The label is taken off again so
 * it can be applied the next time.
 */
export async function onRebaseLabel(
  context: Context<"issues.labeled"> | Context<"pull_request.labeled">,
  deps: HandlerDeps,
): Promise<void> {
  const label = context.payload.label?.name;
  if (!label || parseFleetLabel(label, deps.knownCoders).kind !== "rebase") return;
  const asIssue = context as unknown as IssueContext;
  const repo = asIssue.repo();
  const loaded = await loadRepoConfig(deps.github, repo, deps.configs);
  if (!loaded.ok) return;
  const sender = context.payload.sender.login;
  if (!(await allowedOrExplain(asIssue, deps, loaded.config, sender))) return;
  const number =
    "pull_request" in context.payload ? context.payload.pull_request.number : context.payload.issue.number;
  const reply = (text: string) => deps.github.issues.createComment(repo, number, text);
  const queue = await deps.queues.forContext(asIssue, loaded.config);
  const doc = await queue.snapshot();
  let task: Task | undefined;
  if ("pull_request" in context.payload) {
    const pr = context.payload.pull_request;
    // A fork's branch may carry a task's name: it is not that task's PR (see fromFork).
    task =
      pr.head.ref.startsWith("fleet/") && !fromFork(pr) ? taskForPullRequest(doc, prToMatch(pr)) : undefined;
  } else {
    const tasks = Object.values(doc.tasks).filter((t) => t.issue === number && t.pr !== undefined);
    task =
      tasks.find((t) => t.state === "pr-open") ??
      tasks.sort((a, b) => b.updatedAt.localeCompare(a.updatedAt))[0];
  }
  await deps.github.issues.removeLabel(repo, number, label).catch(() => undefined);
  if (!task) {
    await reply(
      "`fleet:rebase` found no Fleet pull request here to rebase. Put the label on a Fleet pull request, or on an issue whose Fleet task has an open pull request.",
    );
    return;
  }
  if (task.state !== "pr-open") {
    await reply(
      `Task \`${task.id}\` is ${task.state}; Fleet rebases a pull request while it waits for review. Add \`fleet:rebase\` again once the current run has ended.`,
    );
    return;
  }
  const queued = await requestRebase(queue, task, {
    why: `@${sender} labeled \`fleet:rebase\``,
    onlyIfConflicting: false,
  });
  if (!queued) await reply("The task changed state meanwhile; nothing was queued. Add `fleet:rebase` again.");
}
