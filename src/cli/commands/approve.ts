import { parse, TARGET_HELP, TARGET_OPTIONS, taskRefArgument } from "../args.ts";
import { CliError } from "../errors.ts";
import { json, out } from "../io.ts";
import { describeTarget, resolveTarget } from "../target.ts";
import { findTaskRef } from "../task-ref.ts";

export const APPROVE_USAGE = `Usage: fleet approve <id> [--json]

With plan_approval: true in .github/fleet.yml, a task's agent first writes a plan (read-only) and the
task waits in awaiting-approval. \`fleet task <id> plan\` shows the plan; this approves it: the task
goes back to the queue and its next run is the work phase, given the approved plan (no new plan
phase, so the plan is not paid for twice; a later \`fleet retry\` of the task reuses it too).
To plan again instead, \`fleet kill <id>\` then \`fleet retry <id>\`.
Against GitHub with dispatch: actions this posts \`/fleet approve\` on the issue for the Fleet app.

<id> is a task id (fl-a3f) or an issue (#12: its latest task).

${TARGET_HELP}`;

export async function approveCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, TARGET_OPTIONS, APPROVE_USAGE);
  const ref = taskRefArgument(positionals, "fleet approve", APPROVE_USAGE);
  const target = await resolveTarget(values);
  const { doc } = await target.store.read();
  const task = findTaskRef(doc, ref, describeTarget(target));
  if (task.state !== "awaiting-approval")
    throw new CliError(
      `Task ${task.id} (#${task.issue}) is ${task.state}; only a task whose plan waits for approval (awaiting-approval) can be approved.`,
    );
  const config = await target.config(doc);
  if (target.kind === "github" && config.dispatch !== "local") {
    await target.github.issues.createComment(target.repo, task.issue, "/fleet approve");
    if (values.json) json({ id: task.id, issue: task.issue, requested: "approve", via: "comment" });
    else out(`asked the Fleet app to approve the plan of #${task.issue} (${task.id})`);
    return 0;
  }
  // The transition `/fleet approve` makes on GitHub: back to the queue, approved.
  const queue = target.queue((await target.fileConfig()).config);
  const moved = await queue.move(task.issue, "queued", {
    taskId: task.id,
    from: ["awaiting-approval"],
    patch: { approved: true },
  });
  if (moved.length === 0)
    throw new CliError(`Task ${task.id} changed state meanwhile; see \`fleet tasks --all\` and try again.`);
  const after = (await target.store.read()).doc.tasks[task.id];
  if (values.json) json(after);
  else
    out(
      `approved the plan of ${task.id} (#${task.issue}): now ${after?.state ?? "queued"}; \`fleet run\` runs its work phase with this plan`,
    );
  return 0;
}
