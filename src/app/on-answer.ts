import type { Context } from "probot";
import { parseFleetCommand } from "../core/commands.ts";
import { LABEL_PREFIX } from "../core/labels.ts";
import type { FleetStateDoc } from "../core/state-doc.ts";
import type { RepoQueue } from "../queue/repo-queue.ts";
import { waitingTasksOf } from "../queue/transitions.ts";
import { renderCommandReply } from "../render/command-replies.ts";
import { configOrExplain, mayDriveFleet } from "./guard.ts";
import type { HandlerDeps } from "./handler-deps.ts";

type CommentContext = Context<"issue_comment.created">;

/** What an answer on an issue did: the task it answered, or why none. */
export type AnswerResult =
  | { answered: string }
  | { none: true }
  | { ambiguous: string[] }
  | { notWaiting: string };

/**
 * Answers the task of `issue` whose agent waits for an answer to its question: the one `taskId` names,
 * else the only one waiting. With more than one waiting (the sides of an A/B run, each with its own
 * question) and none named, nothing is answered and their ids are returned.
 */
export async function answerWaitingTask(
  queue: RepoQueue,
  issue: number,
  answer: { text: string; by: string; taskId?: string },
  /** The state as the caller just read it (else it is read here). */
  doc?: FleetStateDoc,
): Promise<AnswerResult> {
  const waiting = waitingTasksOf(doc ?? (await queue.snapshot()), issue);
  const named = answer.taskId;
  const target = named ? waiting.find((t) => t.id === named) : waiting.length === 1 ? waiting[0] : undefined;
  if (named && !target) return { notWaiting: named };
  if (!target) return waiting.length === 0 ? { none: true } : { ambiguous: waiting.map((t) => t.id) };
  const answered = await queue.answer(target.id, answer.text, answer.by);
  return answered ? { answered: target.id } : { none: true };
}

/** The reply for an answer that answered nothing. */
export function answerRefusal(r: AnswerResult): string | undefined {
  if ("ambiguous" in r)
    return `More than one task of this issue waits for an answer (${r.ambiguous.map((id) => `\`${id}\``).join(", ")}): name the one you answer, \`/fleet answer <task-id> <answer>\`.`;
  if ("notWaiting" in r) return `Task \`${r.notWaiting}\` of this issue does not wait for an answer.`;
  if ("none" in r)
    return "Nothing to answer: no task of this issue waits for an answer to its agent's question.";
  return undefined;
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
  if (!config) return;
  const queue = await deps.queues.forContext(context, config);
  // The state first (a git read, mostly "unchanged"): a reply on an issue with no waiting task costs no
  // permission check.
  const issue = payload.issue.number;
  const doc = await queue.snapshot();
  if (waitingTasksOf(doc, issue).length === 0) return;
  const sender = payload.comment.user?.login ?? payload.sender.login;
  if (!(await mayDriveFleet(deps.github, context.repo(), config, sender))) return;
  const result = await answerWaitingTask(queue, issue, { text: body, by: sender }, doc);
  // Two sides waiting: a plain reply cannot say which it answers, so the maintainer is asked to name it.
  if ("ambiguous" in result)
    await deps.github.issues.createComment(
      context.repo(),
      issue,
      renderCommandReply("answer", answerRefusal(result)!),
    );
}
