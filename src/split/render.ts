import type { PlanProblem, SplitPlan } from "./plan.ts";
import { renderPlanMermaid } from "./plan.ts";

// Markdown Fleet posts on an epic; pure.

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

export function renderSplitDone(epic: number, plan: SplitPlan, issues: ReadonlyMap<string, number>): string {
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

export function renderSplitRejected(epic: number, problems: readonly PlanProblem[]): string {
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
