import { plainAgentText } from "../core/published-text.ts";
import type { Task } from "../core/task.ts";
import type { RunTotals } from "../core/usage.ts";

/** What `fleet task <id>` shows: the task as a person needs it in a terminal. */
export interface TaskOverviewView {
  task: Task;
  /** Where the task lives: a repository name or a local path. */
  where: string;
  /** Local mode speaks local: `fleet approve <id>`, not `/fleet approve`. */
  local: boolean;
  /** The PR's address, when one is known. */
  prUrl?: string;
  /** The agent's plan (PLAN.md), when this machine has it. */
  plan?: string;
  /** The tracking comment's address (GitHub mode). */
  issueUrl?: string;
}

const n = (v: number) => v.toLocaleString("en-US");
const tokens = (t: RunTotals) =>
  `${n(t.usage.input + t.usage.cacheRead + t.usage.cacheWrite)} in, ${n(t.usage.output)} out` +
  (t.costUsd !== null ? `, $${t.costUsd.toFixed(2)}` : "");

/** The next thing a person can do with the task in this state. */
export function nextStep(v: Pick<TaskOverviewView, "task" | "local">): string {
  const { task, local } = v;
  const id = task.id;
  switch (task.state) {
    case "queued":
      return "It waits for a free slot; `fleet tasks` shows the queue.";
    case "blocked":
      return `It waits for ${task.dependsOn.map((d) => `#${d}`).join(", ") || "its dependencies"} to be done.`;
    case "dispatched":
    case "planning":
    case "running":
      return `An agent is on it: \`fleet task ${id} log -f\` follows it; \`fleet kill ${id}\` stops it.`;
    case "awaiting-approval":
      return local
        ? `Read the plan above, then \`fleet approve ${id}\` to start the work (or \`fleet kill ${id}\`).`
        : `Read the plan, then comment \`/fleet approve\` on the issue (or \`fleet approve ${id}\`).`;
    case "waiting":
      return local
        ? `Answer the agent's question above: \`fleet answer ${id} "<answer>"\` queues the task again (or \`fleet kill ${id}\`).`
        : `Answer the agent's question on issue #${task.issue} (a reply, or \`/fleet answer <answer>\`), or \`fleet answer ${id} "<answer>"\`.`;
    case "pr-open":
      return local
        ? `Review branch ${task.branch ?? "(its branch)"} in the repository, then \`fleet merge ${id}\`.`
        : `Review PR #${task.pr}: merge it on GitHub, or comment \`/fleet <instructions>\` on it for another round.`;
    case "failed":
    case "cancelled":
      return `\`fleet retry ${id}\` queues it again${task.state === "failed" ? `; \`fleet task ${id} log\` shows what happened` : ""}.`;
    case "rate-limited":
      return `It starts again after ${task.resetAt ?? "the provider's reset"}; \`fleet retry ${id}\` tries now.`;
    case "done":
      return "Nothing: the task is done.";
  }
}

/** The task, its plan, its runs and what to do next, as lines for a terminal. */
export function renderTaskOverview(v: TaskOverviewView): string {
  const { task } = v;
  const lines = [
    `${task.id}  ${task.state}${task.reason ? `: ${task.reason}` : ""}`,
    `  ${task.title}`,
    "",
    `  Repository  ${v.where}${v.local ? "" : ` #${task.issue}`}`,
    `  Coder       ${task.coder} (${task.model})`,
    `  Requested   ${task.requestedBy ? `by ${task.requestedBy}, ` : ""}${task.createdAt}`,
  ];
  if (task.pr !== undefined) lines.push(`  Pull request #${task.pr}${v.prUrl ? ` ${v.prUrl}` : ""}`);
  else if (task.branch) lines.push(`  Branch      ${task.branch}`);
  if (task.runUrl) lines.push(`  Run         ${task.runUrl}`);
  if (task.dependsOn.length) lines.push(`  Depends on  ${task.dependsOn.map((d) => `#${d}`).join(", ")}`);
  if (v.plan?.trim()) {
    const plan = v.plan.trim().split("\n");
    lines.push("", "Plan", ...plan.slice(0, 15).map((l) => `  ${l}`));
    if (plan.length > 15) lines.push(`  … ${plan.length - 15} more lines: fleet task ${task.id} plan`);
  }
  if (task.question) {
    const q = task.question;
    // The agent's words on a person's terminal: no control characters (escape sequences) get through.
    lines.push(
      "",
      `Question (asked ${q.askedAt})`,
      ...plainAgentText(q.text)
        .split("\n")
        .map((l) => `  ${l}`),
    );
    if (q.answer)
      lines.push(
        `Answer by ${q.answer.by} (${q.answer.at})`,
        ...q.answer.text.split("\n").map((l) => `  ${l}`),
      );
  }
  const runs = task.runs ?? [];
  if (runs.length) {
    lines.push("", "Runs");
    runs.forEach((r, i) => {
      lines.push(
        `  ${i + 1}. ${r.kind.padEnd(8)} ${r.at}  ${tokens(r.totals)}  ${r.totals.turns} turns  ${r.totals.model}`,
      );
    });
    if (task.totals && runs.length > 1) lines.push(`     total    ${tokens(task.totals)}`);
  }
  lines.push("", `Next: ${nextStep(v)}`);
  return lines.join("\n");
}
