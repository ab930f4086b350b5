import type { FleetConfig } from "../core/config.ts";
import { choosePromptText } from "../core/prompt-pin.ts";
import type { Task } from "../core/task.ts";
import { getRepoRole } from "../github/permissions.ts";
import type { GitHub, IssueComment, RepoRef } from "../github/port.ts";
import type { Tracker } from "../queue/tracker.ts";
import { hasMarker, trackingMarker } from "../render/markers.ts";
import { pinnedTextOf } from "../state/mirror.ts";
import { specialRunFor } from "./runs/kinds.ts";

/** What step 2 reads with: the repository's client, its config (for a special run's kind), the tracker to tell. */
export interface GatherInput {
  github: GitHub;
  repo: RepoRef;
  config: FleetConfig;
  tracker?: Tracker;
  log?: (message: string) => void;
}

/** What a run needs from GitHub: the approved text, the comments (trusted or not), and what kind of run it is. */
export interface Gathered {
  title: string;
  body: string;
  comments: Array<{ author: string; body: string; trusted: boolean }>;
  /** The issue's comments as listed: the final report finds its earlier comment here. */
  issueComments: IssueComment[];
  special: Awaited<ReturnType<typeof specialRunFor>>;
}

/**
 * Step 2: the issue's text as it was approved (pinned when queued), whatever was edited since; its
 * comments, collaborators' marked trusted (the prompt leaves the others out); what kind of run this is
 * (a split, a review round). The tracking comment's id is learnt on the way. A task whose approved
 * text is lost gets `missing` with the remedy.
 */
export async function gatherIssue(
  task: Task,
  beads: string,
  deps: GatherInput,
): Promise<Gathered | { missing: string }> {
  const issue = await deps.github.issues.get(deps.repo, task.issue);
  const prompt = choosePromptText({
    task,
    issue: { title: issue.title, body: issue.body ?? "" },
    bead: pinnedTextOf(beads, task.id),
  });
  if (prompt.source === "missing")
    return { missing: prompt.note ?? "The approved text of the issue is lost." };
  if (prompt.note) deps.log?.(`${task.id}: ${prompt.note}`);
  const issueComments = await deps.github.issues.listComments(deps.repo, task.issue);
  const tracking = issueComments.find(
    (c) => c.user?.type === "Bot" && hasMarker(c.body, trackingMarker(task.id)),
  );
  if (tracking) deps.tracker?.remember(task.id, tracking.id, tracking.body);
  const roles = new Map<string, boolean>();
  const trusted = async (login: string) => {
    if (!roles.has(login)) {
      const role = await getRepoRole(deps.github, deps.repo, login);
      roles.set(login, ["admin", "maintain", "write"].includes(role));
    }
    return roles.get(login)!;
  };
  const comments = [];
  for (const c of issueComments) {
    if (c.user?.type === "Bot") continue;
    const login = c.user?.login ?? "ghost";
    comments.push({ author: login, body: c.body ?? "", trusted: await trusted(login) });
  }
  const special = await specialRunFor(task, issue.labels ?? [], deps);
  return { title: prompt.title, body: prompt.body, comments, issueComments, special };
}
