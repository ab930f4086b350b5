import type { Context } from "probot";
import { modelFor } from "../core/config.ts";
import { parseFleetLabel, taskRequestFromLabels } from "../core/labels.ts";
import type { GitHub, RepoRef } from "../github/port.ts";
import { admitLabeler } from "./guard.ts";
import type { HandlerDeps } from "./handler-deps.ts";
import { type MergedFleetPr, prToMatch, taskForPullRequest } from "./pull-request-tasks.ts";

/**
 * `issues.labeled` with `fleet:split[:<coder>]`: the issue becomes a split task, a read-only run
 * whose plan the worker turns into sub-issues (see src/split/apply-plan.ts).
 */
export async function onSplitLabel(context: Context<"issues.labeled">, deps: HandlerDeps): Promise<void> {
  const { payload } = context;
  const parsed = parseFleetLabel(payload.label?.name ?? "", deps.knownCoders);
  if (parsed.kind !== "split") return;
  const admitted = await admitLabeler(context, deps);
  if (!admitted) return;
  const { config, sender, labels, queue } = admitted;
  const issue = payload.issue;
  const coder = parsed.coder ?? config.default_coder;
  await queue.enqueue({
    issue: issue.number,
    title: issue.title,
    coder,
    model: modelFor(config, coder),
    priority: taskRequestFromLabels(labels, deps.knownCoders).priority,
    // Planning waits for nothing; the sub-issues carry the dependencies.
    dependsOn: [],
    requestedBy: sender,
    body: issue.body ?? null,
  });
}

/**
 * After a `fleet/*` pull request is merged, when its issue is a sub-issue Fleet split off: once every
 * sub-issue of the epic is done (closed, or its task done), the epic is closed.
 */
export async function closeEpicWhenDone(
  github: GitHub,
  repo: RepoRef,
  { pr, doc }: MergedFleetPr,
): Promise<void> {
  const task = taskForPullRequest(doc, prToMatch(pr));
  if (!task) return;
  // Recorded when Fleet queued the sub-issue: no issue read for every other merged task.
  const epic = task.epic;
  if (epic === undefined) return;
  const subs = await github.issues.listSubIssues(repo, epic);
  const doneIssues = new Set(
    Object.values(doc.tasks)
      .filter((t) => t.state === "done")
      .map((t) => t.issue),
  );
  const allDone = subs.every(
    (s) => s.number === task.issue || s.state === "closed" || doneIssues.has(s.number),
  );
  if (subs.length === 0 || !allDone) return;
  const epicIssue = await github.issues.get(repo, epic);
  if (epicIssue.state === "closed") return;
  await github.issues.createComment(
    repo,
    epic,
    `All ${subs.length} sub-issues are done (${subs.map((s) => `#${s.number}`).join(", ")}); Fleet closes this issue.`,
  );
  await github.issues.update(repo, epic, { state: "closed", state_reason: "completed" });
}
