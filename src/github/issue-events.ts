import type { GitHubClient, RepoRef } from "./client.ts";

export interface Labeler {
  login: string;
  type: string;
  at: string;
}

/** Who added `label` to the issue last, and when (from the issue's events); undefined when no one did. */
export async function lastLabeler(
  octokit: GitHubClient,
  repo: RepoRef,
  issue: number,
  label: string,
): Promise<Labeler | undefined> {
  const events = await octokit.paginate(octokit.rest.issues.listEvents, {
    ...repo,
    issue_number: issue,
    per_page: 100,
  });
  const wanted = label.toLowerCase();
  let last: Labeler | undefined;
  for (const e of events) {
    const name = (e as { label?: { name?: string } }).label?.name;
    if (e.event !== "labeled" || name?.toLowerCase() !== wanted || !e.actor) continue;
    last = { login: e.actor.login, type: e.actor.type ?? "User", at: e.created_at };
  }
  return last;
}
