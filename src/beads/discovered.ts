import { carriesDiscoveredMarker } from "../core/discovered.ts";
import { externalRefFor, issueNumberOf } from "./fleet-meta.ts";
import { newBeadId } from "./ids.ts";
import { parseJsonl } from "./parse.ts";
import type { BeadDependency, BeadIssue } from "./record.ts";
import { rewriteJsonl } from "./rewrite.ts";

export const DISCOVERED_FROM = "discovered-from";

/**
 * The beads text with each discovered GitHub issue linked to the bead it was found from by a
 * `discovered-from` dependency. An issue that has a bead already (a queued task's) gets the edge
 * added; any other gets a new open bead. Links already there are left as they are, so this can run
 * again on the same input without changing anything.
 */
export function linkDiscoveredBeads(
  beads: string,
  fromBeadId: string,
  discovered: ReadonlyArray<{ issue: number; title: string; priority?: number }>,
  now: string,
): string {
  const byIssue = new Map<number, BeadIssue>();
  const ids = new Set<string>();
  for (const { issue } of parseJsonl(beads).records) {
    ids.add(issue.id);
    const n = issueNumberOf(issue);
    if (n !== undefined && issue.status !== "tombstone") byIssue.set(n, issue);
  }
  const upsert: BeadIssue[] = [];
  for (const d of discovered) {
    const existing = byIssue.get(d.issue);
    const id =
      existing?.id ??
      newBeadId(
        { title: d.title, creator: "fleet", createdAt: now, description: externalRefFor(d.issue) },
        {
          existing: ids,
        },
      );
    if (id === fromBeadId) continue;
    const edge: BeadDependency = {
      issue_id: id,
      depends_on_id: fromBeadId,
      type: DISCOVERED_FROM,
      created_at: now,
      created_by: "fleet",
    };
    if (existing) {
      const deps = existing.dependencies ?? [];
      if (deps.some((x) => x.type === DISCOVERED_FROM && x.depends_on_id === fromBeadId)) continue;
      upsert.push({ ...existing, dependencies: [...deps, edge], updated_at: now });
      continue;
    }
    ids.add(id);
    const bead: BeadIssue = {
      id,
      title: d.title,
      status: "open",
      priority: d.priority ?? 2,
      issue_type: "task",
      created_at: now,
      created_by: "fleet",
      updated_at: now,
      external_ref: externalRefFor(d.issue),
      dependencies: [edge],
    };
    upsert.push(bead);
    byIssue.set(d.issue, bead);
  }
  return upsert.length ? rewriteJsonl(beads, { upsert }) : beads;
}

/**
 * Whether the bead is a follow-up Fleet filed: it has a `discovered-from` link, or (queued before the
 * link was written) its pinned description carries Fleet's discovered marker. Fleet's state only:
 * nothing an agent writes decides it.
 */
export function isDiscoveredBead(beads: string, beadId: string): boolean {
  const bead = parseJsonl(beads).records.find((r) => r.issue.id === beadId)?.issue;
  if (!bead) return false;
  return (
    (bead.dependencies ?? []).some((d) => d.type === DISCOVERED_FROM) ||
    carriesDiscoveredMarker(bead.description)
  );
}
