import type { Context } from "probot";
import { type FleetConfig, modelFor } from "../core/config.ts";
import { parseDependencies } from "../core/dependencies.ts";
import { filesNamedIn } from "../core/file-paths.ts";
import { LABEL_GRAMMAR_HELP, parseFleetLabel, taskRequestFromLabels } from "../core/labels.ts";
import { perUserQuota } from "../economy/budgets.ts";
import { upsertMarkedComment } from "../github/upsert-comment.ts";
import { labelErrorMarker, noticeMarker } from "../render/markers.ts";
import { renderLabelError, renderQuotaNotice } from "../render/notices.ts";
import { admitLabeler } from "./guard.ts";
import type { HandlerDeps } from "./handler-deps.ts";

/**
 * Whether `sender` may have one more task today (`per_user_daily_tasks`); if not, the issue says so. A
 * flood of requests from one person is held at the door, before it costs a slot or a commit.
 */
export async function quotaOrExplain(
  context: Context<"issues" | "issue_comment">,
  deps: HandlerDeps,
  queue: Awaited<ReturnType<HandlerDeps["queues"]["forContext"]>>,
  config: FleetConfig,
  sender: string,
): Promise<boolean> {
  if (config.per_user_daily_tasks === undefined) return true;
  const tasks = Object.values((await queue.snapshot()).tasks);
  const quota = perUserQuota(config.per_user_daily_tasks, tasks, sender, queue.now());
  if (quota.allowed) return true;
  const marker = noticeMarker(`quota-${sender.toLowerCase()}`);
  await upsertMarkedComment(deps.github, context.issue(), marker, renderQuotaNotice(marker, quota.reason));
  return false;
}

/** `issues.labeled`: a `fleet:<coder>[:<model>]` label turns the issue into a queued task. */
export async function onIssueLabeled(context: Context<"issues.labeled">, deps: HandlerDeps): Promise<void> {
  const { payload } = context;
  const labelName = payload.label?.name;
  if (!labelName) return;

  const parsed = parseFleetLabel(labelName, deps.knownCoders);
  if (parsed.kind === "error") {
    const body = renderLabelError(labelName, parsed.message, LABEL_GRAMMAR_HELP);
    await upsertMarkedComment(deps.github, context.issue(), labelErrorMarker(labelName), body);
    return;
  }
  if (parsed.kind !== "coder") return;

  const admitted = await admitLabeler(context, deps);
  if (!admitted) return;
  const { config, sender, labels, queue } = admitted;
  const issue = payload.issue;
  const { priority } = taskRequestFromLabels(labels, deps.knownCoders);
  const { owner, repo } = context.repo();
  const model = modelFor(config, parsed.coder, parsed.model);
  if (!(await quotaOrExplain(context, deps, queue, config, sender))) return;
  await queue.enqueue({
    issue: issue.number,
    title: issue.title,
    coder: parsed.coder,
    model,
    // A repeated or late delivery of this label must not run the issue again after its task ended.
    labeledAt: issue.updated_at,
    priority,
    dependsOn: parseDependencies(issue.body ?? "", `${owner}/${repo}`),
    requestedBy: sender,
    files: filesNamedIn(issue.body ?? ""),
    // The text the labeler approved, as the event carries it: later edits reach the agent only when
    // someone who may drive Fleet makes them (see on-issue-edited.ts).
    body: issue.body ?? null,
  });
}
