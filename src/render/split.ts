// Markdown Fleet posts for a split (an epic planned into sub-issues); pure.

/** What the split's markdown shows of a plan: its tasks, each with a key, a title and what it waits for. */
export interface SplitPlanView {
  tasks: ReadonlyArray<{ key: string; title: string; dependsOn: readonly string[] }>;
}

/** A problem of a plan that could not be used, at a path inside it. */
export interface PlanProblemView {
  path: string;
  message: string;
}

export const splitPlanMarker = (epic: number): string => `<!-- fleet:split-plan ${epic} -->`;

/** The line a sub-issue carries, for people: it names the epic (the task records it too, as `epic`). */
export const partOfLine = (epic: number): string => `Part of #${epic} (split by Fleet).`;

export function renderSubIssueBody(
  body: string,
  epic: number,
  key: string,
  dependsOn: readonly number[],
): string {
  const lines = [body.trim(), "", "---", partOfLine(epic), `Plan key: \`${key}\``];
  for (const n of dependsOn) lines.push(`Depends on #${n}`);
  return lines.join("\n").trimStart();
}

export function renderSplitDone(
  epic: number,
  plan: SplitPlanView,
  issues: ReadonlyMap<string, number>,
): string {
  return [
    splitPlanMarker(epic),
    `### 🧩 Fleet split this issue into ${plan.tasks.length} sub-issue${plan.tasks.length === 1 ? "" : "s"}`,
    "",
    ...plan.tasks.map(
      (t) =>
        `- #${issues.get(t.key)} ${t.title}${t.dependsOn.length ? ` (after ${t.dependsOn.map((d) => `#${issues.get(d)}`).join(", ")})` : ""}`,
    ),
    "",
    renderPlanMermaid(plan, issues),
    "",
    "<sub>Each sub-issue is queued as a Fleet task and starts once the tasks it depends on are done. This issue closes when all of them are.</sub>",
  ].join("\n");
}

export function renderSplitRejected(epic: number, problems: readonly PlanProblemView[]): string {
  return [
    splitPlanMarker(epic),
    "### ⚠️ Fleet could not use the split plan",
    "",
    "Nothing was created. The plan the agent produced has these problems:",
    "",
    ...problems.map((p) => `- \`${p.path}\`: ${p.message}`),
    "",
    "Edit the issue to make the split clearer, then remove and re-add the `fleet:split` label to try again.",
  ].join("\n");
}

const mermaidLabel = (text: string): string => text.replace(/["\n\r]/g, " ").replace(/[<>]/g, "");
const nodeId = (index: number): string => `t${index}`;

/**
 * The task graph as a Mermaid flowchart; an edge points from a task to the task that waits for it.
 * `issues` (key -> issue number) adds the created issue to each node's label.
 */
export function renderPlanMermaid(plan: SplitPlanView, issues?: ReadonlyMap<string, number>): string {
  const index = new Map(plan.tasks.map((t, i) => [t.key, i]));
  const lines = ["```mermaid", "flowchart TD"];
  plan.tasks.forEach((t, i) => {
    const n = issues?.get(t.key);
    lines.push(`  ${nodeId(i)}["${n !== undefined ? `#${n} ` : ""}${mermaidLabel(t.title)}"]`);
  });
  plan.tasks.forEach((t, i) => {
    for (const d of t.dependsOn) {
      const from = index.get(d);
      if (from !== undefined) lines.push(`  ${nodeId(from)} --> ${nodeId(i)}`);
    }
  });
  lines.push("```");
  return lines.join("\n");
}
