import { type RunKind, type RunRecord, sumRuns } from "../core/run-history.ts";
import { combineTotals, type RunTotals } from "../core/usage.ts";

export const tokenReportMarker = (taskId: string): string => `<!-- fleet:token-report ${taskId} -->`;

const n = (v: number): string => v.toLocaleString("en-US");
const usd = (v: number | null): string => (v == null ? "not reported" : `$${v.toFixed(4)}`);

export function formatDuration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  return `${Math.floor(m / 60)}h ${m % 60}m`;
}

/** A markdown table of one or two phases' token figures (plan, work) and their sum. */
export function renderTokenTable(work: RunTotals | undefined, plan?: RunTotals): string {
  const phases: Array<[string, RunTotals]> = [];
  if (plan) phases.push(["Plan", plan]);
  if (work) phases.push(["Work", work]);
  if (phases.length === 0) return "_No token figures: the agent reported none._";
  const header = ["", ...phases.map(([name]) => name)];
  if (phases.length > 1) header.push("Total");
  const sum = (f: (t: RunTotals) => number): number => phases.reduce((acc, [, t]) => acc + f(t), 0);
  const costs = phases.map(([, t]) => t.costUsd);
  const totalCost = costs.every((c) => c == null) ? null : costs.reduce<number>((a, c) => a + (c ?? 0), 0);
  const row = (label: string, cell: (t: RunTotals) => string, total?: string): string => {
    const cells = [label, ...phases.map(([, t]) => cell(t))];
    if (phases.length > 1) cells.push(total ?? "");
    return `| ${cells.join(" | ")} |`;
  };
  const numRow = (label: string, f: (t: RunTotals) => number) => row(label, (t) => n(f(t)), n(sum(f)));
  return [
    `| ${header.join(" | ")} |`,
    `|${header.map((_, i) => (i === 0 ? "---" : "---:")).join("|")}|`,
    numRow("Input tokens", (t) => t.usage.input),
    numRow("Output tokens", (t) => t.usage.output),
    numRow("Cache read", (t) => t.usage.cacheRead),
    numRow("Cache write", (t) => t.usage.cacheWrite),
    row("Cost", (t) => usd(t.costUsd), usd(totalCost)),
    numRow("Turns", (t) => t.turns),
    row("Duration", (t) => formatDuration(t.durationMs), formatDuration(sum((t) => t.durationMs))),
    row("Model", (t) => `\`${t.model}\``),
    row("Credential", (t) => (t.credential ? `\`${t.credential}\`` : "—")),
  ].join("\n");
}

export interface TokenReportView {
  taskId: string;
  /** One line on how the run ended, e.g. "pull request #12 opened". */
  outcome: string;
  totals?: RunTotals;
  planTotals?: RunTotals;
  /** The task's earlier runs (a first run before a review round, retries): one row each, and a total. */
  earlierRuns?: readonly RunRecord[];
  /** What this run was for, for its row. */
  runKind?: RunKind;
  /**
   * The agent's own account of this run, when the figures above are the model gateway's (read from
   * the provider's responses): shown beside them, and flagged where the two disagree.
   */
  agentTotals?: RunTotals;
}

/** The final token report comment on the issue. */
export function renderTokenReport(v: TokenReportView): string {
  const out = [
    tokenReportMarker(v.taskId),
    `### 🧮 Fleet token report for task \`${v.taskId}\``,
    "",
    `Outcome: ${v.outcome}`,
    "",
    renderTokenTable(v.totals, v.planTotals),
  ];
  const current = combineTotals(v.planTotals, v.totals);
  if (v.earlierRuns?.length && current) {
    const runs = [...v.earlierRuns, { kind: v.runKind ?? "work", at: "", totals: current }];
    out.push("", "#### Every run of this task", "", renderRunsTable(runs));
  }
  const wire = v.agentTotals !== undefined;
  if (wire && current) out.push("", agentComparison(current, v.agentTotals!));
  out.push(
    "",
    wire
      ? "<sub>Figures are what Fleet's model gateway read from the provider's responses. Edited in place by Fleet on a rerun.</sub>"
      : "<sub>Figures are the agent's own final totals. Edited in place by Fleet on a rerun.</sub>",
  );
  return out.join("\n");
}

const FIELDS = [
  ["input", "input"],
  ["output", "output"],
  ["cacheRead", "cache read"],
  ["cacheWrite", "cache write"],
] as const;

/** The agent's own figures beside the gateway's: one line when they agree, the differences flagged when not. */
export function agentComparison(wire: RunTotals, agent: RunTotals): string {
  const differ = FIELDS.filter(([k]) => wire.usage[k] !== agent.usage[k]);
  if (differ.length === 0)
    return "The agent's own report agrees with the gateway's figures (input, output, cache read, cache write).";
  const cells = differ.map(([k, label]) => `${label} ${n(agent.usage[k])} (gateway: ${n(wire.usage[k])})`);
  return `⚠️ **The agent's own report disagrees with the gateway's figures:** ${cells.join(", ")}. The gateway's figures are the ones counted.`;
}

/** One row per run (the last one is the run this report is about) and a total across them. */
export function renderRunsTable(runs: readonly RunRecord[]): string {
  const cells = (t: RunTotals) => [
    n(t.usage.input),
    n(t.usage.output),
    n(t.usage.cacheRead),
    n(t.usage.cacheWrite),
    usd(t.costUsd),
    n(t.turns),
    formatDuration(t.durationMs),
  ];
  const total = sumRuns(runs);
  const lines = [
    "| Run | Input tokens | Output tokens | Cache read | Cache write | Cost | Turns | Duration |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
    ...runs.map(
      (r, i) =>
        `| ${i + 1}. ${r.kind}${i === runs.length - 1 ? " (this run)" : ""} | ${cells(r.totals).join(" | ")} |`,
    ),
  ];
  if (total)
    lines.push(
      `| **Total (${runs.length} runs)** | ${cells(total)
        .map((c) => `**${c}**`)
        .join(" | ")} |`,
    );
  return lines.join("\n");
}
