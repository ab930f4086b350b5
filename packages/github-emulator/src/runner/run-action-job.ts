import { spawn } from "node:child_process";
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { delimiter, join, resolve } from "node:path";
import type { GitHubEmulator, TokenPermission, WorkflowRun } from "../index.ts";

export {
  actionMain,
  evaluateExpressions,
  type WorkflowActionStep,
  workflowActionStep,
} from "./workflow-step.ts";

/** What a job that ran an action left: its exit code, log, outputs (GITHUB_OUTPUT) and job summary. */
export interface ActionJobResult {
  code: number | null;
  stdout: string;
  stderr: string;
  outputs: Record<string, string>;
  summary: string;
}

/** GITHUB_OUTPUT's `name<<delimiter` blocks. */
export function parseOutputs(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of text.matchAll(/^([\w-]+)<<(\S+)\n([\s\S]*?)\n\2$/gm)) out[m[1]!] = m[3]!;
  return out;
}

/**
 * A self-hosted runner running one job of a workflow run on the emulator: the action bundle (a
 * node24 action's `main`) in a process of its own with what a runner gives a job for the run (the
 * GITHUB_* variables and files, the job's GITHUB_TOKEN and, with `permissions: id-token: write`, the
 * OIDC request variables) and the step's inputs as INPUT_* variables. The workflow is not run step by
 * step: `workflowActionStep` reads the action's step, its inputs and the job's permissions from it.
 */
export async function runActionJob(opts: {
  gh: GitHubEmulator;
  fullName: string;
  run: WorkflowRun;
  /** Where the job's files (event, outputs, summary, RUNNER_TEMP) go. */
  scratch: string;
  /** The action's entry, e.g. dist/index.js. */
  main?: string;
  inputs: Record<string, string>;
  /** The runner's own variables (HOME, PATH additions, ...). */
  extraEnv?: Record<string, string>;
  /** The job token's permissions and the OIDC grant, as the workflow's `permissions:` says (see workflowActionStep). */
  permissions?: Record<string, TokenPermission>;
  idToken?: boolean;
}): Promise<ActionJobResult> {
  const { gh, run } = opts;
  const dir = await mkdtemp(join(opts.scratch, `run-${run.id}-`));
  const files = {
    event: join(dir, "event.json"),
    output: join(dir, "output"),
    summary: join(dir, "summary.md"),
  };
  await writeFile(files.event, JSON.stringify({ inputs: run.inputs }));
  await writeFile(files.output, "");
  await writeFile(files.summary, "");
  const env: Record<string, string> = {
    PATH: `${resolve("node_modules/.bin")}${delimiter}${process.env.PATH ?? ""}`,
    HOME: process.env.HOME ?? dir,
    GITHUB_ACTIONS: "true",
    GITHUB_REPOSITORY: opts.fullName,
    GITHUB_RUN_ID: String(run.id),
    GITHUB_API_URL: gh.url,
    GITHUB_SERVER_URL: gh.url,
    GITHUB_EVENT_NAME: run.event,
    GITHUB_EVENT_PATH: files.event,
    GITHUB_OUTPUT: files.output,
    GITHUB_STEP_SUMMARY: files.summary,
    RUNNER_TEMP: dir,
    ...gh.jobEnvironment(opts.fullName, run.id, {
      ...(opts.permissions ? { permissions: opts.permissions } : {}),
      ...(opts.idToken !== undefined ? { idToken: opts.idToken } : {}),
    }),
    ...Object.fromEntries(Object.entries(opts.inputs).map(([k, v]) => [`INPUT_${k.toUpperCase()}`, v])),
    ...opts.extraEnv,
  };
  const child = spawn(process.execPath, [opts.main ?? "dist/index.js"], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => {
    stdout += d;
  });
  child.stderr.on("data", (d) => {
    stderr += d;
  });
  const code = await new Promise<number | null>((r) => child.on("close", r));
  return {
    code,
    stdout,
    stderr,
    outputs: parseOutputs(await readFile(files.output, "utf8")),
    summary: await readFile(files.summary, "utf8"),
  };
}
