import type { Context } from "probot";
import { modelFor } from "../core/config.ts";
import { renderCommandReply } from "../render/command-replies.ts";
import type { HandlerDeps } from "./handler-deps.ts";
import { quotaOrExplain } from "./on-issue-labeled.ts";

type CommentContext = Context<"issue_comment.created">;
type Config = Parameters<HandlerDeps["queues"]["forContext"]>[1];

/**
 * Queues an agent review of pull request `pr` (anyone's, a person's too): a task on the PR whose run is
 * read-only and posts one GitHub review. The caller has checked the sender may drive Fleet. Counted
 * against the same quota and budgets as any task.
 */
export async function requestAgentReview(
  context: CommentContext,
  deps: HandlerDeps,
  config: Config,
  req: { pr: number; coder?: string; model?: string; sender: string; quiet?: boolean },
): Promise<boolean> {
  const reply = (text: string) =>
    req.quiet
      ? Promise.resolve()
      : deps.github.issues
          .createComment(context.repo(), req.pr, renderCommandReply("review", text))
          .then(() => undefined);
  const coder = req.coder ?? config.default_coder;
  if (!deps.knownCoders.includes(coder)) {
    await reply(
      `Unknown coder \`${coder}\`; known coders: ${deps.knownCoders.map((c) => `\`${c}\``).join(", ")}.`,
    );
    return false;
  }
  const pull = await deps.github.pulls.get(context.repo(), req.pr);
  if (pull.state !== "open") {
    await reply(
      `Pull request #${req.pr} is ${pull.merged ? "merged" : "closed"}; Fleet reviews open pull requests.`,
    );
    return false;
  }
  const queue = await deps.queues.forContext(context, config);
  if (!(await quotaOrExplain(context, deps, queue, config, req.sender))) return false;
  const outcome = await queue.enqueue({
    issue: req.pr,
    title: `Review: ${pull.title}`,
    coder,
    model: modelFor(config, coder, req.model),
    priority: 2,
    dependsOn: [],
    requestedBy: req.sender,
    review: { pr: req.pr },
  });
  if (!outcome.applied) {
    const live = outcome.task;
    await reply(
      live
        ? `Pull request #${req.pr} already has a live task for \`${coder}\` (\`${live.id}\`, ${live.state}); wait for it or \`/fleet cancel\` it first.`
        : "Nothing was queued; try again.",
    );
    return false;
  }
  await reply(`Queued a read-only review of #${req.pr} by \`${coder}\` (task \`${outcome.task?.id}\`).`);
  return true;
}
