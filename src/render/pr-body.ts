import type { RunTotals } from "../core/usage.ts";
import { GITHUB_COMMENT_LIMIT, truncateMiddle } from "./run-report.ts";
import { renderTokenTable } from "./token-report.ts";

export const prMarker = (taskId: string): string => `<!-- fleet:pr ${taskId} -->`;

export interface PrBodyView {
  taskId: string;
  issue: number;
  coder: string;
  model: string;
  summary?: string;
  testsRun?: string[];
  followUps?: string[];
  /** Why RESULT.json could not be used, when it could not. */
  resultProblem?: string;
  totals?: RunTotals;
  planTotals?: RunTotals;
}

export function renderPrBody(v: PrBodyView): string {
  const lines = [prMarker(v.taskId), `Closes #${v.issue}`, "", "## Summary", ""];
  lines.push(v.summary?.trim() || "_The agent left no summary._");
  if (v.resultProblem) lines.push("", `> ⚠️ ${v.resultProblem}`);
  lines.push("", "## Tests run", "");
  if (v.testsRun?.length) lines.push(...v.testsRun.map((t) => `- ${t}`));
  else lines.push("_The agent reported no tests._");
  if (v.followUps?.length) lines.push("", "## Follow-ups", "", ...v.followUps.map((f) => `- ${f}`));
  lines.push("", "## Tokens", "", renderTokenTable(v.totals, v.planTotals));
  lines.push(
    "",
    `<sub>Opened by Fleet for task \`${v.taskId}\` with \`${v.coder}\` (\`${v.model}\`). Review it like any other pull request; Fleet never merges.</sub>`,
  );
  return truncateMiddle(lines.join("\n"), GITHUB_COMMENT_LIMIT);
}
