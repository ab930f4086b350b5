import { mkdir, open, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { AgentAdapter, AgentEvent, AgentInvocation } from "../agents/types.ts";
import { taskBranchName } from "../core/branch.ts";
import { redactSecrets, secretRedactor } from "../core/redact.ts";
import type { RunKind, RunRecord } from "../core/run-history.ts";
import { type LabeledSecret, scanOutgoing } from "../core/secret-scan.ts";
import type { TaskState } from "../core/task.ts";
import {
  addUsage,
  combineTotals,
  emptyUsage,
  type RunTotals,
  type TokenUsage,
  totalTokens,
} from "../core/usage.ts";
import { overPerTaskBudget, type PerTaskLimits } from "../economy/budgets.ts";
import { buildContextManifest, writeContextManifest } from "../economy/knowledge.ts";
import { type GitHubClient, type IssueRef, parseRepoFullName } from "../github/client.ts";
import { renderPrBody } from "../render/pr-body.ts";
import {
  type AgentArtifacts,
  agentHomeDir,
  agentNotesDir,
  keepArtifacts,
  LOG_FILE,
  PLAN_FILE,
  prepareNotesDir,
  readArtifacts,
  taskArtifactsDir,
} from "./artifacts.ts";
import { runContainedAgent } from "./contained-run.ts";
import type { GitAuth } from "./git.ts";
import { type ModelGateway, startModelGateway } from "./model-gateway.ts";
import { checkOutgoing } from "./outgoing-check.ts";
import { buildPrompt } from "./prompt.ts";
import {
  assertFleetBranch,
  commitAll,
  commitMessage,
  forgetCommit,
  hasNewCommits,
  openOrUpdatePullRequest,
  pushBranch,
} from "./publish.ts";
import { createIssueReporter, type IssueReporter, type Progress, throttleProgress } from "./reports.ts";
import type { RunAgentResult } from "./run-agent.ts";
import type { SandboxMode, SandboxMounts } from "./sandbox.ts";
import { addWorktree, cleanAfterAgent, removeWorktree, type Worktree } from "./worktree.ts";

export { taskArtifactsDir } from "./artifacts.ts";

export interface TaskSpec {
  taskId: string;
  /** "owner/name". */
  repo: string;
  issue: number;
  title: string;
  body: string;
  comments: Array<{ author: string; body: string; trusted: boolean }>;
  coder: string;
  model: string;
  branch?: string;
  planPhase: boolean;
  planApproval: boolean;
  approved?: boolean;
  timeouts: { runMs: number; stallMs: number };
  attempt: number;
  /** A split (planning) task: the plan phase only, read-only; its plan is the outcome, no PR. */
  split?: boolean;
  /** Appended to the agent's prompt in every phase (split instructions, review feedback). */
  extraPrompt?: string;
  /** The task's earlier runs: the token report gets a row for each and a total across them. */
  earlierRuns?: RunRecord[];
  /** What this run is for (its row in the token report). */
  runKind?: RunKind;
}

export interface WorkerDeps {
  /** Token with contents/issues/pulls write on the repo. */
  octokit: GitHubClient;
  /** file:// or https URL. */
  cloneUrl: string;
  /** For https pushes; travels in git's environment only, never on disk, argv or logs. */
  gitAuth?: GitAuth;
  /** Where clones, worktrees and task artifacts live (a cache clone per repo, reused across tasks). */
  workDir: string;
  adapter: AgentAdapter;
  /**
   * `name` is what reports show. The value goes to the model gateway, which adds it to the agent's
   * requests; the agent itself holds a per-run token (a CLI that takes no base URL gets the value).
   */
  credential?: { name: string; value: string };
  /** How agents are contained; default `bubblewrap`. `none` is the operator's explicit choice. */
  sandbox?: SandboxMode;
  /** A running model gateway; without one, the task starts its own for its duration. */
  gateway?: ModelGateway;
  /** Scripted model server offline. */
  modelBaseUrl?: string;
  clock?: () => Date;
  signal?: AbortSignal;
  /**
   * Extra variables for the agent, chosen by the operator (e.g. CLAUDE_CODE_MAX_RETRIES); never
   * copied from the worker's own environment.
   */
  agentEnv?: Record<string, string>;
  /** Extra values to redact. */
  secrets?: string[];
  /** The issue's comments as listed when the run started; the final report then needs no listing of its own. */
  issueComments?: ReadonlyArray<{ id: number; body?: string | null; user?: { type?: string } | null }>;
  /**
   * Called when the agent is rate-limited on `limited`: marks it cooling and returns the next free
   * credential to continue on (the session is resumed where the adapter supports it), or undefined.
   */
  rotateCredential?: (limited: {
    name: string;
    rateLimit?: { resetsAt?: string; retryAfterSeconds?: number };
  }) => Promise<{ name: string; value: string } | undefined>;
  /** Per-task ceilings (budgets.per_task_tokens / per_task_usd): the run is stopped once one is passed. */
  perTaskLimits?: PerTaskLimits;
  onProgress?: (p: {
    state: TaskState;
    step: string;
    usage?: TokenUsage;
    costUsd?: number | null;
  }) => void | Promise<void>;
}

export type OutcomeKind =
  | "pr-opened"
  | "no-changes"
  | "awaiting-approval"
  | "failed"
  | "timeout"
  | "stall"
  | "cancelled"
  | "rate-limited"
  | "over-budget";

export interface TaskOutcome {
  outcome: OutcomeKind;
  pr?: { number: number; url: string; head: string };
  totals?: RunTotals;
  planTotals?: RunTotals;
  reason?: string;
  logPath: string;
  /** The failure is final: retrying would not help (e.g. an invalid split plan). */
  noRetry?: boolean;
  artifacts: { plan?: string; knowledge?: string; result?: unknown };
  sessionId?: string;
  rateLimit?: { resetsAt?: string; retryAfterSeconds?: number };
}

/** What a plan phase leaves for the work phase of a later call (after `/fleet approve`). */
interface SavedPlan {
  sessionId?: string;
  totals?: RunTotals;
}
const PLAN_STATE_FILE = "plan-phase.json";
const PLAN_LOG_FILE = "plan.log";

const STATE_OF: Record<OutcomeKind, TaskState> = {
  "pr-opened": "pr-open",
  "no-changes": "done",
  "awaiting-approval": "awaiting-approval",
  failed: "failed",
  timeout: "failed",
  stall: "failed",
  cancelled: "cancelled",
  "rate-limited": "rate-limited",
  "over-budget": "failed",
};

/**
 * Every secret a run knows of, with how reports name it (configured ones, the agent's credential, the
 * git token): redacted from all it posts, and what leaves the run is checked for each in any form.
 */
export function labeledSecretsOf(
  deps: Pick<WorkerDeps, "secrets" | "credential" | "gitAuth">,
): LabeledSecret[] {
  return [
    ...(deps.secrets ?? []).map((value) => ({ label: "a secret of the worker", value })),
    ...(deps.credential
      ? [{ label: `the credential ${deps.credential.name}`, value: deps.credential.value }]
      : []),
    ...(deps.gitAuth ? [{ label: "the worker's GitHub token", value: deps.gitAuth.token }] : []),
  ].filter((s) => s.value.length > 0);
}

/** The values of `labeledSecretsOf`, for redaction. */
export function knownSecretsOf(deps: Pick<WorkerDeps, "secrets" | "credential" | "gitAuth">): string[] {
  return labeledSecretsOf(deps).map((s) => s.value);
}

/** What an agent run sees of a task's worktree: read-only in a plan phase, and the git data it needs, read-only. */
export function worktreeMounts(
  wt: Pick<Worktree, "path" | "cacheDir" | "gitDir">,
  notesDir: string | undefined,
  phase: "plan" | "work",
): SandboxMounts {
  const notes = notesDir ? [notesDir] : [];
  return {
    writable: phase === "work" ? [wt.path, ...notes] : notes,
    readOnly: phase === "work" ? [wt.cacheDir] : [wt.path, wt.cacheDir],
    // The other tasks' worktree admin folders are none of its business; its own is shown read-only.
    hidden: [join(wt.cacheDir, "worktrees")],
    readOnlyAfter: [wt.gitDir],
  };
}

/**
 * Runs one task, start to finish, in its own worktree:
 *
 * 1. Check the branch is a fleet/* branch and prepare the artifacts folder.
 * 2. Create the worktree (pruning whatever a crashed run left) and the agent's notes folder.
 * 3. Plan phase (read-only), if asked: post the plan; stop with `awaiting-approval` if it needs approval.
 * 4. Work phase, under the run and stall timeouts, with throttled live progress.
 * 5. Keep PLAN.md, KNOWLEDGE.md, RESULT.json and the log under `<workDir>/tasks/<taskId>/`.
 * 6. Commit what the agent left; no changes -> no PR, and the issue says why.
 * 7. Refuse to push when the change, the commit message or the PR body gives a secret away (in any
 *    form: see `checkOutgoing`); else push the branch.
 * 8. Open the pull request, or update the open one.
 * 9. Post the token report and the run report (with the log's tail), redacted.
 * 10. Always remove the worktree.
 */
export async function runTask(spec: TaskSpec, deps: WorkerDeps): Promise<TaskOutcome> {
  const clock = deps.clock ?? (() => new Date());
  const artifactsDir = taskArtifactsDir(deps.workDir, spec.taskId);
  const logPath = join(artifactsDir, LOG_FILE);
  // Grows during the run: each per-run gateway token and each credential rotated to is added.
  const secrets = labeledSecretsOf(deps);
  const knownSecrets = secrets.map((s) => s.value);
  const redact = (text: string) => redactSecrets(text, knownSecrets);
  const issueRef: IssueRef = { ...parseRepoFullName(spec.repo), issue_number: spec.issue };
  const reporter = createIssueReporter(deps.octokit, issueRef, spec.taskId, redact, deps.issueComments);
  const progress = throttleProgress(deps.onProgress, clock);
  const result: TaskOutcome = { outcome: "failed", logPath, artifacts: {} };

  // Step 1
  const branch = spec.branch ?? taskBranchName(spec.issue, spec.title);
  await mkdir(artifactsDir, { recursive: true });
  const ctx: RunContext = {
    spec,
    deps,
    redact,
    reporter,
    progress,
    artifactsDir,
    branch,
    knownSecrets,
    secrets,
    result,
  };
  let wt: Worktree | undefined;
  let ownGateway: ModelGateway | undefined;
  try {
    assertFleetBranch(branch);
    if (!deps.gateway) ownGateway = await startModelGateway();
    ctx.gateway = deps.gateway ?? ownGateway;
    if (deps.signal?.aborted) return await finish(ctx, "cancelled", "Cancelled before the run started.");

    // Step 2
    await progress(
      { state: spec.planPhase && !spec.approved ? "planning" : "running", step: "preparing the worktree" },
      true,
    );
    wt = await addWorktree(
      deps.workDir,
      { repo: spec.repo, cloneUrl: deps.cloneUrl, auth: deps.gitAuth },
      spec.taskId,
      branch,
    );
    const notesDir = agentNotesDir(wt.path, spec.taskId);
    await prepareNotesDir(notesDir);

    if (spec.split) return await runSplitPlanning(ctx, wt, notesDir);

    // Step 3
    let plan: string | undefined;
    let resumeSessionId: string | undefined;
    const resuming = spec.planPhase && spec.planApproval && spec.approved === true;
    if (resuming) {
      const saved = await loadPlan(artifactsDir);
      plan = saved.plan;
      resumeSessionId = saved.state.sessionId;
      if (saved.state.totals) result.planTotals = saved.state.totals;
      if (plan !== undefined) await writeFile(join(notesDir, PLAN_FILE), plan);
    } else if (spec.planPhase) {
      await progress({ state: "planning", step: "planning (read-only)" }, true);
      const run = await runPhase(ctx, wt, notesDir, "plan", undefined, undefined);
      result.planTotals = run.totals;
      if (run.kind !== "ok") return await finish(ctx, run.kind, run.reason, run);
      const notes = await readArtifacts(notesDir);
      plan = notes.plan ?? run.planText ?? "";
      await writeFile(join(artifactsDir, PLAN_FILE), plan);
      await writeFile(
        join(artifactsDir, PLAN_STATE_FILE),
        JSON.stringify({ sessionId: run.sessionId, totals: run.totals } satisfies SavedPlan),
      );
      result.artifacts.plan = plan;
      resumeSessionId = run.sessionId;
      const waiting = spec.planApproval && !spec.approved;
      await reporter.plan(plan, waiting);
      if (waiting) {
        result.sessionId = run.sessionId;
        return await finish(ctx, "awaiting-approval", "The plan is posted and waits for `/fleet approve`.");
      }
    }

    // Step 4
    await progress({ state: "running", step: "agent working" }, true);
    const run = await runPhase(ctx, wt, notesDir, "work", plan, resumeSessionId);
    result.totals = run.totals;
    if (run.sessionId) result.sessionId = run.sessionId;

    // Step 5. Nothing the agent left in the worktree may steer Fleet's git (see cleanAfterAgent).
    await cleanAfterAgent(wt);
    const notes = await readArtifacts(notesDir);
    await keepArtifacts(notesDir, artifactsDir);
    result.artifacts = { plan: notes.plan ?? plan, knowledge: notes.knowledge, result: notes.rawResult };
    if (run.kind !== "ok") return await finish(ctx, run.kind, run.reason, run, notes);

    // Step 6
    await progress(
      { state: "running", step: "committing", usage: run.totals?.usage, costUsd: run.totals?.costUsd },
      true,
    );
    const message = commitMessage({
      summary: notes.result?.summary,
      title: spec.title,
      issue: spec.issue,
      taskId: spec.taskId,
      coder: spec.coder,
    });
    const prBody = renderPrBody({
      taskId: spec.taskId,
      issue: spec.issue,
      coder: spec.coder,
      model: spec.model,
      summary: notes.result?.summary,
      testsRun: notes.result?.testsRun,
      followUps: notes.result?.followUps,
      resultProblem: notes.resultProblem,
      totals: run.totals,
      planTotals: result.planTotals,
    });
    await commitAll(wt, redact(message));
    if (!(await hasNewCommits(wt, wt.startSha))) {
      const why = notes.result?.summary
        ? `The agent changed no files. Its summary: ${notes.result.summary}`
        : "The agent changed no files in the repository.";
      return await finish(ctx, "no-changes", why, run, notes);
    }

    // Step 7
    const leak = await checkOutgoing(wt, wt.startSha, ctx.secrets, [
      { what: "the commit message", text: message },
      { what: "the pull request body", text: prBody },
      { what: "RESULT.json", text: notes.rawResult === undefined ? "" : JSON.stringify(notes.rawResult) },
    ]);
    if (leak) {
      // An agent that tried to smuggle a secret out is not given another go by itself.
      result.noRetry = true;
      await forgetCommit(wt, wt.startSha);
      return await finish(ctx, "failed", leak, run, notes);
    }
    if (deps.signal?.aborted) return await finish(ctx, "cancelled", "Cancelled before the push.", run, notes);
    await progress({ state: "running", step: "pushing the branch" }, true);
    await pushBranch(wt, deps.cloneUrl, branch, deps.gitAuth);

    // Step 8
    const pr = await openOrUpdatePullRequest(deps.octokit, parseRepoFullName(spec.repo), {
      branch,
      mayExist: (spec.earlierRuns?.length ?? 0) > 0,
      base: wt.baseBranch,
      title: spec.title,
      body: redact(prBody),
    });
    result.pr = { number: pr.number, url: pr.url, head: pr.head };

    // Step 9
    return await finish(ctx, "pr-opened", undefined, run, notes);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return await finish(ctx, deps.signal?.aborted ? "cancelled" : "failed", reason);
  } finally {
    // Step 10
    if (wt) await removeWorktree(wt);
    await ownGateway?.close();
  }
}

interface RunContext {
  spec: TaskSpec;
  deps: WorkerDeps;
  redact: (text: string) => string;
  reporter: IssueReporter;
  progress: (p: Progress, force?: boolean) => Promise<void>;
  artifactsDir: string;
  branch: string;
  /** The values of `secrets`, for redaction; both grow during the run. */
  knownSecrets: string[];
  secrets: LabeledSecret[];
  gateway?: ModelGateway;
  result: TaskOutcome;
}

/** A secret the run learnt of (a gateway token, a rotated credential): redacted and checked from now on. */
function addSecret(ctx: RunContext, label: string, value: string) {
  ctx.secrets.push({ label, value });
  ctx.knownSecrets.push(value);
}

interface PhaseRun {
  kind: "ok" | "failed" | "timeout" | "stall" | "cancelled" | "rate-limited" | "over-budget";
  reason?: string;
  totals?: RunTotals;
  sessionId?: string;
  rateLimit?: { resetsAt?: string; retryAfterSeconds?: number };
  /** The plan as the agent stated it in plan mode (ExitPlanMode input or final text). */
  planText?: string;
  logFile: string;
  /** Why the agent's log could not be written (e.g. the disk is full). */
  logError?: string;
}

async function runPhase(
  ctx: RunContext,
  wt: Worktree,
  notesDir: string,
  phase: "plan" | "work",
  plan: string | undefined,
  resumeSessionId: string | undefined,
): Promise<PhaseRun> {
  const { spec, deps } = ctx;
  const prompt = buildPrompt({
    repo: spec.repo,
    issue: spec.issue,
    title: spec.title,
    body: spec.body,
    comments: spec.comments,
    notesDir,
    branch: ctx.branch,
    phase,
    plan,
  });
  const fullPrompt = spec.extraPrompt ? `${prompt}\n\n${spec.extraPrompt}` : prompt;
  const logFile = join(ctx.artifactsDir, phase === "plan" ? PLAN_LOG_FILE : LOG_FILE);
  const invocation: AgentInvocation = {
    prompt: fullPrompt,
    model: spec.model,
    phase,
    cwd: wt.path,
    home: agentHomeDir(deps.workDir, spec.taskId),
  };
  if (resumeSessionId) invocation.resumeSessionId = resumeSessionId;
  if (deps.modelBaseUrl) invocation.modelBaseUrl = deps.modelBaseUrl;
  if (deps.agentEnv) invocation.env = { ...deps.agentEnv };
  let credential = deps.credential;
  // The credential as configured: the contained run hands the agent a gateway token in its place.
  if (credential) invocation.credential = { ...credential };
  await mkdir(invocation.home!, { recursive: true });
  // runAgent appends; one attempt's log per file keeps the posted tail about this run.
  await writeFile(logFile, "");
  // What the agent is about to load, measured before it starts (`fleet task <id> knowledge` shows it).
  const context = await buildContextManifest({
    coder: spec.coder,
    cwd: wt.path,
    home: invocation.home,
    prompt: fullPrompt,
  });

  let usage = emptyUsage();
  const byMessage = new Map<string, Partial<TokenUsage>>();
  let planText: string | undefined;
  const state: TaskState = phase === "plan" ? "planning" : "running";
  // The per-task ceiling counts the plan phase too; a run over it is stopped at once.
  const earlier = phase === "work" && ctx.result.planTotals ? totalTokens(ctx.result.planTotals.usage) : 0;
  const budgetStop = new AbortController();
  const onOuterAbort = () => budgetStop.abort();
  if (deps.signal?.aborted) budgetStop.abort();
  deps.signal?.addEventListener("abort", onOuterAbort, { once: true });
  let overBudget: string | undefined;
  const onEvent = (e: AgentEvent) => {
    if (e.type === "usage") {
      if (e.id) byMessage.set(e.id, e.usage);
      else usage = addUsage(usage, e.usage);
      const live = [...byMessage.values()].reduce<TokenUsage>((a, u) => addUsage(a, u), usage);
      void ctx.progress({ state, step: phase === "plan" ? "planning" : "agent working", usage: live });
      if (deps.perTaskLimits && !overBudget) {
        overBudget = overPerTaskBudget(deps.perTaskLimits, { tokens: earlier + totalTokens(live) });
        if (overBudget) budgetStop.abort();
      }
    } else if (e.type === "tool_use") {
      const input = e.input as { plan?: unknown } | undefined;
      if (e.name === "ExitPlanMode" && typeof input?.plan === "string") planText = input.plan;
      void ctx.progress({ state, step: `${phase === "plan" ? "planning" : "working"}: ${e.name}` });
    } else if (e.type === "result" && phase === "plan" && planText === undefined && e.summary) {
      planText = e.summary;
    }
  };
  let r: RunAgentResult;
  let spent: RunTotals | undefined;
  try {
    for (;;) {
      let scrub: ((line: string) => string) | undefined;
      // Built at the first line, once this run's gateway token is among the known secrets.
      const scrubLog = (line: string) => {
        scrub ??= secretRedactor(ctx.knownSecrets, { split: false });
        return scrub(line);
      };
      r = await runContainedAgent(
        deps.adapter,
        invocation,
        {
          timeoutMs: spec.timeouts.runMs,
          stallMs: spec.timeouts.stallMs,
          signal: budgetStop.signal,
          onEvent,
          logFile,
          scrubLog,
        },
        {
          sandbox: deps.sandbox ?? "bubblewrap",
          mounts: worktreeMounts(wt, notesDir, phase),
          gateway: ctx.gateway,
          onRunToken: (token) => addSecret(ctx, "this run's model-gateway token", token),
        },
      );
      // Reports name the credential as configured, not the variable it travelled in.
      const named = r.totals && credential ? { ...r.totals, credential: credential.name } : r.totals;
      spent = combineTotals(spent, named);
      if (r.reason !== "rate-limited" || !credential || !deps.rotateCredential || overBudget) break;
      const next = await deps.rotateCredential({ name: credential.name, rateLimit: r.rateLimit });
      if (!next) break;
      addSecret(ctx, `the credential ${next.name}`, next.value);
      const limited = credential.name;
      credential = next;
      invocation.credential = { ...next };
      if (r.sessionId) {
        // The same session goes on under the next credential; it already holds the task's prompt.
        invocation.resumeSessionId = r.sessionId;
        invocation.prompt = `The previous request was rate-limited; continue the task where you stopped.`;
      }
      void ctx.progress({ state, step: `rate-limited on ${limited}; continuing on ${next.name}` }, true);
    }
  } finally {
    deps.signal?.removeEventListener("abort", onOuterAbort);
  }
  // The first turn's real cost is the context's real cost: the agent has loaded everything, done nothing yet.
  const firstTurn = [...byMessage.values()][0];
  if (firstTurn) {
    context.firstTurnTokens =
      (firstTurn.input ?? 0) + (firstTurn.cacheRead ?? 0) + (firstTurn.cacheWrite ?? 0);
  }
  // The work phase's manifest replaces the plan phase's: it is the one that did the work.
  await writeContextManifest(ctx.artifactsDir, context);
  // The run's own totals, with the credential that did the last (finishing) part of the work.
  const totals = spent && credential ? { ...spent, credential: credential.name } : spent;
  if (deps.perTaskLimits && !overBudget && totals) {
    const tokens = earlier + totalTokens(totals.usage);
    const costUsd = (totals.costUsd ?? 0) + (phase === "work" ? (ctx.result.planTotals?.costUsd ?? 0) : 0);
    overBudget = overPerTaskBudget(deps.perTaskLimits, { tokens, costUsd });
  }
  // A work phase that finished over a dollar ceiling keeps its result; anything else over it stops.
  const stopped = overBudget !== undefined && (r.reason !== "completed" || phase === "plan");
  const kind: PhaseRun["kind"] = stopped ? "over-budget" : phaseKind(r.reason);
  return {
    kind,
    reason: kind === "over-budget" ? overBudget : kind === "ok" ? undefined : describeStop(kind, r, spec),
    totals,
    sessionId: r.sessionId,
    rateLimit: r.rateLimit,
    planText,
    logFile,
    ...(r.logError ? { logError: r.logError } : {}),
  };
}

function phaseKind(reason: RunAgentResult["reason"]): PhaseRun["kind"] {
  switch (reason) {
    case "completed":
      return "ok";
    case "timeout":
    case "stall":
    case "cancelled":
    case "rate-limited":
      return reason;
    default:
      return "failed";
  }
}

function describeStop(kind: PhaseRun["kind"], r: RunAgentResult, spec: TaskSpec): string {
  switch (kind) {
    case "timeout":
      return `The agent ran longer than ${Math.round(spec.timeouts.runMs / 1000)}s and was stopped (its whole process tree).`;
    case "stall":
      return `The agent produced no output for ${Math.round(spec.timeouts.stallMs / 1000)}s and was stopped (its whole process tree).`;
    case "cancelled":
      return "The run was cancelled; the agent and its process tree were stopped.";
    case "rate-limited":
      return `The model provider answered with a rate limit${r.rateLimit?.resetsAt ? ` (resets at ${r.rateLimit.resetsAt})` : ""}.`;
    default:
      return r.error
        ? `The agent failed: ${r.error}`
        : `The agent exited with code ${r.exitCode ?? "unknown"}.`;
  }
}

async function loadPlan(artifactsDir: string): Promise<{ plan?: string; state: SavedPlan }> {
  const read = (name: string) => readFile(join(artifactsDir, name), "utf8").catch(() => undefined);
  const plan = await read(PLAN_FILE);
  let state: SavedPlan = {};
  try {
    state = JSON.parse((await read(PLAN_STATE_FILE)) ?? "{}") as SavedPlan;
  } catch {
    state = {};
  }
  return { plan, state };
}

/** Records the outcome, posts the reports (never throwing) and tells the caller the final state. */
async function finish(
  ctx: RunContext,
  outcome: OutcomeKind,
  reason: string | undefined,
  run?: PhaseRun,
  notes?: AgentArtifacts,
): Promise<TaskOutcome> {
  const { result, reporter, redact } = ctx;
  result.outcome = outcome;
  const logNote = run?.logError
    ? `The agent's log could not be written (${run.logError}), so it is incomplete; free space on the worker's disk.`
    : undefined;
  const fullReason = logNote ? (reason ? `${reason} ${logNote}` : logNote) : reason;
  if (fullReason !== undefined) result.reason = redact(fullReason);
  if (run?.rateLimit) result.rateLimit = run.rateLimit;
  if (run?.sessionId && !result.sessionId) result.sessionId = run.sessionId;
  if (outcome !== "awaiting-approval") {
    try {
      const log = run ? await readLogTail(run.logFile) : "";
      await reporter.final({
        tokens:
          result.totals || result.planTotals
            ? {
                outcome: outcomeLine(result),
                totals: result.totals,
                planTotals: result.planTotals,
                earlierRuns: ctx.spec.earlierRuns,
                runKind: ctx.spec.runKind,
              }
            : undefined,
        run: {
          // The run report has no budget headline of its own; the reason says "stopped: ... budget".
          outcome: outcome === "over-budget" ? "failed" : outcome,
          reason: result.reason,
          pr: result.pr,
          summary: notes?.result?.summary,
          resultProblem:
            outcome === "pr-opened" || outcome === "no-changes" ? notes?.resultProblem : undefined,
          log,
          resetsAt: result.rateLimit?.resetsAt,
        },
      });
    } catch (error) {
      // The outcome stands even when GitHub refuses the report; the caller still learns it.
      result.reason = redact(
        `${result.reason ? `${result.reason} ` : ""}(Posting the report failed: ${(error as Error).message})`,
      );
    }
  }
  await ctx.progress(
    {
      state: STATE_OF[outcome],
      step: outcome,
      usage: result.totals?.usage,
      costUsd: result.totals?.costUsd,
    },
    true,
  );
  return result;
}

/**
 * A split task's run: the plan phase only (read-only, nothing committed); the plan it states (or its
 * RESULT.json) is handed back in `artifacts` for the caller to turn into sub-issues.
 */
async function runSplitPlanning(ctx: RunContext, wt: Worktree, notesDir: string): Promise<TaskOutcome> {
  await ctx.progress({ state: "planning", step: "splitting the issue (read-only)" }, true);
  const run = await runPhase(ctx, wt, notesDir, "plan", undefined, undefined);
  ctx.result.planTotals = run.totals;
  const notes = await readArtifacts(notesDir);
  await keepArtifacts(notesDir, ctx.artifactsDir);
  ctx.result.artifacts = { plan: run.planText ?? notes.plan, result: notes.rawResult };
  if (run.kind !== "ok") return await finish(ctx, run.kind, run.reason, run, notes);
  // The plan becomes issues, in public: it is checked like anything else that leaves the run.
  const plan = `${ctx.result.artifacts.plan ?? ""}\n${JSON.stringify(notes.rawResult ?? "")}`;
  const hit = scanOutgoing(plan, ctx.secrets);
  if (hit) {
    ctx.result.noRetry = true;
    ctx.result.artifacts = {};
    const reason = `Fleet created nothing: the split plan gives away a secret, ${hit.label} (${hit.form}).`;
    return await finish(ctx, "failed", reason, run, notes);
  }
  return await finish(ctx, "no-changes", "Split task: its plan is applied to the issue.", run);
}

/** More than a run report can show; whole lines only, so a secret is never cut in two. */
const LOG_TAIL_BYTES = 256 * 1024;

/** The end of the agent's log, without reading a large log whole. */
async function readLogTail(path: string): Promise<string> {
  try {
    const file = await open(path, "r");
    try {
      const { size } = await file.stat();
      const start = Math.max(0, size - LOG_TAIL_BYTES);
      const buf = Buffer.alloc(size - start);
      await file.read(buf, 0, buf.length, start);
      const text = buf.toString("utf8");
      return start === 0 ? text : text.slice(text.indexOf("\n") + 1);
    } finally {
      await file.close();
    }
  } catch {
    return "";
  }
}

function outcomeLine(r: TaskOutcome): string {
  switch (r.outcome) {
    case "pr-opened":
      return `pull request #${r.pr?.number} opened or updated`;
    case "no-changes":
      return "finished without changes; no pull request";
    default:
      return r.outcome;
  }
}
