import type { LabelDefinition } from "../core/labels.ts";
import type { GitHubClient, RepoRef } from "./client.ts";

/** Creates the Fleet labels that are missing; returns the names created. One list call, one create per missing label. */
export async function ensureFleetLabels(
  octokit: GitHubClient,
  ref: RepoRef,
  definitions: readonly LabelDefinition[],
): Promise<string[]> {
  const existing = await octokit.paginate(octokit.rest.issues.listLabelsForRepo, { ...ref, per_page: 100 });
  const have = new Set(existing.map((l) => l.name.toLowerCase()));
  const created: string[] = [];
  for (const def of definitions) {
    if (have.has(def.name.toLowerCase())) continue;
    try {
      await octokit.rest.issues.createLabel({
        ...ref,
        name: def.name,
        color: def.color,
        description: def.description,
      });
      created.push(def.name);
    } catch (error) {
      // 422 "already_exists": another replica created it meanwhile.
      if ((error as { status?: number }).status !== 422) throw error;
    }
  }
  return created;
}
