import { neutraliseMentions } from "../core/published-text.ts";
import type { QueuePosition } from "../core/scheduler.ts";
import type { Task } from "../core/task.ts";
import { noticeMarker } from "./markers.ts";
import { describeState } from "./tracking-comment.ts";

export function renderStatus(tasks: readonly Task[], positions: ReadonlyMap<string, QueuePosition>): string {
  if (tasks.length === 0) {
    return "Fleet has no task for this issue. Add a `fleet:<coder>` label (e.g. `fleet:claude`) to start one.";
  }
  const rows = tasks.map((t) => {
    const state = describeState({
      taskKey: t.id,
      state: t.state,
      coder: t.coder,
      model: t.model,
      priority: t.priority,
      queue: positions.get(t.id),
      blockedBy: t.state === "blocked" ? t.dependsOn : undefined,
      resetsAt: t.resetAt,
    });
    return `| \`${t.id}\` | ${t.coder} | ${t.model} | ${state}${t.reason ? ` (${t.reason})` : ""} | ${t.attempts} | ${t.pr ? `#${t.pr}` : ""} |`;
  });
  return ["| Task | Coder | Model | State | Runs | PR |", "|---|---|---|---|---|---|", ...rows].join("\n");
}

/** A reply to a command; a mention in it (the text often repeats what the person wrote) names, never pings. */
export function renderCommandReply(kind: string, text: string): string {
  return [noticeMarker(`command-${kind}`), neutraliseMentions(text)].join("\n");
}
