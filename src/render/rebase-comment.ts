import type { RunTotals } from "../core/usage.ts";
import { totalTokens } from "../core/usage.ts";

const code = (s: string) => `\`${s.replace(/`/g, "'")}\``;
const fileList = (files: readonly string[]) => files.map((f) => `- ${code(f)}`).join("\n");

function tokensLine(totals: RunTotals | undefined): string[] {
  if (!totals) return [];
  const cost =
    totals.costUsd !== null && totals.costUsd !== undefined ? `, $${totals.costUsd.toFixed(4)}` : "";
  return [
    "",
    `<sub>Agent: ${totalTokens(totals.usage).toLocaleString("en-US")} tokens${cost} (${totals.model}).</sub>`,
  ];
}

export interface RebasedView {
  why: string;
  branch: string;
  base: string;
  baseSha: string;
  /** Files the agent resolved; empty for a rebase without conflicts. */
  resolved: readonly string[];
  totals?: RunTotals;
}

/** The PR comment after Fleet rebased the branch and force-pushed it. */
export function renderRebased(v: RebasedView): string {
  const lines = [
    "### 🔀 Fleet rebased this pull request",
    "",
    `${v.why}, so Fleet rebased ${code(v.branch)} onto ${code(v.base)} (${code(v.baseSha.slice(0, 7))}) and force-pushed it (with lease).`,
  ];
  if (v.resolved.length > 0) {
    lines.push(
      "",
      "The agent resolved the conflicts in:",
      "",
      fileList(v.resolved),
      "",
      "Review those files again before merging.",
    );
  } else {
    lines.push("", "The commits applied without conflicts.");
  }
  return [...lines, ...tokensLine(v.totals)].join("\n");
}

export interface RebaseFailedView {
  why: string;
  branch: string;
  base: string;
  /** Files that conflict with the base (may be empty when the failure came later, e.g. at the push). */
  conflicts: readonly string[];
  reason: string;
  totals?: RunTotals;
}

/** The PR comment when Fleet could not rebase: which files conflict and what to do. The branch is unchanged. */
export function renderRebaseFailed(v: RebaseFailedView): string {
  const lines = ["### ⚠️ Fleet could not rebase this pull request", ""];
  if (v.conflicts.length > 0) {
    lines.push(
      `${v.why}; ${code(v.branch)} now conflicts with ${code(v.base)} in these files:`,
      "",
      fileList(v.conflicts),
    );
  } else {
    lines.push(`${v.why}; Fleet tried to rebase ${code(v.branch)} onto ${code(v.base)}.`);
  }
  lines.push(
    "",
    v.reason,
    "",
    "The branch was left as it was. What to do:",
    "",
    `- resolve it yourself: ${code(`git fetch origin && git switch ${v.branch} && git rebase origin/${v.base}`)}, fix ${v.conflicts.length > 0 ? "the files above" : "the conflicts"}, ${code("git rebase --continue")}, then ${code(`git push --force-with-lease origin ${v.branch}`)};`,
    "- or comment `/fleet <instructions>` on this pull request to have the agent rework the change;",
    "- or add the `fleet:rebase` label to try again.",
  );
  return [...lines, ...tokensLine(v.totals)].join("\n");
}

/** The PR comment when a rebase asked for by hand found nothing to do. */
export function renderRebaseNotNeeded(v: { why: string; reason: string }): string {
  return ["### 🔀 Fleet did not need to rebase this pull request", "", `${v.why}: ${v.reason}`].join("\n");
}
