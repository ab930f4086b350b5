import type { GitHub, RepoRef } from "./port.ts";

export interface Labeler {
  login: string;
  type: string;
  at: string;
}

/** Who added `label` to the issue last, and when (from the issue's events); undefined when no one did. */
export async function lastLabeler(
  github: GitHub,
  repo: RepoRef,
  issue: number,
  label: string,
): Promise<Labeler | undefined> {
  const events = await github.issues.listEvents(repo, issue);
  const wanted = label.toLowerCase();
  let last: Labeler | undefined;
  for (const e of events) {
    if (e.event !== "labeled" || e.label?.name?.toLowerCase() !== wanted || !e.actor) continue;
    last = { login: e.actor.login, type: e.actor.type ?? "User", at: e.created_at };
  }
  return last;
}
