import type { Context } from "probot";
import { FLEET_COMMAND_HELP, parseFleetCommand } from "../core/commands.ts";
import { fleetLabelDefinitions } from "../core/labels.ts";
import { LIVE_STATES, RETRYABLE_STATES } from "../core/lifecycle.ts";
import { queuePosition } from "../core/scheduler.ts";
import { ensureFleetLabels } from "../github/labels.ts";
import { renderCommandReply, renderStatus } from "../render/command-replies.ts";
import { renderConfigRefused } from "../render/notices.ts";
import { allowedOrExplain, configOrExplain } from "./guard.ts";
import type { HandlerDeps } from "./handler-deps.ts";
import { answerRefusal, answerWaitingTask } from "./on-answer.ts";
import { requestAgentReview } from "./on-pr-review.ts";
import { requestReviewRun } from "./on-review.ts";

/** `issue_comment.created`: `/fleet status|cancel|retry|approve|answer|config set|labels|help` from a maintainer. */
export async function onCommand(context: Context<"issue_comment.created">, deps: HandlerDeps): Promise<void> {
  const { payload } = context;
  const onPullRequest = Boolean(payload.issue.pull_request);
  const command = parseFleetCommand(payload.comment.body, { onPullRequest });
  if (command.kind === "none") return;
  const reply = (text: string) =>
    deps.github.issues.createComment(
      context.repo(),
      payload.issue.number,
      renderCommandReply(command.kind, text),
    );

  // Who may drive Fleet comes first: anyone else gets one answer an hour, whatever they write.
  const config = await configOrExplain(context, deps);
  if (!config) return;
  const sender = payload.comment.user?.login ?? payload.sender.login;
  if (!(await allowedOrExplain(context, deps, config, sender))) return;
  if (command.kind === "error") {
    await reply(command.message);
    return;
  }
  if (command.kind === "help") {
    await reply(FLEET_COMMAND_HELP);
    return;
  }

  const queue = await deps.queues.forContext(context, config);
  const issue = payload.issue.number;
  switch (command.kind) {
    case "status": {
      const doc = await queue.snapshot();
      const all = Object.values(doc.tasks);
      const mine = all.filter((t) => t.issue === issue);
      const cap = queue.config(doc).max_concurrent;
      const positions = new Map(
        mine.flatMap((t) => {
          const p = queuePosition(all, t.id, { max_concurrent: cap });
          return p ? [[t.id, p] as const] : [];
        }),
      );
      await reply(renderStatus(mine, positions));
      return;
    }
    case "cancel": {
      const moved = await queue.move(issue, "cancelled", {
        reason: `cancelled by @${sender}${command.reason ? `: ${command.reason}` : ""}`,
        from: [...LIVE_STATES],
      });
      if (moved.length === 0) await reply("Nothing to cancel: this issue has no live Fleet task.");
      return;
    }
    case "retry": {
      const moved = await queue.move(issue, "queued", { from: [...RETRYABLE_STATES] });
      if (moved.length === 0)
        await reply("Nothing to retry: only a failed, cancelled or rate-limited task can be retried.");
      return;
    }
    case "approve": {
      const moved = await queue.move(issue, "queued", {
        from: ["awaiting-approval"],
        patch: { approved: true },
      });
      if (moved.length === 0)
        await reply("Nothing to approve: no task of this issue is waiting for plan approval.");
      return;
    }
    case "answer": {
      const refused = answerRefusal(
        await answerWaitingTask(queue, issue, {
          text: command.text,
          by: sender,
          ...(command.taskId ? { taskId: command.taskId } : {}),
        }),
      );
      if (refused) await reply(refused);
      return;
    }
    case "config-set": {
      const outcome = await queue.setConfig(command.assignments, sender);
      if (!outcome.ok) {
        await reply(renderConfigRefused(outcome.problems));
        return;
      }
      await reply(
        `Config updated by @${sender}: ${command.assignments.map((a) => `\`${a.key}=${a.value === null ? "none" : String(a.value)}\``).join(", ")}. ` +
          `Now ${outcome.config.max_concurrent} slots.`,
      );
      return;
    }
    case "labels": {
      const created = await ensureFleetLabels(
        deps.github,
        context.repo(),
        fleetLabelDefinitions(deps.knownCoders),
      );
      await reply(
        created.length
          ? `Created labels: ${created.map((l) => `\`${l}\``).join(", ")}.`
          : "All Fleet labels exist.",
      );
      return;
    }
    case "review":
      await requestAgentReview(context, deps, config, { pr: issue, ...command, sender });
      return;
    case "instructions":
      await requestReviewRun(context, deps, config, { pr: issue, text: command.text, sender });
      return;
  }
}
