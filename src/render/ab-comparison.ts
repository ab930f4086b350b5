import type { Task, TaskResultSummary } from "../core/task.ts";
import { totalTokens } from "../core/usage.ts";
import { formatDuration } from "./token-report.ts";

/** Hidden marker of an issue's one A/B comparison comment (edited in place when a side runs again). */
export const abComparisonMarker = (issue: number): string => `<!-- fleet:ab-comparison ${issue} -->`;

/** One side of an A/B run as the comparison shows it. */
export interface AbSide {
  taskId: string;
  coder: string;
  model: string;
  state: string;
  pr?: { number: number; url?: string };
  totals?: Task["totals"];
  /** The PR's diff, when there is a PR. */
  diff?: { files: number; additions: number; deletions: number };
  result?: TaskResultSummary;
}

const n = (v: number): string => v.toLocaleString("en-US");
const cell = (s: string): string => s.replace(/\|/g, "\\|").replace(/\n/g, " ");

/**
 * The tasks of an issue that form an A/B run: the latest task of each coder/model, when there are
 * at least two different ones. Empty for an ordinary issue.
 */
export function abSides(tasks: readonly Task[], issue: number): Task[] {
  const latest = new Map<string, Task>();
  for (const t of tasks) {
    if (t.issue !== issue) continue;
    const key = `${t.coder}\u0000${t.model}`;
    const prior = latest.get(key);
    if (!prior || t.createdAt > prior.createdAt || (t.createdAt === prior.createdAt && t.id > prior.id))
      latest.set(key, t);
  }
  if (latest.size < 2) return [];
  // Sides queued together (one `fleet bd create --ab`) share createdAt: the stable sort keeps the
  // order they were queued in, which is the state document's (its task ids are random).
  return [...latest.values()].sort((a, b) => a.createdAt.localeCompare(b.createdAt));
}

const RECORDED = new Set(["pr-open", "done"]);
const ENDED = new Set(["failed", "cancelled"]);

/**
 * Every side has finished its run: failed or cancelled, or a PR / no changes with the worker's record
 * of this attempt (a PR's webhook can move a task to pr-open before its worker records the figures).
 */
export const abFinished = (sides: readonly Task[]): boolean =>
  sides.length >= 2 &&
  sides.every((t) => ENDED.has(t.state) || (RECORDED.has(t.state) && t.result?.attempt === t.attempts));

/**
 * What identifies one round of an A/B run: each side's task and attempt. The comparison is posted
 * once per round; a side run again makes a new round, and the comment is edited in place.
 */
export const abRoundKey = (sides: readonly Task[]): string =>
  sides.map((t) => `${t.id}#${t.attempts}`).join(",");

/** The comparison comment: one column per side, figures from the task's totals, the PR and RESULT.json. */
export function renderAbComparison(issue: number, sides: readonly AbSide[]): string {
  const header = ["", ...sides.map((s) => cell(`\`${s.coder}:${s.model}\``))];
  const row = (label: string, f: (s: AbSide) => string) =>
    `| ${[label, ...sides.map(f)].map(cell).join(" | ")} |`;
  const dash = "—";
  const lines = [
    abComparisonMarker(issue),
    `### ⚖️ Fleet A/B comparison for #${issue}`,
    "",
    `| ${header.join(" | ")} |`,
    `|---|${sides.map(() => "---:").join("|")}|`,
    row("Task", (s) => `\`${s.taskId}\``),
    // A side that changed nothing says so: it failed for want of a change, not for an error.
    row("Outcome", (s) => (s.result?.noChanges ? `no changes (${s.state})` : s.state)),
    row("Pull request", (s) => (s.pr ? `#${s.pr.number}` : dash)),
    row("Tokens", (s) => (s.totals ? n(totalTokens(s.totals.usage)) : dash)),
    row("Input / output", (s) =>
      s.totals ? `${n(s.totals.usage.input)} / ${n(s.totals.usage.output)}` : dash,
    ),
    row("Cost", (s) =>
      s.totals ? (s.totals.costUsd == null ? "not reported" : `$${s.totals.costUsd.toFixed(4)}`) : dash,
    ),
    row("Duration", (s) => (s.totals ? formatDuration(s.totals.durationMs) : dash)),
    row("Turns", (s) => (s.totals ? n(s.totals.turns) : dash)),
    row("Diff", (s) =>
      s.diff ? `${n(s.diff.files)} files, +${n(s.diff.additions)} −${n(s.diff.deletions)}` : dash,
    ),
    row("Tests passed / run", (s) =>
      s.result?.testsRun !== undefined ? `${s.result.testsPassed ?? 0} / ${s.result.testsRun}` : dash,
    ),
    row("Agent's verdict", (s) => s.result?.status ?? "no RESULT.json"),
  ];
  const cheapest = cheapestSide(sides);
  if (cheapest) lines.push("", `Cheapest: \`${cheapest.coder}:${cheapest.model}\` (${cheapest.taskId}).`);
  lines.push(
    "",
    "<sub>Figures are each agent's own totals; tests are the lines of RESULT.json's `testsRun` that say they passed. Edited in place by Fleet when a side runs again.</sub>",
  );
  return lines.join("\n");
}

/** The side with a PR and the lowest cost, when every side with a PR reported its cost. */
function cheapestSide(sides: readonly AbSide[]): AbSide | undefined {
  const priced = sides.filter((s) => s.pr && s.totals);
  if (priced.length < 2 || priced.some((s) => s.totals!.costUsd == null)) return undefined;
  return priced.reduce((a, b) => (b.totals!.costUsd! < a.totals!.costUsd! ? b : a));
}
