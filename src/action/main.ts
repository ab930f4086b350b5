import { getAdapter } from "../agents/index.ts";
import type { FleetConfig } from "../core/config.ts";
import { actionsRunHolder } from "../core/leases.ts";
import { redactSecrets } from "../core/redact.ts";
import { type DispatchNamed, isDispatchNamed } from "../core/task-workflow.ts";
import { addUsage, emptyUsage, type RunTotals, type TokenUsage } from "../core/usage.ts";
import type { GitHub, RepoRef } from "../github/port.ts";
import { openRepository } from "../queue/open-repository.ts";
import { renderActionSummary } from "../render/action-summary.ts";
import type { TaskOutcome } from "../worker/3-attempt.ts";
import { executeTask } from "../worker/execute-task.ts";
import { assertSandboxAvailable, SandboxUnavailableError } from "../worker/sandbox/bubblewrap.ts";
import type { GitAuth } from "../worker/workspace/git.ts";

export interface ActionInputs {
  taskId: string;
  repo: RepoRef;
  /** The Actions run this job belongs to: the lease holder is `actions:<runId>`. */
  runId: string;
  /**
   * The task's dispatch this run is for (its correlation id: attempt and time): a task dispatched again
   * since (a lease run out while the run waited for a runner, an attempt given back and counted again)
   * is another run's, not claimed here.
   */
  dispatch?: DispatchNamed;
  cloneUrl: string;
  gitAuth?: GitAuth;
  workDir: string;
  /** Credential values by name (`NAME=value` lines of the `credentials` input). */
  credentials: ReadonlyMap<string, string>;
  modelBaseUrl?: string;
  /** Variables the operator chose for the agent (`agent-env`), never copied from the runner's env. */
  agentEnv: Record<string, string>;
  /** Values to redact from everything posted (the token, every credential). */
  secrets: string[];
  /** The Fleet app's URL: a next task dispatched from here is told to exchange its token there too. */
  fleetUrl?: string;
  /** The runner's name=address map for the egress proxy (`FLEET_EGRESS_HOSTS`). */
  egressHosts?: Readonly<Record<string, string>>;
}

export interface ActionDeps {
  github: GitHub;
  log: (message: string) => void;
  warn: (message: string) => void;
  /** Tracking-comment throttle; tests use 0. */
  trackerIntervalMs?: number;
  heartbeatMs?: number;
}

export type Conclusion = TaskOutcome["outcome"] | "not-claimed";

export interface ActionResult {
  conclusion: Conclusion;
  /** True when the run should fail the job (the agent failed, timed out or stalled). */
  failed: boolean;
  message: string;
  prNumber?: number;
  prUrl?: string;
  usage: TokenUsage;
  costUsd: number | null;
  logPath?: string;
  summary: string;
}

/** A user-facing error of the Action: its message says what to fix. */
export class ActionInputError extends Error {
  override readonly name = "ActionInputError";
}

/** The credential a coder may use: the first of its configured names that the runner was given. */
export function credentialFor(
  config: FleetConfig,
  credentials: ReadonlyMap<string, string>,
  coder: string,
): { name: string; value: string } | undefined {
  for (const name of config.coders[coder]?.credentials ?? []) {
    const value = credentials.get(name);
    if (value) return { name, value };
  }
  return undefined;
}

const FAILED: ReadonlySet<Conclusion> = new Set(["failed", "timeout", "stall"]);

/**
 * One dispatched task on an Actions runner:
 * 1. open the repository (its `.github/fleet.yml`, its state through one write queue, the queue with
 *    the mode's dispatcher: a finished task schedules the next one) and check the sandbox;
 * 2. run the task through `executeTask`, holding its lease as `actions:<run id>`;
 * 3. flush the tracking comment; 4. sum the token figures and render the job summary.
 */
