import { canTransition, RETRYABLE_STATES } from "../../core/lifecycle.ts";
import type { TaskState } from "../../core/task.ts";
import { parse, TARGET_HELP, TARGET_OPTIONS, taskRefArgument } from "../args.ts";
import { CliError } from "../errors.ts";
import { json, out } from "../io.ts";
import { describeTarget, resolveTarget } from "../target.ts";
import { findTaskRef } from "../task-ref.ts";

const usage = (verb: string, what: string) => `Usage: fleet ${verb} <id> [--reason R] [--json]

${what}
<id> is a task id (fl-a3f) or an issue (#12: its latest task).
With dispatch: actions on GitHub the command goes through the Fleet app (a /fleet ${verb === "kill" ? "cancel" : "retry"}
comment on the issue), which also stops or starts the Actions run.

${TARGET_HELP}`;

export const KILL_USAGE = usage(
  "kill",
  "Cancels the task: a running agent is stopped (its process tree) and its slot freed.",
);
export const RETRY_USAGE = usage(
  "retry",
  "Queues a failed, cancelled or rate-limited task again. A task whose plan was approved keeps it: the\nretry runs the work phase with that plan (no new plan phase).",
);

const OPTIONS = { ...TARGET_OPTIONS, reason: { type: "string" } } as const;

/** `fleet kill` (to cancelled) and `fleet retry` (to queued), through the repository queue. */
export async function moveCommand(verb: "kill" | "retry", argv: string[]): Promise<number> {
  const text = verb === "kill" ? KILL_USAGE : RETRY_USAGE;
  const { values, positionals } = parse(argv, OPTIONS, text);
  const ref = taskRefArgument(positionals, `fleet ${verb}`, text);
  const target = await resolveTarget(values);
  const where = describeTarget(target);
  const { doc } = await target.store.read();
  const task = findTaskRef(doc, ref, where);
  const to: TaskState = verb === "kill" ? "cancelled" : "queued";
  if (verb === "retry" && task.state === "awaiting-approval")
    throw new CliError(
      `Task ${task.id} (#${task.issue}) waits for its plan to be approved: \`fleet approve ${task.id}\` runs it with this plan (\`fleet task ${task.id} plan\` shows it). To plan again, \`fleet kill ${task.id}\` then \`fleet retry ${task.id}\`.`,
    );
  if (verb === "retry" && task.state === "waiting")
    throw new CliError(
      `Task ${task.id} (#${task.issue}) waits for an answer to its agent's question (\`fleet task ${task.id}\` shows it): \`fleet answer ${task.id} "<answer>"\` goes on with it.`,
    );
  if (verb === "kill" ? !canTransition(task.state, to) : !RETRYABLE_STATES.includes(task.state)) {
    throw new CliError(
      verb === "kill"
        ? `Task ${task.id} (#${task.issue}) is ${task.state}; there is nothing to kill.`
        : `Task ${task.id} (#${task.issue}) is ${task.state}; only failed, cancelled or rate-limited tasks can be retried.`,
    );
  }
  const fileConfig = (await target.fileConfig()).config;
  const config = await target.config(doc);
  const by = process.env.USER ?? "cli";
  const reason = values.reason ?? `${verb === "kill" ? "killed" : "retried"} with fleet ${verb} by ${by}`;

  if (target.kind === "github" && config.dispatch !== "local") {
    const body = verb === "kill" ? `/fleet cancel ${reason}` : "/fleet retry";
    await target.github.issues.createComment(target.repo, task.issue, body);
    if (values.json) json({ id: task.id, issue: task.issue, requested: to, via: "comment" });
    else out(`asked the Fleet app to ${verb === "kill" ? "cancel" : "retry"} #${task.issue} (${task.id})`);
    return 0;
  }
  const queue = target.queue(fileConfig);
  const moved = await queue.move(task.issue, to, {
    taskId: task.id,
    reason: verb === "kill" ? reason : undefined,
    ...(verb === "retry" ? { from: [...RETRYABLE_STATES] } : {}),
  });
  if (moved.length === 0)
    throw new CliError(`Task ${task.id} changed state meanwhile; see \`fleet tasks --all\` and try again.`);
  const after = (await target.store.read()).doc.tasks[task.id];
  if (values.json) json(after);
  else
    out(`${verb === "kill" ? "killed" : "retried"} ${task.id} (#${task.issue}): now ${after?.state ?? to}`);
  return 0;
}
