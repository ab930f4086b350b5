import type { Context } from "probot";
import { isActive, SLOT_HOLDING_STATES } from "../core/lifecycle.ts";
import { retryNotBefore, retryReason } from "../core/scheduler.ts";
import type { Task } from "../core/task.ts";
import { taskOfRun } from "../core/task-workflow.ts";
import type { HandlerDeps } from "./handler-deps.ts";
import { loadRepoConfig } from "./load-config.ts";

/**
 * `workflow_run.completed` of a task's run. A run that reported reaches a state past `running` before it
 * ends; one whose task is still active died without reporting (runner lost, cancelled, timed out). Its
 * slot is freed and the task retried while retries are left, else failed. The repository's own CI runs
 * (pushes, pull requests) end here too: they are let go before any request, since only a
 * `workflow_dispatch` run of Fleet's workflow can be a task's.
 */
export async function onWorkflowRunCompleted(
  context: Context<"workflow_run.completed">,
  deps: HandlerDeps,
): Promise<void> {
  const run = context.payload.workflow_run;
  if (run.event !== "workflow_dispatch") return;
  const runId = String(run.id);
  const conclusion = run.conclusion ?? "unknown";
  const loaded = await loadRepoConfig(deps.github, context.repo(), deps.configs);
  if (!loaded.ok || !run.path.endsWith(`/${loaded.config.workflow}`)) return;
  const queue = await deps.queues.forContext(context, loaded.config);
  const doc = await queue.snapshot();
  const task: Task | undefined = taskOfRun(doc.tasks, run, await deps.appHandle?.());
  if (!task || !isActive(task.state)) return;
  const config = queue.config(doc);
  const retry = task.attempts <= config.retries.max;
  const reason = `the Actions run ${runId} ended with conclusion \`${conclusion}\` before the task reported`;
  const notBefore = retry
    ? retryNotBefore(queue.now().toISOString(), task.attempts, config.retries.backoff_seconds)
    : undefined;
  await queue.move(task.issue, retry ? "queued" : "failed", {
    taskId: task.id,
    // Only while it is still this run's: a report that lands first wins.
    from: [...SLOT_HOLDING_STATES],
    reason: retry ? retryReason(reason, notBefore) : `${reason}; no retries left (attempt ${task.attempts})`,
    resetAt: notBefore,
    // The run is over: the retry waits for its backoff only, not for the dead run's lease.
    runOver: true,
  });
}
