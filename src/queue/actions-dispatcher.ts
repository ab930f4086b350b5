import { randomBytes } from "node:crypto";
import type { FleetConfig } from "../core/config.ts";
import type { Task } from "../core/task.ts";
import type { GitHub, RepoRef } from "../github/port.ts";
import type { Dispatcher, DispatchStart } from "./dispatcher.ts";

export interface ActionsDispatcherOptions {
  github: GitHub;
  repo: RepoRef;
  config: Pick<FleetConfig, "workflow" | "runner_labels">;
  /**
   * The Fleet app's URL as runners reach it, passed as the `fleet_url` input: the run exchanges its
   * OIDC token there for the app's token. Without it the run needs a `github-token` of its own.
   */
  fleetUrl?: string;
  /** Waits between looks for the run a dispatch started (runs appear after a delay). */
  findRunDelaysMs?: number[];
  sleep?: (ms: number) => Promise<void>;
  log?: (message: string) => void;
}

const DEFAULT_DELAYS = [1_000, 2_000, 4_000, 8_000];

/**
 * A dispatch's id, `<task>.<attempt>.<hex>` (read by dispatchOf); the workflow's `run-name` carries it so
 * the run can be found. Its hex is 8 random digits and then the dispatch's time (its lease's
 * `acquiredAt`, 12 digits of milliseconds), which tells this dispatch from a later one of the same attempt
 * number: an attempt given back (a run that failed before its agent) is counted again by the next
 * dispatch. In the hex, not a field of its own, so that an app or action of an earlier version (which
 * reads `<attempt>.<hex>`) still reads the attempt.
 */
export const newCorrelationId = (task: Task): string => {
  const at = task.lease ? Date.parse(task.lease.acquiredAt) : Number.NaN;
  const time = Number.isSafeInteger(at) && at >= 0 && at < 16 ** 12 ? at.toString(16).padStart(12, "0") : "";
  return `${task.id}.${task.attempts}.${randomBytes(4).toString("hex")}${time}`;
};

/** What went wrong with a dispatch, in words a maintainer can act on. */
function explainDispatchError(error: unknown, workflow: string, ref: string): Error {
  const status = (error as { status?: number }).status;
  const message = (error as Error).message;
  const path = `.github/workflows/${workflow}`;
  if (status === 404)
    return new Error(
      `${path} was not found on ${ref}. Add Fleet's workflow there (see docs/actions.md), set \`workflow:\` in .github/fleet.yml to the right file, or set \`dispatch: local\`.`,
    );
  if (status === 422)
    return new Error(
      `GitHub refused to dispatch ${path} on ${ref} (${message}). The workflow needs a \`workflow_dispatch\` trigger with inputs task_id, correlation_id, runner_labels and fleet_url (copy Fleet's current fleet-task.yml).`,
    );
  if (status === 403)
    return new Error(
      `Fleet may not dispatch ${path} (${message}). The GitHub App needs the "Actions: write" permission.`,
    );
  return new Error(`dispatching ${path} on ${ref} failed: ${message}`);
}

/**
 * `dispatch: actions`: each dispatched task becomes a `workflow_dispatch` of the repository's Fleet
 * workflow, whose job runs Fleet's action on a runner with `runner_labels`; stopping a task cancels its run.
 */
export function createActionsDispatcher(opts: ActionsDispatcherOptions): Dispatcher {
  const { github, repo, config } = opts;
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const delays = opts.findRunDelaysMs ?? DEFAULT_DELAYS;
  let defaultBranch: string | undefined;

  /** The run whose run-name carries the correlation id: GitHub lists it some time after the dispatch. */
  async function findRun(correlationId: string): Promise<DispatchStart> {
    for (const delay of [0, ...delays]) {
      if (delay > 0) await sleep(delay);
      const runs = await github.actions.listWorkflowRuns(repo, config.workflow, "workflow_dispatch");
      const run = runs.find(
        (r) => r.display_title?.includes(correlationId) || r.name?.includes(correlationId),
      );
      if (run) return { runId: String(run.id), runUrl: run.html_url };
    }
    // The run exists but cannot be told apart: the lease expiry still notices if it never reports.
    opts.log?.(`could not find the Actions run of dispatch ${correlationId}; its run link stays empty`);
    return {};
  }

  return {
    mode: "actions",
    async start(task) {
      defaultBranch ??= (await github.repos.get(repo)).default_branch;
      const correlationId = newCorrelationId(task);
      let details: { runId?: number; url?: string };
      try {
        details = await github.actions.dispatchWorkflow(repo, config.workflow, {
          ref: defaultBranch,
          inputs: {
            task_id: task.id,
            correlation_id: correlationId,
            runner_labels: JSON.stringify(config.runner_labels),
            ...(opts.fleetUrl ? { fleet_url: opts.fleetUrl } : {}),
          },
        });
      } catch (error) {
        throw explainDispatchError(error, config.workflow, defaultBranch);
      }
      // Newer servers tell the run's id at once; older ones leave it to be found by its run-name.
      if (details.runId !== undefined) return { runId: String(details.runId), runUrl: details.url };
      return findRun(correlationId);
    },
    async stop(task) {
      if (!task.runId) return;
      try {
        await github.actions.cancelWorkflowRun(repo, Number(task.runId));
      } catch (error) {
        // 409: the run already ended, which is what stopping wanted.
        if ((error as { status?: number }).status !== 409) throw error;
      }
    },
  };
}
