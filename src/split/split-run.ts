import { parseFleetLabel } from "../core/labels.ts";

type LabelLike = string | { name?: string };

/**
 * Whether a task of `coder` on an issue with these labels is the split (planning) run: the
 * issue carries `fleet:split:<coder>` (or `fleet:split` and `coder` is the default coder) and no
 * `fleet:<coder>` label of its own asking for a normal run.
 */
export function isSplitRun(labels: readonly LabelLike[], coder: string, defaultCoder: string): boolean {
  let split = false;
  for (const l of labels) {
    const parsed = parseFleetLabel(typeof l === "string" ? l : (l.name ?? ""), [coder]);
    if (parsed.kind === "coder" && parsed.coder === coder) return false;
    if (parsed.kind === "split" && (parsed.coder ?? defaultCoder) === coder) split = true;
  }
  return split;
}

/** What the split run's agent is asked for, on top of the issue and Fleet's planning instructions. */
export function splitInstructions(knownCoders: readonly string[]): string {
  return [
    "## This is a SPLIT task",
    "",
    "Do not change anything. Read the issue and the code, then split the work into small tasks that can each become one pull request.",
    "End your plan (or your final answer) with the plan as a fenced ```json block of exactly this shape:",
    "```json",
    '{"tasks": [{"key": "db", "title": "Add the table", "body": "What to do and how to check it.", "coder": "claude", "priority": 2, "dependsOn": []},',
    '           {"key": "api", "title": "Expose it in the API", "body": "...", "dependsOn": ["db"]}]}',
    "```",
    `\`key\` is a short unique name; \`dependsOn\` lists keys of tasks that must be merged first (no cycles); \`coder\` (optional) is one of: ${knownCoders.join(", ")}; \`model\` (optional) a model id; \`priority\` 0 (most urgent) to 4, default 2.`,
  ].join("\n");
}
