import type { Context } from "probot";
import { parseFleetCommand } from "../core/commands.ts";
import { renderCommandReply } from "../render/command-replies.ts";
import { allowedOrExplain } from "./guard.ts";
import type { HandlerDeps } from "./handler-deps.ts";
import { loadRepoConfig } from "./load-config.ts";
import { fromFork, taskForPullRequest } from "./pull-request-tasks.ts";

type ReviewContext = Context<"pull_request_review.submitted">;
type CommentContext = Context<"issue_comment.created">;

/** `pull_request_review.submitted` whose body is `/fleet <instructions>`: another run on the PR's branch. */
export async function onReview(context: ReviewContext, deps: HandlerDeps): Promise<void> {
  const { review, pull_request: pr } = context.payload;
  const command = parseFleetCommand(review.body ?? "", { onPullRequest: true });
  if (command.kind !== "instructions" || fromFork(pr)) return;
  const loaded = await loadRepoConfig(deps.github, context.repo(), deps.configs);
  if (!loaded.ok) return;
  const sender = review.user?.login ?? context.payload.sender.login;
  const asIssue = context as unknown as CommentContext;
  if (!(await allowedOrExplain(asIssue, deps, loaded.config, sender))) return;
  await requestReviewRun(asIssue, deps, loaded.config, {
    pr: pr.number,
    head: pr.head.ref,
    text: command.text,
    sender,
  });
}

/**
 * Queues a review-loop run of the PR's task: pr-open -> queued with the instructions kept on the
 * task; the worker runs the agent on the same branch with them (and the inline review comments).
 * The caller has checked the sender may drive Fleet.
 */
export async function requestReviewRun(
  context: CommentContext,
  deps: HandlerDeps,
  config: Parameters<HandlerDeps["queues"]["forContext"]>[1],
  req: { pr: number; head?: string; text: string; sender: string },
): Promise<void> {
  const reply = (text: string) =>
    deps.github.issues.createComment(context.repo(), req.pr, renderCommandReply("instructions", text));
  const queue = await deps.queues.forContext(context, config);
  const doc = await queue.snapshot();
  let head = req.head;
  let opened: { createdAt?: string; body?: string | null } = {};
  if (head === undefined) {
    const data = await deps.github.pulls.get(context.repo(), req.pr);
    if (fromFork(data)) {
      await reply("This pull request comes from a fork; Fleet runs agents only on its own branches.");
      return;
    }
    head = data.head.ref;
    opened = { createdAt: data.created_at, body: data.body };
  }
  const task = taskForPullRequest(doc, { number: req.pr, head, ...opened });
  if (!task) {
    await reply("This pull request is not a Fleet task's, so there is no agent to send instructions to.");
    return;
  }
  if (task.state !== "pr-open") {
    await reply(
      `Task \`${task.id}\` is ${task.state}; instructions are taken while its pull request waits for review. Try again once the current run has ended.`,
    );
    return;
  }
  // An older pull request on the task's branch (closed, another opened since): the round would move the
  // task onto it, and find it gone.
  if (task.pr !== undefined && task.pr !== req.pr) {
    await reply(
      `This is not task \`${task.id}\`'s current pull request (#${task.pr}); send its instructions there.`,
    );
    return;
  }
  const moved = await queue.move(task.issue, "queued", {
    taskId: task.id,
    from: ["pr-open"],
    patch: { instructions: `${req.text}\n\n(from @${req.sender})`, pr: req.pr },
  });
  if (moved.length === 0) {
    await reply("The task changed state meanwhile; nothing was queued. Try again.");
    return;
  }
  await reply(
    `Queued another run of task \`${task.id}\` on \`${head}\` with @${req.sender}'s instructions; new commits will land on this pull request.`,
  );
}
