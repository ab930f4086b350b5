import type { RunTotals } from "../core/usage.ts";
import { renderTokenTable } from "./token-report.ts";

/** The Actions job summary of a task's run: what happened and, when it used tokens, its token table. */
export function renderActionSummary(v: {
  taskId: string;
  message: string;
  /** A run's token figures (its table); absent for a run that was never claimed. */
  tokens?: { totals?: RunTotals; planTotals?: RunTotals };
}): string {
  const lines = [`### Fleet task \`${v.taskId}\``, "", v.message, ""];
  if (v.tokens) lines.push(renderTokenTable(v.tokens.totals, v.tokens.planTotals), "");
  return lines.join("\n");
}
