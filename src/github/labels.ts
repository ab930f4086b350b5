import type { LabelDefinition } from "../core/labels.ts";
import type { GitHub, RepoRef } from "./port.ts";

/** Creates the Fleet labels that are missing; returns the names created. One list call, one create per missing label. */
export async function ensureFleetLabels(
  github: GitHub,
  ref: RepoRef,
  definitions: readonly LabelDefinition[],
): Promise<string[]> {
  const existing = await github.issues.listLabels(ref);
  const have = new Set(existing.map((l) => l.name.toLowerCase()));
  const created: string[] = [];
  for (const def of definitions) {
    if (have.has(def.name.toLowerCase())) continue;
    try {
      await github.issues.createLabel(ref, {
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
