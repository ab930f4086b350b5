import { ACTIVE_STATES, isTerminal } from "../core/lifecycle.ts";
import { queuePosition } from "../core/scheduler.ts";
import type { Task } from "../core/task.ts";
import { type TokenUsage, totalTokens } from "../core/usage.ts";
import { type CredentialWindowsRow, renderCredentialWindowsTable } from "./credential-windows.ts";

/** Hidden marker of the repository's one dashboard issue: how Fleet finds it again. */
export const DASHBOARD_MARKER = "<!-- fleet:dashboard -->";
export const DASHBOARD_TITLE = "Fleet dashboard";

/** One coder's credential (its name, never its value), until when it is cooling, and its rate-limit windows. */
export type DashboardCredential = CredentialWindowsRow;

export interface DashboardView {
  repo: string;
  /** RFC3339: when this view was taken. */
  now: string;
  maxConcurrent: number;
  tasks: readonly Task[];
  credentials: readonly DashboardCredential[];
  /** The token ledger: `ledger[day][coder]`. */
  ledger: Readonly<
    Record<string, Readonly<Record<string, { runs: number; usage: TokenUsage; costUsd: number }>>>
  >;
  /** Days of the ledger shown, newest first. */
  days?: number;
}

const n = (v: number): string => v.toLocaleString("en-US");
const usd = (v: number | null | undefined): string => (v == null ? "—" : `$${v.toFixed(2)}`);
const cell = (s: string): string => s.replace(/\|/g, "\\|").replace(/\r?\n/g, " ");
const future = (at: string | undefined, now: string): at is string =>
  at !== undefined && Date.parse(at) > Date.parse(now);

/** `#12 Title` for a table cell. */
const issueCell = (t: Task) => `#${t.issue} ${cell(t.title.slice(0, 60))}`;

function runningSection(v: DashboardView): string[] {
  const running = v.tasks
    .filter((t) => ACTIVE_STATES.has(t.state))
    .sort((a, b) => (a.lease?.slot ?? 0) - (b.lease?.slot ?? 0) || a.id.localeCompare(b.id));
  const byCoder = new Map<string, number>();
  for (const t of running) byCoder.set(t.coder, (byCoder.get(t.coder) ?? 0) + 1);
  const perCoder = [...byCoder].map(([c, k]) => `${c} ${k}`).join(", ");
  const lines = [
    `## Running (${running.length} of ${v.maxConcurrent} slots busy${perCoder ? `: ${perCoder}` : ""})`,
    "",
  ];
  if (running.length === 0) return [...lines, "_Nothing is running._"];
  lines.push("| Slot | Issue | Task | Coder | State | Tokens |", "|---:|---|---|---|---|---:|");
  for (const t of running) {
    const tokens = t.totals ? n(totalTokens(t.totals.usage)) : "—";
    lines.push(
      `| ${t.lease?.slot ?? "—"} | ${issueCell(t)} | \`${t.id}\` | \`${cell(`${t.coder}:${t.model}`)}\` | ${t.state} | ${tokens} |`,
    );
  }
  return lines;
}

function waitingSection(v: DashboardView): string[] {
  const cap = { max_concurrent: v.maxConcurrent };
  const waiting = v.tasks.filter(
    (t) => t.state === "queued" || t.state === "blocked" || t.state === "rate-limited",
  );
  const rank = (t: Task) => (t.state === "queued" ? (queuePosition(v.tasks, t.id, cap)?.position ?? 0) : 1e9);
  waiting.sort((a, b) => rank(a) - rank(b) || a.issue - b.issue || a.id.localeCompare(b.id));
  const lines = [`## Queued (${waiting.length})`, ""];
  if (waiting.length === 0) return [...lines, "_The queue is empty._"];
  lines.push("| # | Issue | Task | Coder | Priority | Waiting for |", "|---:|---|---|---|---|---|");
  for (const t of waiting) {
    let why: string;
    if (t.state === "blocked") why = `blocked by ${t.dependsOn.map((d) => `#${d}`).join(", ")}`;
    else if (t.state === "rate-limited") why = t.resetAt ? `rate limit, resets ${t.resetAt}` : "rate limit";
    else if (future(t.resetAt, v.now)) why = `retry after ${t.resetAt}`;
    else why = t.reason ?? "a free slot";
    const pos = t.state === "queued" ? String(rank(t)) : "—";
    lines.push(
      `| ${pos} | ${issueCell(t)} | \`${t.id}\` | \`${cell(`${t.coder}:${t.model}`)}\` | p${t.priority} | ${cell(why)} |`,
    );
  }
  return lines;
}

