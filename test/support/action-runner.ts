import { readFile } from "node:fs/promises";
import type { WorkflowRun } from "@fleet/github-emulator";
import {
  type ActionJobResult,
  actionMain,
  runActionJob,
  workflowActionStep,
} from "@fleet/github-emulator/runner";
import { isFleetAction } from "../../src/core/task-workflow.ts";
import type { Harness } from "./harness.ts";

export type Dispatched = WorkflowRun & { repo: string };
export type ActionRun = ActionJobResult;

/** The workflow file the run is of, as the repository holds it at the run's commit. */
async function workflowOf(h: Harness, run: Dispatched): Promise<string> {
  const { data } = await h.mona.rest.repos.getContent({
    owner: h.owner,
    repo: h.name,
    path: run.workflowPath,
    ref: run.headSha,
  });
  return Buffer.from((data as { content: string }).content, "base64").toString("utf8");
}

/**
 * A self-hosted runner taking a dispatched run of Fleet's workflow: the workflow's step that uses
 * `<owner>/fleet@v1` is Fleet's action from this checkout (action.yml's `runs.main`, the bundle in
 * dist/), its inputs what the workflow's `with:` gives for this run (`secrets` for `${{ secrets.* }}`)
 * and action.yml's defaults, the job token as the workflow's `permissions:` say; then the runner's own
 * settings (the emulator's API URL, a work folder) and `inputs`, which win.
 */
export async function runActionBundle(opts: {
  h: Harness;
  run: Dispatched;
  scratch: string;
  inputs: Record<string, string>;
  secrets?: Record<string, string>;
  extraEnv?: Record<string, string>;
}): Promise<ActionRun> {
  const { h, run } = opts;
  const actionYml = await readFile("action.yml", "utf8");
  const step = workflowActionStep({
    workflow: await workflowOf(h, run),
    match: isFleetAction,
    runInputs: run.inputs,
    secrets: opts.secrets ?? {},
    github: { api_url: h.gh.url, server_url: h.gh.url, repository: h.full, run_id: String(run.id) },
    actionYml,
  });
  return runActionJob({
    gh: h.gh,
    fullName: h.full,
    run,
    scratch: opts.scratch,
    main: actionMain(actionYml),
    inputs: { ...step.inputs, "work-dir": `${opts.scratch}/work-${run.id}`, ...opts.inputs },
    ...(step.permissions ? { permissions: step.permissions } : {}),
    idToken: step.idToken,
    ...(opts.extraEnv ? { extraEnv: opts.extraEnv } : {}),
  });
}
