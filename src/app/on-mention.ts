import type { Context } from "probot";
import { parseFleetCommand } from "../core/commands.ts";
import { modelFor } from "../core/config.ts";
import { parseDependencies } from "../core/dependencies.ts";
import { filesNamedIn } from "../core/file-paths.ts";
import { taskRequestFromLabels } from "../core/labels.ts";
import { parseMention } from "../core/mentions.ts";
import { waitingTasksOf } from "../queue/transitions.ts";
import { renderCommandReply } from "../render/command-replies.ts";
import { configOrExplain, mayDriveFleet } from "./guard.ts";
import type { HandlerDeps } from "./handler-deps.ts";
import { quotaOrExplain } from "./on-issue-labeled.ts";
import { requestReviewRun } from "./on-review.ts";
import { fromFork, prToMatch, taskForPullRequest } from "./pull-request-tasks.ts";

type CommentContext = Context<"issue_comment.created">;

/**
 * `issue_comment.created` mentioning the app (`@fleet please add a changelog entry`, the handle being
 * the app's slug): from someone who may drive Fleet, a task for the issue with the request added to its
 * prompt (the coder and model of a `fleet:<coder>[:<model>]` prefix, else the default coder's), or on
 * a Fleet pull request a review round. Anyone else gets no answer: a mention is often conversation.
 */
export async function onMention(context: CommentContext, deps: HandlerDeps): Promise<void> {
  const { payload } = context;
  const body = payload.comment.body ?? "";
  const onPullRequest = Boolean(payload.issue.pull_request);
  // A `/fleet` command in the same comment is the command's (on-command.ts).
  if (!body.includes("@") || parseFleetCommand(body, { onPullRequest }).kind !== "none") return;
  const handle = await deps.appHandle?.();
  if (!handle) return;
  const mention = parseMention(body, handle, deps.knownCoders);
  if (mention.kind === "none") return;
  const sender = payload.comment.user?.login ?? payload.sender.login;
  const config = await configOrExplain(context, deps);
  if (!config || !(await mayDriveFleet(deps.github, context.repo(), config, sender))) return;
  const issue = payload.issue;
  const reply = (text: string) =>
    deps.github.issues.createComment(context.repo(), issue.number, renderCommandReply("mention", text));
  if (mention.kind === "error") {
    await reply(mention.message);
    return;
  }
  const queue = await deps.queues.forContext(context, config);
  // On an issue whose task waits for an answer, the comment is the answer (on-answer.ts).
  if (!onPullRequest && waitingTasksOf(await queue.snapshot(), issue.number).length > 0) return;
  if (onPullRequest) {
    const pr = await deps.github.pulls.get(context.repo(), issue.number);
    // A fork's branch may carry a task's name: it is not that task's PR (see fromFork).
    const task = fromFork(pr) ? undefined : taskForPullRequest(await queue.snapshot(), prToMatch(pr));
    if (task) {
      await requestReviewRun(context, deps, config, {
        pr: pr.number,
        head: pr.head.ref,
        text: mention.text,
        sender,
      });
      return;
    }
  }
  if (!(await quotaOrExplain(context, deps, queue, config, sender))) return;
  const coder = mention.coder ?? config.default_coder;
  const model = modelFor(config, coder, mention.model);
  const { owner, repo } = context.repo();
  const labels = (issue.labels ?? []).map((l) => (typeof l === "string" ? l : (l.name ?? "")));
  const outcome = await queue.enqueue({
    issue: issue.number,
    title: issue.title,
    coder,
    model,
    // A repeated delivery of this comment is answered by the task it created.
    labeledAt: payload.comment.created_at,
    priority: taskRequestFromLabels(labels, deps.knownCoders).priority,
    dependsOn: parseDependencies(issue.body ?? "", `${owner}/${repo}`),
    requestedBy: sender,
    files: filesNamedIn(`${issue.body ?? ""}\n${mention.text}`),
    body: `${issue.body ?? ""}\n\n---\n\n@${sender} asked in a comment:\n\n${mention.text}`,
  });
  if (!outcome.applied && outcome.task && outcome.task.createdAt < payload.comment.created_at)
    await reply(
      `This issue already has a live task for \`${coder}\` (\`${outcome.task.id}\`, ${outcome.task.state}): ` +
        "wait for it, or `/fleet cancel` it first, or name another coder (`@" +
        `${handle} fleet:<coder> ...\`).`,
    );
}