function credentialsSection(v: DashboardView): string[] {
  const lines = ["## Credentials", ""];
  if (v.credentials.length === 0) return [...lines, "_No credential pools configured._"];
  return [...lines, ...renderCredentialWindowsTable(v.credentials, new Date(v.now))];
}

function spendSection(v: DashboardView): string[] {
  const days = Object.keys(v.ledger)
    .sort()
    .reverse()
    .slice(0, v.days ?? 7);
  const lines = ["## Tokens and cost", "", "By day and coder (UTC):", ""];
  if (days.length === 0) lines.push("_No run has been recorded yet._");
  else {
    lines.push("| Day | Coder | Runs | Tokens | Cost |", "|---|---|---:|---:|---:|");
    for (const day of days) {
      for (const [coder, e] of Object.entries(v.ledger[day]!).sort(([a], [b]) => a.localeCompare(b))) {
        lines.push(
          `| ${day} | ${cell(coder)} | ${n(e.runs)} | ${n(totalTokens(e.usage))} | ${usd(e.costUsd)} |`,
        );
      }
    }
  }
  const byModel = new Map<string, { tasks: number; tokens: number; cost: number | null }>();
  for (const t of v.tasks) {
    if (!t.totals) continue;
    const key = `${t.coder}:${t.model}`;
    const acc = byModel.get(key) ?? { tasks: 0, tokens: 0, cost: null };
    acc.tasks++;
    acc.tokens += totalTokens(t.totals.usage);
    if (t.totals.costUsd != null) acc.cost = (acc.cost ?? 0) + t.totals.costUsd;
    byModel.set(key, acc);
  }
  lines.push("", "By coder and model (tasks Fleet still tracks):", "");
  if (byModel.size === 0) lines.push("_No task has token figures yet._");
  else {
    lines.push("| Coder:model | Tasks | Tokens | Cost |", "|---|---:|---:|---:|");
    for (const [key, a] of [...byModel].sort(([x], [y]) => x.localeCompare(y))) {
      lines.push(`| \`${cell(key)}\` | ${a.tasks} | ${n(a.tokens)} | ${usd(a.cost)} |`);
    }
  }
  return lines;
}

/** A Mermaid label: no quotes, brackets or pipes that would end it. */
const mermaidText = (s: string) =>
  s
    .replace(/["[\]{}|<>`#]/g, " ")
    .replace(/\s+/g, " ")
    .trim()
    .slice(0, 50);

/** The live tasks and what they wait for, as a Mermaid graph (edges point from a dependency to its dependent). */
export function dependencyMermaid(tasks: readonly Task[]): string | undefined {
  const live = tasks.filter((t) => !isTerminal(t.state));
  const edges: string[] = [];
  const nodes = new Map<number, string>();
  const stateOf = new Map<number, string>();
  for (const t of tasks) {
    // The issue's latest task names its node.
    if (!nodes.has(t.issue) || !isTerminal(t.state)) {
      nodes.set(t.issue, `#${t.issue} ${mermaidText(t.title)}`);
      stateOf.set(t.issue, t.state);
    }
  }
  const used = new Set<number>();
  for (const t of live) {
    for (const d of t.dependsOn) {
      edges.push(`  i${d} --> i${t.issue}`);
      used.add(d);
      used.add(t.issue);
    }
  }
  if (edges.length === 0) return undefined;
  const lines = ["```mermaid", "graph TD"];
  for (const issue of [...used].sort((a, b) => a - b)) {
    const label = nodes.get(issue) ?? `#${issue}`;
    const state = stateOf.get(issue);
    lines.push(`  i${issue}["${label}${state ? ` (${state})` : ""}"]`);
  }
  lines.push(...[...new Set(edges)], "```");
  return lines.join("\n");
}

/** The dashboard issue's body: running and queued tasks, slots, credentials, spend, dependencies. */
export function renderDashboard(v: DashboardView): string {
  const graph = dependencyMermaid(v.tasks);
  return [
    DASHBOARD_MARKER,
    `# ${DASHBOARD_TITLE} for ${v.repo}`,
    "",
    `<sub>Kept current by Fleet; last updated ${v.now}. Edits to this issue are overwritten.</sub>`,
    "",
    ...runningSection(v),
    "",
    ...waitingSection(v),
    "",
    ...credentialsSection(v),
    "",
    ...spendSection(v),
    "",
    "## Dependencies",
    "",
    graph ?? "_No task waits for another._",
    "",
  ].join("\n");
}

/** The body without its update time: two bodies that differ only in time need no edit. */
export const dashboardContent = (body: string): string => body.replace(/last updated \S+/, "");
