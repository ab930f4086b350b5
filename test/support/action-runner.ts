import { spawn } from "node:child_process";
import { createSign } from "node:crypto";
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { WorkflowRun } from "../../src/offline/github/index.ts";
import type { Harness } from "./harness.ts";

export type Dispatched = WorkflowRun & { repo: string };

export interface ActionRun {
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

/** An installation token, the way a workflow gets one (app JWT -> access token). */
export async function installationToken(h: Harness): Promise<string> {
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
  const now = Math.floor(Date.now() / 1000);
  const unsigned = `${b64({ alg: "RS256", typ: "JWT" })}.${b64({ iat: now - 30, exp: now + 540, iss: String(h.gh.appId) })}`;
  const jwt = `${unsigned}.${createSign("RSA-SHA256").update(unsigned).sign(h.gh.privateKey, "base64url")}`;
  const res = await fetch(`${h.gh.url}/app/installations/${h.gh.installationId(h.full)}/access_tokens`, {
    method: "POST",
    headers: { authorization: `Bearer ${jwt}`, accept: "application/vnd.github+json" },
  });
  if (!res.ok) throw new Error(`installation token: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { token: string }).token;
}

/**
 * Runs the bundled action (`dist/index.js`) the way a runner does for the shipped fleet-task.yml: the
 * GITHUB_* variables and files of a job for `run`, the job's own GITHUB_TOKEN and OIDC request
 * variables (`permissions: id-token: write`), the inputs as INPUT_* variables (`fleet-url` from the
 * dispatch), plus `extraEnv` (a runner's own variables). The repository is cloned over git smart
 * HTTP with whatever token the action ends up with.
 */
export async function runActionBundle(opts: {
  h: Harness;
  run: Dispatched;
  scratch: string;
  inputs: Record<string, string>;
  extraEnv?: Record<string, string>;
}): Promise<ActionRun> {
  const { h, run } = opts;
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
    PATH: `${resolve("node_modules/.bin")}:${process.env.PATH}`,
    HOME: process.env.HOME ?? dir,
    GITHUB_ACTIONS: "true",
    GITHUB_REPOSITORY: h.full,
    GITHUB_RUN_ID: String(run.id),
    GITHUB_API_URL: h.gh.url,
    GITHUB_SERVER_URL: h.gh.url,
    GITHUB_EVENT_NAME: "workflow_dispatch",
    GITHUB_EVENT_PATH: files.event,
    GITHUB_OUTPUT: files.output,
    GITHUB_STEP_SUMMARY: files.summary,
    RUNNER_TEMP: dir,
    ...h.gh.jobEnvironment(h.full, run.id),
    "INPUT_TASK-ID": String(run.inputs.task_id),
    "INPUT_API-URL": h.gh.url,
    "INPUT_FLEET-URL": String(run.inputs.fleet_url ?? ""),
    "INPUT_FLEET-AUDIENCE": "fleet",
    "INPUT_WORK-DIR": join(dir, "work"),
    ...Object.fromEntries(Object.entries(opts.inputs).map(([k, v]) => [`INPUT_${k.toUpperCase()}`, v])),
    ...opts.extraEnv,
  };
  const child = spawn(process.execPath, ["dist/index.js"], { env, stdio: ["ignore", "pipe", "pipe"] });
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
