import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import * as core from "@actions/core";
import { type DispatchNamed, dispatchOf } from "../core/task-workflow.ts";
import { githubForToken } from "../github/octokit-port.ts";
import { parseRepoFullName } from "../github/port.ts";
import { useCommandHelper } from "../process/command-runner.ts";
import { parseEgressHosts } from "../worker/sandbox/egress-proxy.ts";
import { exchangeForAppToken } from "./app-token.ts";
import { ActionInputError, type ActionResult, runAction } from "./main.ts";

const NAME = /^[A-Z_][A-Z0-9_]*$/;

/**
 * `NAME=value` lines (the `credentials` and `agent-env` inputs). Blank lines and `#` comments are
 * skipped; an empty value (a secret the repository does not have) is left out. Errors name the line,
 * never its value.
 */
export function parseNameValueLines(input: string, inputName: string): Map<string, string> {
  const values = new Map<string, string>();
  input.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    const eq = line.indexOf("=");
    const name = eq < 0 ? "" : line.slice(0, eq).trim();
    if (!NAME.test(name))
      throw new ActionInputError(
        `The \`${inputName}\` input, line ${i + 1}: write NAME=value with an upper-case NAME (e.g. ANTHROPIC_API_KEY=\${{ secrets.ANTHROPIC_API_KEY }}).`,
      );
    const value = line.slice(eq + 1).trim();
    if (value !== "") values.set(name, value);
  });
  return values;
}

/**
 * The dispatch of the task this run is for (its attempt and time): Fleet's dispatch names it in its
 * `correlation_id` input, which the job's event payload holds (`inputs` of a workflow_dispatch event,
 * https://docs.github.com/en/actions/writing-workflows/choosing-when-your-workflow-runs/events-that-trigger-workflows#workflow_dispatch).
 * Undefined for a run started otherwise (by hand, an older workflow): its claim is not held to an attempt.
 */
export function dispatchedFor(env: NodeJS.ProcessEnv, taskId: string): DispatchNamed | undefined {
  if (!env.GITHUB_EVENT_PATH) return undefined;
  try {
    const event = JSON.parse(readFileSync(env.GITHUB_EVENT_PATH, "utf8")) as {
      inputs?: Record<string, unknown>;
    };
    return dispatchOf(taskId, event.inputs?.correlation_id);
  } catch {
    return undefined;
  }
}

function required(env: NodeJS.ProcessEnv, name: string): string {
  const value = env[name];
  if (!value) throw new ActionInputError(`${name} is not set: this action runs inside a GitHub Actions job.`);
  return value;
}

/** Reads the inputs and the runner's environment, runs the task, and reports outputs and the summary. */
export async function runner(env: NodeJS.ProcessEnv = process.env): Promise<void> {
  useCommandHelper();
  try {
    const taskId = core.getInput("task-id");
    const given = core.getInput("github-token");
    const fleetUrl = core.getInput("fleet-url");
    if (!taskId)
      throw new ActionInputError(
        "The `task-id` input is empty: the workflow passes its `task_id` input there.",
      );
    if (!given && !fleetUrl)
      throw new ActionInputError(
        "Neither `fleet-url` nor `github-token` is set: the Fleet app passes its URL as the workflow's `fleet_url` input when FLEET_PUBLIC_URL is set on the app; or pass a token with contents, issues and pull-requests write (e.g. an app installation token).",
      );
    if (given) core.setSecret(given);
    // The app's token, for this repository and this run only, unless the workflow gave one itself.
    const token =
      given ||
      (await exchangeForAppToken(fleetUrl, taskId, {
        audience: core.getInput("fleet-audience") || "fleet",
        env,
      }));
    const credentials = parseNameValueLines(core.getInput("credentials"), "credentials");
    for (const value of credentials.values()) core.setSecret(value);
    const agentEnv = Object.fromEntries(parseNameValueLines(core.getInput("agent-env"), "agent-env"));
    const apiUrl = core.getInput("api-url") || env.GITHUB_API_URL || "https://api.github.com";
    const modelBaseUrl = core.getInput("model-base-url") || undefined;
    const workDir = core.getInput("work-dir") || join(env.RUNNER_TEMP || tmpdir(), "fleet");
    // The runner machine's own name=address map for the egress proxy (a registry mirror), if any.
    const egressHosts = parseEgressHosts(env.FLEET_EGRESS_HOSTS);
    const fullName = required(env, "GITHUB_REPOSITORY");
    const runId = required(env, "GITHUB_RUN_ID");
    const serverUrl = env.GITHUB_SERVER_URL || "https://github.com";
    const cloneUrl = core.getInput("clone-url") || `${serverUrl}/${fullName}.git`;
    const repo = parseRepoFullName(fullName);
    const dispatch = dispatchedFor(env, taskId);
    if (dispatch === undefined && env.GITHUB_EVENT_PATH)
      core.info(
        `This run's dispatch names no attempt of ${taskId} (no correlation_id input of Fleet's form): its claim is not held to one.`,
      );
    // The inputs are read: no child process (git, the agent's sandbox) inherits them from here on.
    for (const name of Object.keys(env)) if (name.startsWith("INPUT_")) delete env[name];
    const github = await githubForToken({ token, baseUrl: apiUrl, userAgent: "fleet-action" });

    const result = await runAction(
      {
        taskId,
        repo,
        runId,
        ...(dispatch !== undefined ? { dispatch } : {}),
        cloneUrl,
        // Token auth only over http(s); it travels in git's environment, never in the URL.
        gitAuth: /^https?:/.test(cloneUrl) ? { username: "x-access-token", token } : undefined,
        workDir,
        credentials,
        modelBaseUrl,
        agentEnv,
        secrets: [token, ...credentials.values()],
        ...(fleetUrl ? { fleetUrl } : {}),
        ...(Object.keys(egressHosts).length ? { egressHosts } : {}),
      },
      {
        github,
        log: (m) => core.info(m),
        warn: (m) => core.warning(m),
      },
    );
    await report(result);
  } catch (error) {
    const message =
      error instanceof ActionInputError
        ? error.message
        : `Fleet failed: ${(error as Error).message ?? error}`;
    if (!(error instanceof ActionInputError)) core.debug(String((error as Error).stack ?? error));
    core.setOutput("conclusion", "error");
    core.setFailed(message);
  }
}

async function report(result: ActionResult): Promise<void> {
  core.setOutput("conclusion", result.conclusion);
  core.setOutput("pr-number", result.prNumber === undefined ? "" : String(result.prNumber));
  core.setOutput("tokens-input", String(result.usage.input));
  core.setOutput("tokens-output", String(result.usage.output));
  core.setOutput("tokens-cache-read", String(result.usage.cacheRead));
  core.setOutput("tokens-cache-write", String(result.usage.cacheWrite));
  core.setOutput("cost-usd", result.costUsd === null ? "" : result.costUsd.toFixed(6));
  core.setOutput("log-path", result.logPath ?? "");
  // The log lives in the task's artifacts folder (agent and plan logs, PLAN.md, KNOWLEDGE.md,
  // RESULT.json): the workflow uploads that folder, which `fleet task <id> log|plan|knowledge` reads.
  core.setOutput("artifacts-dir", result.logPath ? dirname(result.logPath) : "");
  // Outside a runner (no $GITHUB_STEP_SUMMARY) there is nowhere to write the summary.
  if (process.env.GITHUB_STEP_SUMMARY) await core.summary.addRaw(result.summary, true).write();
  if (result.failed) core.setFailed(result.message);
  else if (result.conclusion === "not-claimed") core.notice(result.message);
  else core.info(result.message);
}