export async function runAction(inputs: ActionInputs, deps: ActionDeps): Promise<ActionResult> {
  // 1.
  const repository = openRepository({
    github: deps.github,
    repo: inputs.repo,
    trackerIntervalMs: deps.trackerIntervalMs,
    fleetUrl: inputs.fleetUrl,
    log: deps.warn,
  });
  const loaded = await repository.fileConfig();
  if (!loaded.ok)
    throw new ActionInputError(
      `.github/fleet.yml is invalid: ${loaded.problems.map((p) => `${p.path}: ${p.message}`).join("; ")}`,
    );
  // A runner that cannot contain the agent fails the job before it claims the task.
  try {
    await assertSandboxAvailable(loaded.config.sandbox);
  } catch (error) {
    if (error instanceof SandboxUnavailableError)
      throw new ActionInputError(`On this runner: ${error.message}`);
    throw error;
  }
  const queue = repository.queue(loaded.config);
  const snapshot = await repository.store.read();
  const config = queue.config(snapshot.doc);
  const task = snapshot.doc.tasks[inputs.taskId];
  if (task && !credentialFor(config, inputs.credentials, task.coder)) {
    const names = config.coders[task.coder]?.credentials ?? [];
    deps.warn(
      `No credential for coder "${task.coder}": pass one of ${names.join(", ") || "(none configured)"} in the \`credentials\` input (NAME=value lines from secrets).`,
    );
  }

  // 2.
  const holder = actionsRunHolder(inputs.runId);
  let outcome: TaskOutcome | undefined;
  try {
    outcome = await executeTask(inputs.taskId, {
      repo: inputs.repo,
      github: deps.github,
      store: repository.store,
      queue,
      tracker: repository.tracker,
      config,
      cloneUrl: inputs.cloneUrl,
      gitAuth: inputs.gitAuth,
      workDir: inputs.workDir,
      adapterFor: getAdapter,
      credentialFor: (coder) => credentialFor(config, inputs.credentials, coder),
      // The whole pool: a rate-limited credential hands the run to the coder's next one.
      credentialValue: (name) => inputs.credentials.get(name),
      modelBaseUrl: inputs.modelBaseUrl,
      agentEnv: inputs.agentEnv,
      holder,
      ...(inputs.dispatch !== undefined
        ? {
            mayClaim: (doc) => {
              const t = doc.tasks[inputs.taskId];
              return t !== undefined && isDispatchNamed(t, inputs.dispatch!);
            },
          }
        : {}),
      heartbeatMs: deps.heartbeatMs,
      secrets: inputs.secrets,
      ...(inputs.egressHosts ? { egressHosts: inputs.egressHosts } : {}),
      log: deps.log,
    });
  } finally {
    // 3.
    await repository.tracker.flush();
  }

  // 4.
  return outcome ? actionResult(inputs, outcome) : notClaimed(inputs, holder);
}

function notClaimed(inputs: ActionInputs, holder: string): ActionResult {
  const message = `Task ${inputs.taskId} was not claimed by ${holder}: it is no longer dispatched (cancelled, retried elsewhere, dispatched again since this run was started, or taken by another run).`;
  return {
    conclusion: "not-claimed",
    failed: false,
    message,
    usage: emptyUsage(),
    costUsd: null,
    summary: renderActionSummary({ taskId: inputs.taskId, message }),
  };
}

/** The job's outputs and summary: the outcome, the PR, the token figures of both phases. */
function actionResult(inputs: ActionInputs, outcome: TaskOutcome): ActionResult {
  const phases = [outcome.planTotals, outcome.totals].filter((t): t is RunTotals => Boolean(t));
  const usage = phases.reduce((acc, t) => addUsage(acc, t.usage), emptyUsage());
  const costs = phases.map((t) => t.costUsd).filter((c): c is number => c !== null);
  const costUsd = costs.length ? costs.reduce((a, c) => a + c, 0) : null;
  const message = redactSecrets(
    outcome.pr
      ? `pull request #${outcome.pr.number} opened for task ${inputs.taskId}`
      : `task ${inputs.taskId} ended: ${outcome.outcome}${outcome.reason ? ` (${outcome.reason})` : ""}`,
    inputs.secrets,
  );
  const summary = renderActionSummary({
    taskId: inputs.taskId,
    message: `Outcome: ${message}${outcome.pr ? ` — ${outcome.pr.url}` : ""}`,
    tokens: { totals: outcome.totals, planTotals: outcome.planTotals },
  });
  return {
    conclusion: outcome.outcome,
    failed: FAILED.has(outcome.outcome),
    message,
    prNumber: outcome.pr?.number,
    prUrl: outcome.pr?.url,
    usage,
    costUsd,
    logPath: outcome.logPath,
    summary,
  };
}
