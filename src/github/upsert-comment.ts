import { hasMarker } from "../render/markers.ts";
import type { GitHub, IssueRef } from "./port.ts";

export interface UpsertResult {
  id: number;
  created: boolean;
  url: string;
}

/**
 * Finds Fleet's comment carrying `marker` on the issue and edits it, or creates it. The marker
 * (not a stored id) is what makes a redelivered or repeated event edit rather than re-post.
 * `knownId` skips the listing when the caller already knows the comment; `null` says the caller knows
 * there is none (e.g. the marker names a task created a moment ago), so it is created at once.
 */
export async function upsertMarkedComment(
  github: GitHub,
  ref: IssueRef,
  marker: string,
  body: string,
  knownId?: number | null,
): Promise<UpsertResult> {
  const repo = { owner: ref.owner, repo: ref.repo };
  let id = knownId ?? undefined;
  if (knownId === undefined) {
    const comments = await github.issues.listComments(repo, ref.issue_number);
    // Only a bot's comment counts, so a person quoting the marker cannot redirect Fleet's edits.
    const existing = comments.find((c) => hasMarker(c.body, marker) && c.user?.type === "Bot");
    if (existing?.body === body) return { id: existing.id, created: false, url: existing.html_url };
    id = existing?.id;
  }
  if (id !== undefined) {
    const data = await github.issues.updateComment(repo, id, body);
    return { id: data.id, created: false, url: data.html_url };
  }
  const data = await github.issues.createComment(repo, ref.issue_number, body);
  return { id: data.id, created: true, url: data.html_url };
}
