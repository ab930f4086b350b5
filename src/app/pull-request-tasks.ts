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

/** The task whose branch or PR this is: the live one, when an ended task worked on it too (see tasksOnPullRequest). */
export function taskForPullRequest(
  doc: FleetStateDoc,
  pr: { number: number; head: string; createdAt?: string; body?: string | null },
): Task | undefined {
  return tasksOnPullRequest(doc, pr)[0];
}
