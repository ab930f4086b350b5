import type { Context } from "probot";
import { modelFor } from "../core/config.ts";
import { renderCommandReply } from "../render/command-replies.ts";
import { mayDriveFleet } from "./guard.ts";
import type { HandlerDeps } from "./handler-deps.ts";
import { loadRepoConfig } from "./load-config.ts";
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

type PullRequestContext = Context<"pull_request.opened"> | Context<"pull_request.ready_for_review">;

/** Whether `path` matches one of `globs` (`**` any folders, `*` within a name); no globs: every path. */
export function pathMatches(path: string, globs: readonly string[]): boolean {
  if (globs.length === 0) return true;
  return globs.some((g) => {
    const re = g
      .split("**")
      .map((part) => part.replace(/[.+^${}()|[\]\\?]/g, "\\$&").replace(/\*/g, "[^/]*"))
      .join(".*");
    return new RegExp(`^${re}$`).test(path) || new RegExp(`^${re}(/.*)?$`).test(path);
  });
}

/**
 * `pull_request.opened|ready_for_review` with that event in `review_on`: an agent review of a person's
 * pull request (not a draft, not Fleet's own, from this repository), when it changes a file that
 * `review_paths` names and its author may drive Fleet (a stranger's PR must not spend the budgets).
 */
export async function onPullRequestForReview(context: PullRequestContext, deps: HandlerDeps): Promise<void> {
  const { pull_request: pr, action } = context.payload;
  if (pr.draft || pr.head.ref.startsWith("fleet/") || context.isBot) return;
  if (pr.head.repo?.full_name?.toLowerCase() !== pr.base.repo.full_name.toLowerCase()) return;
  const repo = (context as unknown as CommentContext).repo();
  const loaded = await loadRepoConfig(deps.github, repo, deps.configs);
  if (!loaded.ok || !(loaded.config.review_on as readonly string[]).includes(action)) return;
  const author = pr.user?.login;
  if (!author || !(await mayDriveFleet(deps.github, repo, loaded.config, author))) return;
  const globs = loaded.config.review_paths;
  if (globs.length > 0) {
    const files = await deps.github.pulls.listFiles(repo, pr.number);
    if (!files.some((f) => pathMatches(f.filename, globs))) return;
  }
  await requestAgentReview(context as unknown as CommentContext, deps, loaded.config, {
    pr: pr.number,
    sender: author,
    quiet: true,
  });
}
