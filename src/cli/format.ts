import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { getAdapter } from "../agents/index.ts";
import { contextPercent, formatTokens as formatContextTokens } from "../core/context-windows.ts";
import { isActive } from "../core/lifecycle.ts";
import type { Task, TaskContext } from "../core/task.ts";
import { addUsage, emptyUsage, type TokenUsage, totalTokens } from "../core/usage.ts";
import { LOG_FILE, taskArtifactsDir } from "../worker/workspace/artifacts.ts";

/** A plain text table: columns padded to their widest cell. */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  return [line(headers), ...rows.map(line)].join("\n");
}

export function formatDuration(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms) || ms < 0) return "-";
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(s % 60).padStart(2, "0")}s`;
  const h = Math.floor(m / 60);
  return `${h}h${String(m % 60).padStart(2, "0")}m`;
}

export function formatTokens(n: number | undefined): string {
  if (n === undefined) return "-";
  if (n < 10_000) return String(n);
  if (n < 1_000_000) return `${(n / 1000).toFixed(1)}k`;
  return `${(n / 1_000_000).toFixed(2)}M`;
}

export const formatCost = (usd: number | null | undefined): string =>
  usd === undefined || usd === null ? "-" : `$${usd.toFixed(usd < 1 ? 4 : 2)}`;

/**
 * Tokens of a run still going, from its log on this machine: the agent's own usage lines, read
 * with its adapter (a message's usage repeated on several lines counts once).
 */
export async function liveUsage(workDir: string, task: Task): Promise<TokenUsage | undefined> {
  const adapter = getAdapter(task.coder);
  if (!adapter) return undefined;
  let text: string;
  try {
    text = await readFile(join(taskArtifactsDir(workDir, task.id), LOG_FILE), "utf8");
  } catch {
    return undefined;
  }
  let usage = emptyUsage();
  const byMessage = new Map<string, Partial<TokenUsage>>();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("[stderr]")) continue;
    for (const e of adapter.parseLine(line)) {
      if (e.type !== "usage") continue;
      if (e.id) byMessage.set(e.id, e.usage);
      else usage = addUsage(usage, e.usage);
    }
  }
  return [...byMessage.values()].reduce<TokenUsage>((a, u) => addUsage(a, u), usage);
}

export interface TaskRow {
  id: string;
  issue: number;
  /** "owner/name" on GitHub, `local/<folder name>` in local mode. */
  repo: string;
  /** Local mode: the git repository the task runs in (absent for a task queued before it was recorded). */
  repository?: { path: string; remote?: string };
  title: string;
  coder: string;
  model: string;
  state: string;
  priority: number;
  elapsedMs?: number;
  tokens?: TokenUsage & { total: number };
  /** True when the figures come from a run still going (its log), not the agent's final report. */
  live: boolean;
  costUsd: number | null;
  pr?: number;
  reason?: string;
  /** A running task's context at its last model turn (see core/context-windows.ts). */
  context?: TaskContext & { percent: number };
}

/** What `fleet tasks` shows for one task at `now`. */
export async function taskRow(
  task: Task,
  now: number,
  workDir: string,
  repository?: { path: string; remote?: string },
): Promise<TaskRow> {
  let elapsedMs: number | undefined;
  if (isActive(task.state)) elapsedMs = now - Date.parse(task.lease?.acquiredAt ?? task.updatedAt);
  else if (task.state === "queued" || task.state === "blocked" || task.state === "rate-limited")
    elapsedMs = now - Date.parse(task.queuedAt);
  else elapsedMs = task.totals?.durationMs;
  let usage = task.totals?.usage;
  let live = false;
  // Live only while an agent runs: a dispatched task's log, or an expired lease's, is an earlier run's.
  const agentRuns =
    (task.state === "planning" || task.state === "running") &&
    task.lease !== undefined &&
    Date.parse(task.lease.expiresAt) > now;
  if (agentRuns) {
    const fromLog = await liveUsage(workDir, task);
    if (fromLog && totalTokens(fromLog) > 0) {
      usage = fromLog;
      live = true;
    }
  }
  const row: TaskRow = {
    id: task.id,
    issue: task.issue,
    repo: task.repo,
    ...(repository ? { repository } : {}),
    title: task.title,
    coder: task.coder,
    model: task.model,
    state: task.state,
    priority: task.priority,
    live,
    costUsd: live ? null : (task.totals?.costUsd ?? null),
  };
  if (elapsedMs !== undefined) row.elapsedMs = elapsedMs;
  if (usage) row.tokens = { ...usage, total: totalTokens(usage) };
  if (task.pr !== undefined) row.pr = task.pr;
  if (task.reason) row.reason = task.reason;
  if (task.context && isActive(task.state))
    row.context = { ...task.context, percent: contextPercent(task.context) };
  return row;
}

/** A path for a table: the home folder as `~`. */
export function shortPath(path: string, home = process.env.HOME): string {
  return home && (path === home || path.startsWith(`${home}/`)) ? `~${path.slice(home.length)}` : path;
}

/** The tasks as a table; `withRepository` adds the REPOSITORY column (local mode: one queue, many repositories). */
export function renderTaskTable(rows: TaskRow[], withRepository = false): string {
  if (rows.length === 0) return "No tasks.";
  const repoCell = (r: TaskRow) => (r.repository ? shortPath(r.repository.path) : `${r.repo} (not recorded)`);
  const headers = [
    "ID",
    "ISSUE",
    "CODER",
    "MODEL",
    "STATE",
    "P",
    "ELAPSED",
    "IN",
    "OUT",
    "CACHE R/W",
    "COST",
    "CONTEXT",
  ];
  return table(
    [...headers.slice(0, 2), ...(withRepository ? ["REPOSITORY"] : []), ...headers.slice(2), "TITLE"],
    rows.map((r) => [
      r.id,
      `#${r.issue}`,
      ...(withRepository ? [repoCell(r)] : []),
      r.coder,
      r.model,
      r.pr !== undefined ? `${r.state} (PR #${r.pr})` : r.state,
      `p${r.priority}`,
      formatDuration(r.elapsedMs),
      `${formatTokens(r.tokens?.input)}${r.live ? "*" : ""}`,
      formatTokens(r.tokens?.output),
      r.tokens ? `${formatTokens(r.tokens.cacheRead)}/${formatTokens(r.tokens.cacheWrite)}` : "-",
      formatCost(r.costUsd),
      r.context ? `${r.context.percent}% of ${formatContextTokens(r.context.window)}` : "-",
      r.title.length > 50 ? `${r.title.slice(0, 49)}…` : r.title,
    ]),
  );
}
