import type { Context } from "probot";
import { boundAnswer, parseFleetCommand } from "../core/commands.ts";
import { LABEL_PREFIX } from "../core/labels.ts";
import type { RepoQueue } from "../queue/repo-queue.ts";
import { configOrExplain, mayDriveFleet } from "./guard.ts";
import type { HandlerDeps } from "./handler-deps.ts";

type CommentContext = Context<"issue_comment.created">;

/**
 * Answers every task of `issue` whose agent waits for an answer to its question: each is queued again
 * with the answer (see RepoQueue.answer). How many were answered.
 */
export async function answerWaitingTasks(
  queue: RepoQueue,
  issue: number,
  text: string,
  by: string,
): Promise<number> {
  const waiting = Object.values((await queue.snapshot()).tasks).filter(
    (t) => t.issue === issue && t.state === "waiting",
  );
  let answered = 0;
  for (const t of waiting) if (await queue.answer(t.id, boundAnswer(text), by)) answered++;
  return answered;
}

/**
 * `issue_comment.created`, a plain reply (no `/fleet` command; a mention of the app too) on an issue
 * with a Fleet label from someone who may drive Fleet: when a task of the issue waits for an answer to
 * its agent's question, the reply is the answer. Anything else is conversation and gets nothing.
 */
export async function onAnswer(context: CommentContext, deps: HandlerDeps): Promise<void> {
  const { payload } = context;
  if (payload.issue.pull_request) return;
  const body = (payload.comment.body ?? "").trim();
  if (!body || parseFleetCommand(body).kind !== "none") return;
  // Only an issue Fleet works on can have a waiting task: other comments cost no state read.
  const labels = (payload.issue.labels ?? []).map((l) => (typeof l === "string" ? l : (l.name ?? "")));
  if (!labels.some((l) => l.toLowerCase().startsWith(LABEL_PREFIX))) return;
  const config = await configOrExplain(context, deps);
  const sender = payload.comment.user?.login ?? payload.sender.login;
  if (!config || !(await mayDriveFleet(deps.github, context.repo(), config, sender))) return;
  const queue = await deps.queues.forContext(context, config);
  await answerWaitingTasks(queue, payload.issue.number, body, sender);
}
