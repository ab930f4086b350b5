import type { WorkflowRun } from "@fleet/github-emulator";
import { type ActionJobResult, runActionJob } from "@fleet/github-emulator/runner";
import type { Harness } from "./harness.ts";

export type Dispatched = WorkflowRun & { repo: string };
export type ActionRun = ActionJobResult;

/**
 * Runs the bundled action (`dist/index.js`) on an emulated runner as the shipped fleet-task.yml does:
 * `fleet-url` from the dispatch (the job exchanges its OIDC token for the app's), over git smart HTTP,
 * plus the given inputs and the runner's own variables.
 */
export function runActionBundle(opts: {
  h: Harness;
  run: Dispatched;
  scratch: string;
  inputs: Record<string, string>;
  extraEnv?: Record<string, string>;
}): Promise<ActionRun> {
  const { h, run } = opts;
  return runActionJob({
    gh: h.gh,
    fullName: h.full,
    run,
    scratch: opts.scratch,
    inputs: {
      "task-id": String(run.inputs.task_id),
      "api-url": h.gh.url,
      "fleet-url": String(run.inputs.fleet_url ?? ""),
      "fleet-audience": "fleet",
      "work-dir": `${opts.scratch}/work-${run.id}`,
      ...opts.inputs,
    },
    ...(opts.extraEnv ? { extraEnv: opts.extraEnv } : {}),
  });
}
