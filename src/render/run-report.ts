import { followUpCapNote, followUpsToFile } from "../core/discovered.ts";
import type { RefusedConnection } from "../core/network-policy.ts";
import { retryHint } from "../core/outcomes.ts";
import { blockQuote, neutraliseMentions } from "../core/published-text.ts";

/** GitHub rejects issue comments and PR bodies longer than this many characters. */
export const GITHUB_COMMENT_LIMIT = 65_536;

export const runReportMarker = (taskId: string): string => `<!-- fleet:run-report ${taskId} -->`;

/** A code fence longer than any backtick run in `text`, so the text cannot close it. */
export function fence(text: string, lang = ""): string {
  const longest = Math.max(0, ...[...text.matchAll(/`+/g)].map((m) => m[0].length));
  const ticks = "`".repeat(Math.max(3, longest + 1));
  return `${ticks}${lang}\n${text}\n${ticks}`;
}

/** Keeps the start and end of a text that is too long, with a note in between. */
export function truncateMiddle(text: string, max: number): string {
  if (text.length <= max) return text;
  const note = `\n\n… ${text.length - max} characters left out …\n\n`;
  const half = Math.max(0, Math.floor((max - note.length) / 2));
  return text.slice(0, half) + note + text.slice(text.length - half);
}

/** The last whole lines of `log` that fit in `max` characters, and how many lines were left out. */
export function logTail(
  log: string,
  max: number,
): { text: string; omittedLines: number; totalLines: number } {
  const lines = log.replace(/\n$/, "").split("\n");
  const kept: string[] = [];
  let size = 0;
  for (let i = lines.length - 1; i >= 0; i--) {
    let line = lines[i]!;
    if (size + line.length + 1 > max) {
      // A single huge line (a stream-json record) is cut rather than dropped when nothing fits yet.
      if (kept.length === 0) {
        line = `…${line.slice(line.length - (max - 2))}`;
        kept.unshift(line);
      }
      break;
    }
    kept.unshift(line);
    size += line.length + 1;
  }
  return { text: kept.join("\n"), omittedLines: lines.length - kept.length, totalLines: lines.length };
}

export type RunOutcomeKind =
  | "pr-opened"
  | "no-changes"
  | "split"
  | "awaiting-approval"
  | "waiting"
  | "failed"
  | "timeout"
  | "stall"
  | "cancelled"
  | "rate-limited";

export interface RunReportView {
  taskId: string;
  outcome: RunOutcomeKind;
  reason?: string;
  pr?: { number: number; url: string };
  /** The agent's own summary, from RESULT.json. */
  summary?: string;
  /** Why RESULT.json could not be used, when it could not. */
  resultProblem?: string;
  /** The agent's log (already redacted); only its tail is shown. */
  log?: string;
  resetsAt?: string;
  /** The agent's follow-ups and `max_follow_ups`: the report says how many were left out of the issues. */
  followUps?: { listed: readonly string[]; max: number };
  /** The run was a round on the task's open pull request (a review): it stays open whatever the run did. */
  onPullRequest?: boolean;
  /** The run's network: its mode, and every connection its egress proxy refused. */
  network?: { mode: "proxy" | "none" | "host"; refused: readonly RefusedConnection[] };
  /** Why the worker could not enforce the run's resource limits, when it could not. */
  limitsNotEnforced?: string;
  /** Characters this report may take (default: a whole comment); less when it shares a comment. */
  limit?: number;
  /** Local mode: next steps name `fleet` commands, not `/fleet` comments. */
  local?: boolean;
  /** A read-only review of a pull request (`/fleet review`, `review_on`): no change was ever expected. */
  prReview?: boolean;
}

const HEADLINE: Record<RunOutcomeKind, string> = {
  "pr-opened": "✅ opened a pull request",
  "no-changes": "ℹ️ finished without changes, so no pull request was opened",
  split: "🪓 planned the split: the plan's sub-issues are queued",
  "awaiting-approval": "✋ is waiting for approval of its plan",
  waiting: "❓ asked a question and waits for a person's answer",
  failed: "❌ failed",
  timeout: "⏱️ ran out of time and was stopped",
  stall: "💤 stalled (no output for too long) and was stopped",
  cancelled: "🚫 was cancelled",
  "rate-limited": "🧊 hit the model provider's rate limit",
};

/** What to do next, by outcome; `retry` is how a person runs the task again where they read this. */
const NEXT_STEP: Partial<Record<RunOutcomeKind, (retry: string) => string>> = {
  "no-changes": (retry) =>
    `If a change was expected, add detail to the issue (what to change, where) and ${retry}.`,
  failed: (retry) =>
    `Check the log below, fix the cause (issue text, configuration or credential) and ${retry}.`,
  timeout: (retry) =>
    `Split the issue into smaller tasks or raise \`timeouts.run\` in \`.github/fleet.yml\`, then ${retry}.`,
  stall: (retry) =>
    `The agent produced no output for too long: ${retry} to start it again; raise \`timeouts.stall\` if it needs to think longer.`,
  "rate-limited": () => "Fleet queues the task again once the limit resets.",
};

/** Refused hosts listed in a report (the rest are counted in a line). */
const MAX_REFUSED_ROWS = 20;

/**
 * How the run was contained where it matters to a reader: every host and port its egress proxy
 * refused (host names in code spans: an agent chose them), `network: host`, and limits not enforced.
 */
export function containmentLines(v: Pick<RunReportView, "network" | "limitsNotEnforced">): string[] {
  const lines: string[] = [];
  const refused = v.network?.refused ?? [];
  if (refused.length) {
    const total = refused.reduce((n, r) => n + r.count, 0);
    lines.push(
      `**Network:** Fleet's egress proxy refused ${total.toLocaleString("en-US")} connection${total === 1 ? "" : "s"}. To allow a host, add it to \`network.allow\` in .github/fleet.yml.`,
      "",
      "| host | port | times | why |",
      "|---|---:|---:|---|",
      ...refused
        .slice(0, MAX_REFUSED_ROWS)
        .map(
          (r) =>
            `| \`${r.host.replace(/`/g, "")}\` | ${r.port} | ${r.count.toLocaleString("en-US")} | ${r.why} |`,
        ),
    );
    if (refused.length > MAX_REFUSED_ROWS)
      lines.push("", `… and ${refused.length - MAX_REFUSED_ROWS} more hosts.`);
    lines.push("");
  }
  if (v.network?.mode === "host")
    lines.push(
      "**Network: host** — the agent reached whatever this worker reaches (`network: host` in .github/fleet.yml).",
      "",
    );
  if (v.limitsNotEnforced) lines.push(`**Limits:** ${v.limitsNotEnforced}.`, "");
  return lines;
}

/** The run report (a section of the tracking comment): how the run ended, what to do next, and the tail of the agent's log. */
export function renderRunReport(v: RunReportView): string {
  const round = v.onPullRequest && v.outcome === "no-changes";
  const reviewed = v.prReview && v.outcome === "no-changes";
  const headline = reviewed
    ? "🔎 posted its review of the pull request"
    : round
      ? "ℹ️ finished the round without changes; the pull request is as it was"
      : HEADLINE[v.outcome];
  const head: string[] = [runReportMarker(v.taskId), `### Fleet task \`${v.taskId}\` ${headline}`, ""];
  if (v.pr) head.push(`Pull request: #${v.pr.number} (${v.pr.url})`, "");
  // A reason may repeat what the agent said: a mention in it names, it never pings (as on the tracking comment).
  if (v.reason) head.push(blockQuote(neutraliseMentions(v.reason)), "");
  if (v.outcome === "rate-limited" && v.resetsAt) head.push(`The limit resets at ${v.resetsAt}.`, "");
  if (v.summary) head.push("**Agent's summary:**", "", v.summary.trim(), "");
  if (v.resultProblem) head.push(`⚠️ ${v.resultProblem}`, "");
  const capNote =
    v.followUps && followUpCapNote(followUpsToFile(v.followUps.listed, v.followUps.max), v.followUps.max);
  if (capNote) head.push(`ℹ️ ${capNote} They are kept with the run: \`fleet task ${v.taskId} result\`.`, "");
  const next = reviewed
    ? undefined
    : round && !v.local
      ? "If a change was expected, comment `/fleet <instructions>` on the pull request again, saying what to change and where."
      : v.outcome === "waiting"
        ? v.local
          ? `Answer it with \`fleet answer ${v.taskId} "<answer>"\`: the task is queued again and the agent goes on with the answer.`
          : "Someone with write access answers by replying on this issue (or `/fleet answer <answer>`): the task is queued again and the agent goes on with the answer."
        : NEXT_STEP[v.outcome]?.(retryHint(v.taskId, v.local));
  if (next) head.push(next, "");
  head.push(...containmentLines(v));
  let body = head.join("\n");
  const limit = v.limit ?? GITHUB_COMMENT_LIMIT;
  if (v.log !== undefined && v.log.length > 0) {
    const wrapper = 400;
    const room = limit - body.length - wrapper;
    if (room > 1000) {
      const tail = logTail(v.log, room);
      const note =
        tail.omittedLines > 0
          ? `Showing the last ${tail.totalLines - tail.omittedLines} of ${tail.totalLines} lines (GitHub comments hold at most ${GITHUB_COMMENT_LIMIT.toLocaleString("en-US")} characters). The full log: \`fleet task ${v.taskId} log\`.`
          : `The full log: \`fleet task ${v.taskId} log\`.`;
      body += [
        "<details>",
        "<summary>Agent log</summary>",
        "",
        note,
        "",
        fence(tail.text),
        "",
        "</details>",
      ].join("\n");
    }
  }
  return body.length > limit ? truncateMiddle(body, limit) : body;
}
