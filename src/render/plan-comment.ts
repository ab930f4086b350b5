import { neutraliseMentions } from "../core/published-text.ts";
import { GITHUB_COMMENT_LIMIT, truncateMiddle } from "./run-report.ts";

export const planMarker = (taskId: string): string => `<!-- fleet:plan ${taskId} -->`;

/** Plans longer than this (lines) are collapsed so the issue stays readable. */
const COLLAPSE_LINES = 25;

export interface PlanCommentView {
  taskId: string;
  plan: string;
  /** True when the worker stopped and waits for `/fleet approve`. */
  awaitingApproval: boolean;
  /** Local mode: approval is `fleet approve <id>`, not a comment. */
  local?: boolean;
}

export const AWAITING_APPROVAL_LINE = "✋ Work starts once a maintainer comments `/fleet approve`.";
/** The awaiting-approval line of local mode, where approval is a command, not a comment. */
export const localAwaitingApprovalLine = (taskId: string): string =>
  `✋ Work starts once you run \`fleet approve ${taskId}\`.`;
export const PLAN_POSTED_LINE =
  "<sub>Posted before work starts; the agent follows it unless the code says otherwise.</sub>";

/** The plan, as its section of the task's tracking comment (see composeTrackingComment). */
export function renderPlanComment(v: PlanCommentView): string {
  const head = [planMarker(v.taskId), `### 🧭 Fleet's plan for task \`${v.taskId}\``, ""];
  const awaiting = v.local ? localAwaitingApprovalLine(v.taskId) : AWAITING_APPROVAL_LINE;
  const tail = ["", v.awaitingApproval ? awaiting : PLAN_POSTED_LINE];
  const room = GITHUB_COMMENT_LIMIT - head.join("\n").length - tail.join("\n").length - 200;
  // The plan is the agent's text (PLAN.md or what it stated), published here and nowhere else.
  const text = neutraliseMentions(v.plan.trim(), { untrusted: true });
  const plan = truncateMiddle(text || "_The agent wrote no plan._", room);
  const lines = plan.split("\n").length;
  const shown =
    lines > COLLAPSE_LINES
      ? ["<details>", `<summary>Plan (${lines} lines)</summary>`, "", plan, "", "</details>"]
      : [plan];
  return [...head, ...shown, ...tail].join("\n");
}
