import type { Context } from "probot";
import type { FleetStateDoc } from "../core/state-doc.ts";
import type { Task } from "../core/task.ts";
import type { RepoQueue } from "../queue/repo-queue.ts";
import { tasksOnPullRequest } from "../queue/transitions.ts";

/** A merged `fleet/*` pull request, on the one read of the state its handlers share. */
export interface MergedFleetPr {
  pr: Context<"pull_request.closed">["payload"]["pull_request"];
  queue: RepoQueue;
  doc: FleetStateDoc;
  /** The task whose PR it is, as `doc` holds it (none: a `fleet/*` branch Fleet has no task for). */
  task?: Task;
}

/**
 * A pull request whose head lives in another repository (a fork): its branch may carry a task's
 * name, but it is not Fleet's branch, so it never moves a task or starts a run.
 */
export function fromFork(pr: {
  head: { repo?: { full_name: string } | null };
  base: { repo: { full_name: string } };
}): boolean {
  return pr.head.repo?.full_name?.toLowerCase() !== pr.base.repo.full_name.toLowerCase();
}

/** What the matching reads of a pull request as GitHub sends it (see tasksOnPullRequest). */
export const prToMatch = (pr: {
  number: number;
  head: { ref: string };
  created_at?: string;
  body?: string | null;
}) => ({ number: pr.number, head: pr.head.ref, createdAt: pr.created_at, body: pr.body });

/** The task whose branch or PR this is: the live one, when an ended task worked on it too (see tasksOnPullRequest). */
export function taskForPullRequest(
  doc: FleetStateDoc,
  pr: { number: number; head: string; createdAt?: string; body?: string | null },
): Task | undefined {
  return tasksOnPullRequest(doc, pr)[0];
}
