import { blockQuote, neutraliseMentions, plainAgentText } from "../core/published-text.ts";
import type { TaskState } from "../core/task.ts";
import { type TokenUsage, totalTokens } from "../core/usage.ts";
import { trackingMarker } from "./markers.ts";

export interface TrackingView {
  taskKey: string;
  taskId?: string;
  state: TaskState;
  coder: string;
  model: string;
  /** Shown when known (a worker reporting on its own may not know it). */
  priority?: number;
  /** Present while queued: "position 2 of 5, 3 of 3 slots busy". */
  queue?: { position: number; of: number; busy: number; cap: number };
  blockedBy?: number[];
  step?: string;
  reason?: string;
  runUrl?: string;
  /** The task's pull request (GitHub links `#N` within the repository). */
  pr?: number;
  tokens?: TokenUsage;
  costUsd?: number | null;
  resetsAt?: string;
  /** The repository's `sandbox` setting; `none` is shown on every tracking comment. */
  sandbox?: string;
  /** Who edited the issue after the task was queued without being allowed to drive Fleet (the edit is not used). */
  promptEditedBy?: string;
  /** Local mode: the next steps are `fleet` commands, and there are no `/fleet` comments to offer. */
  local?: boolean;
  /** Waiting: the agent's question to a person (its mentions are made inert here). */
  question?: string;
}

const STATE_ICON: Record<TaskState, string> = {
  queued: "⏳",
  blocked: "⛔",
  dispatched: "🚀",
  planning: "🧭",
  "awaiting-approval": "✋",
  running: "⚙️",
  "pr-open": "👀",
  waiting: "❓",
  done: "✅",
  failed: "❌",
  cancelled: "🚫",
  "rate-limited": "🧊",
};

export function describeState(v: TrackingView): string {
  switch (v.state) {
    case "queued":
      return v.queue
        ? `queued: position ${v.queue.position} of ${v.queue.of}, ${v.queue.busy} of ${v.queue.cap} slots busy`
        : "queued";
    case "blocked":
      return v.blockedBy?.length ? `blocked by ${v.blockedBy.map((n) => `#${n}`).join(", ")}` : "blocked";
    case "rate-limited":
      return v.resetsAt ? `rate-limited until ${v.resetsAt}` : "rate-limited";
    case "awaiting-approval":
      return v.local
        ? `awaiting approval: run \`fleet approve ${v.taskId ?? v.taskKey}\` to start the work`
        : "awaiting approval: comment `/fleet approve` to start the work";
    case "waiting":
      return v.local
        ? `waiting for an answer: run \`fleet answer ${v.taskId ?? v.taskKey} "<answer>"\``
        : "waiting for an answer: reply on this issue, or comment `/fleet answer <answer>`";
    default:
      return v.state;
  }
}

/**
 * What a run adds below the state in its task's tracking comment, each already rendered with its own
 * marker: the plan (renderPlanComment), the agent's checklist while it runs, then the run's report (token report, run report and the log's
 * tail, collapsed). The app renders the state; the worker running the task writes these.
 */
export interface TrackingSections {
  plan?: string;
  /** The agent's to-do list as the run goes (renderChecklist). */
  progress?: string;
  report?: string;
}

const SECTION_NAMES = ["plan", "progress", "report"] as const;
const sectionMarker = (name: (typeof SECTION_NAMES)[number]): string => `<!-- fleet:section ${name} -->`;
const SECTION_SPLIT = /\n*(?:---\n+)?<!-- fleet:section (plan|progress|report) -->\n/;
// Section text never opens a section of its own: a plan that quotes the marker cannot cut the comment.
const quoteSectionMarkers = (text: string): string =>
  text.replace(/<!-- fleet:section /g, "<!-- fleet:quoted ");

/** The sections of a tracking comment as posted (none for a comment that has none, or no comment). */
export function trackingSectionsOf(body: string | null | undefined): TrackingSections {
  if (!body) return {};
  const parts = body.split(SECTION_SPLIT);
  const out: TrackingSections = {};
  for (let i = 1; i + 1 < parts.length; i += 2) {
    const name = parts[i] as (typeof SECTION_NAMES)[number];
    out[name] = parts[i + 1]!.replace(/\s+$/, "");
  }
  return out;
}

/** The state part of a tracking comment as posted (everything above its sections). */
export function trackingHeaderOf(body: string): string {
  return body.split(SECTION_SPLIT)[0]!.replace(/\s+$/, "");
}

/** A tracking comment: the state (rendered from `v`, or a header as posted) and the run's sections below it. */
export function composeTrackingComment(header: string, sections: TrackingSections = {}): string {
  const parts = [header];
  for (const name of SECTION_NAMES) {
    const text = sections[name];
    if (text) parts.push(`---\n${sectionMarker(name)}\n${quoteSectionMarkers(text)}`);
  }
  return parts.join("\n\n");
}

/** The one comment per task that Fleet edits in place as the task moves (its state; see composeTrackingComment). */
export function renderTrackingComment(v: TrackingView): string {
  const lines = [
    trackingMarker(v.taskKey),
    `### ${STATE_ICON[v.state]} Fleet task${v.taskId ? ` \`${v.taskId}\`` : ""}: ${describeState(v)}`,
    "",
    "| | |",
    "|---|---|",
    `| Coder | \`${v.coder}\` |`,
    `| Model | \`${v.model}\` |`,
  ];
  if (v.priority !== undefined) lines.push(`| Priority | p${v.priority} |`);
  if (v.step) lines.push(`| Step | ${v.step} |`);
  if (v.runUrl) lines.push(`| Run | ${v.runUrl} |`);
  if (v.pr !== undefined) lines.push(`| Pull request | #${v.pr} |`);
  if (v.tokens) {
    const cost = v.costUsd == null ? "" : ` ($${v.costUsd.toFixed(4)})`;
    lines.push(`| Tokens | ${totalTokens(v.tokens).toLocaleString("en-US")}${cost} |`);
  }
  if (v.sandbox === "none")
    lines.push(`| Sandbox | **none**: the agent runs unconfined (\`sandbox: none\` in .github/fleet.yml) |`);
  // The agent's words: quoted, and every mention and reference in them inert.
  if (v.question && v.state === "waiting")
    lines.push(
      "",
      "**The agent asks:**",
      "",
      blockQuote(neutraliseMentions(plainAgentText(v.question), { untrusted: true })),
    );
  // Reasons and logins are repeated text: a mention in them names, it never pings.
  if (v.reason) lines.push("", blockQuote(neutraliseMentions(v.reason)));
  if (v.promptEditedBy) {
    lines.push(
      "",
      `> ✋ The description was edited by \`@${v.promptEditedBy}\` (no write access) after the task was queued; the agent gets the text as it was queued.`,
    );
  }
  // Local mode has no comments to read commands from: `fleet task <id>` and its siblings are the commands.
  if (!v.local)
    lines.push(
      "",
      "<sub>Commands: `/fleet status`, `/fleet cancel`, `/fleet retry`. Edited in place by Fleet.</sub>",
    );
  return lines.join("\n");
}
