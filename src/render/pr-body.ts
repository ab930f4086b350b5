import { followUpCapNote, followUpsToFile } from "../core/discovered.ts";
import { boundText, boundTitle } from "../core/published-text.ts";
import type { RunTotals } from "../core/usage.ts";
import { fence, GITHUB_COMMENT_LIMIT, truncateMiddle } from "./run-report.ts";
import { renderTokenTable } from "./token-report.ts";

export const prMarker = (taskId: string): string => `<!-- fleet:pr ${taskId} -->`;

/**
 * The task a pull request's body names in its first line (prMarker), as Fleet opened it; a marker
 * further down is text Fleet published, not its own.
 */
export function taskIdOfPrBody(body: string | null | undefined): string | undefined {
  return /^<!-- fleet:pr (\S+) -->/.exec((body ?? "").trimStart())?.[1];
}

export interface PrBodyView {
  taskId: string;
  issue: number;
  coder: string;
  model: string;
  summary?: string;
  testsRun?: string[];
  followUps?: string[];
  /** `max_follow_ups`: the body says how many follow-ups it left out of the issues Fleet files. */
  maxFollowUps?: number;
  /** Why RESULT.json could not be used, when it could not. */
  resultProblem?: string;
  totals?: RunTotals;
  planTotals?: RunTotals;
  /** Workflow files the agent changed, held back from the push (see allow_workflow_changes): their diff. */
  heldBack?: { paths: readonly string[]; patch: string };
  /** Local mode, where `fleet merge <id>` merges the branch: the footer says so. */
  local?: boolean;
}

/** The held-back workflow diff shown in the body (the rest: in the task's artifacts). */
const WORKFLOW_PATCH_MAX = 20_000;

// What the agent wrote (RESULT.json, already made inert when read) gets a share of the body each, so
// no part of it can push the rest, or the token table, out of GitHub's limit.
const SUMMARY_MAX = 20_000;
const LIST_ITEMS = { testsRun: 50, followUps: 30 };
const ITEM_MAX = { testsRun: 300, followUps: 500 };

/** A bounded list of the agent's items: the first ones, each on one line and cut, and how many more there are. */
function agentList(items: readonly string[], what: keyof typeof LIST_ITEMS, taskId: string): string[] {
  const shown = items.slice(0, LIST_ITEMS[what]).map((item) => `- ${boundTitle(item, ITEM_MAX[what])}`);
  const more = items.length - shown.length;
  return more > 0 ? [...shown, `- … and ${more} more (\`fleet task ${taskId} result\`).`] : shown;
}

/** Workflow changes Fleet did not push, and how a person applies them. */
function heldBackSection(h: NonNullable<PrBodyView["heldBack"]>): string[] {
  return [
    "## Workflow changes not pushed",
    "",
    `The agent also changed ${h.paths.map((p) => `\`${boundTitle(p, 200)}\``).join(", ")}. Fleet pushes no change to \`.github/workflows/\` (workflows run with the repository's secrets, and Fleet's app has no \`workflows\` permission), so they are not in this pull request. To apply them, review the diff below, save it as \`workflows.patch\` and run \`git apply workflows.patch\` on this branch.`,
    "",
    "<details>",
    "<summary>The workflow diff</summary>",
    "",
    fence(boundText(h.patch, WORKFLOW_PATCH_MAX, "The diff is cut here."), "diff"),
    "",
    "</details>",
  ];
}

/**
 * The body of a `draft_pr` pull request from its run's start until the run succeeds (renderPrBody then
 * replaces it): what it is and where its progress shows.
 */
export function renderDraftStartBody(v: {
  taskId: string;
  issue: number;
  coder: string;
  model: string;
}): string {
  return [
    prMarker(v.taskId),
    `Closes #${v.issue}`,
    "",
    `🚧 Fleet's agent (\`${v.coder}\`, \`${v.model}\`) is working on #${v.issue}. This draft holds no change yet; it gets the change and is marked ready for review when the run succeeds. The tracking comment on the issue shows the progress.`,
  ].join("\n");
}

export function renderPrBody(v: PrBodyView): string {
  const lines = [prMarker(v.taskId), `Closes #${v.issue}`, "", "## Summary", ""];
  const summary = v.summary?.trim();
  lines.push(
    summary
      ? boundText(summary, SUMMARY_MAX, `The whole summary: \`fleet task ${v.taskId} result\`.`)
      : "_The agent left no summary._",
  );
  if (v.resultProblem) lines.push("", `> ⚠️ ${v.resultProblem}`);
  lines.push("", "## Tests run", "");
  if (v.testsRun?.length) lines.push(...agentList(v.testsRun, "testsRun", v.taskId));
  else lines.push("_The agent reported no tests._");
  if (v.followUps?.length) {
    lines.push("", "## Follow-ups", "", ...agentList(v.followUps, "followUps", v.taskId));
    const note =
      v.maxFollowUps === undefined
        ? undefined
        : followUpCapNote(followUpsToFile(v.followUps, v.maxFollowUps), v.maxFollowUps);
    if (note) lines.push("", note);
  }
  if (v.heldBack) lines.push("", ...heldBackSection(v.heldBack));
  lines.push("", "## Tokens", "", renderTokenTable(v.totals, v.planTotals));
  const merging = v.local
    ? `Review it, then \`fleet merge ${v.taskId}\` merges it.`
    : "Review it like any other pull request; Fleet never merges.";
  lines.push(
    "",
    `<sub>Opened by Fleet for task \`${v.taskId}\` with \`${v.coder}\` (\`${v.model}\`). ${merging}</sub>`,
  );
  return truncateMiddle(lines.join("\n"), GITHUB_COMMENT_LIMIT);
}
