import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { AgentEvent, AgentInvocation } from "../agents/types.ts";
import { type ChecklistItem, checklistAfter } from "../core/checklist.ts";
import { turnContextTokens } from "../core/context-windows.ts";
import { secretRedactor } from "../core/redact.ts";
import { DEFAULT_RESOURCE_LIMITS, limitHitReason } from "../core/resource-limits.ts";
import { sumRuns } from "../core/run-history.ts";
import type { TaskState } from "../core/task.ts";
import {
  addUsage,
  combineTotals,
  emptyUsage,
  type RunTotals,
  type TokenUsage,
  totalTokens,
} from "../core/usage.ts";
import { overPerTaskBudget } from "../economy/budgets.ts";
import { buildPrompt } from "./prompt.ts";
import { QUESTION_FILE, withAskHuman } from "./question.ts";
import {
  addSecret,
  noteRefused,
  type PhaseRun,
  PLAN_LOG_FILE,
  PLAN_STATE_FILE,
  type RunContext,
  runContainment,
  type SavedPlan,
  type TaskSpec,
  worktreeMounts,
} from "./run-context.ts";
import { inheritedHomeMounts, interpreterMounts, type SandboxMounts } from "./sandbox/bubblewrap.ts";
import { runContainedAgent } from "./sandbox/contained-run.ts";
import { type GatewayRun, gatewayRunFor, reportedTotals } from "./sandbox/gateway-run.ts";
import type { RunAgentResult } from "./sandbox/run-agent.ts";
import { agentHomeDir, LOG_FILE, PLAN_FILE } from "./workspace/artifacts.ts";
import { buildContextManifest, writeContextManifest } from "./workspace/context-manifest.ts";
import type { Worktree } from "./workspace/worktree.ts";

type Phase = "plan" | "work";

/** Where and what a phase runs: the worktree, the notes folder, the phase, the plan (work phase), the session to resume. */
export interface PhaseInput {
  wt: Worktree;
  notesDir: string;
  phase: Phase;
  plan?: string;
  resumeSessionId?: string;
  /** Added to the prompt after everything else (the answer to the agent's question). */
  addPrompt?: string;
}

/**
 * One agent phase, start to end: the prompt and what the agent will load (measured first), the agent
 * run under the run and stall timeouts with live progress and the per-task budget watched, and on a
 * rate limit the same session going on under the coder's next credential.
 */
export async function runPhase(ctx: RunContext, input: PhaseInput): Promise<PhaseRun> {
  const { phase } = input;
  const setup = await preparePhase(ctx, input);
  const tracker = trackPhase(ctx, phase);
  const { deps } = ctx;
  const gatewayRun =
    deps.credential && ctx.gateway && deps.adapter.upstream
      ? startGatewayRun(ctx, { wt: input.wt, phase, credential: deps.credential, tracker })
      : undefined;
  let ran: Awaited<ReturnType<typeof runRotating>>;
  try {
    ran = await runRotating(ctx, input, setup, tracker, gatewayRun);
  } finally {
    tracker.dispose();
    // The run leaves its credential however the agent ended (a throw too); its figures stay readable.
    gatewayRun?.dispose();
  }
  // The first turn's real cost is the context's real cost: the agent has loaded everything, done nothing yet.
  const first = tracker.firstTurn();
  if (first) setup.context.firstTurnTokens = turnContextTokens(first);
  // The work phase's manifest replaces the plan phase's: it is the one that did the work.
  await writeContextManifest(ctx.artifactsDir, setup.context);
  return phaseResult(ctx, phase, ran, tracker, setup.logFile);
}

/** The phase's prompt and invocation, a fresh log, and what the agent is about to load (measured now). */
async function preparePhase(ctx: RunContext, input: PhaseInput) {
  const { spec, deps } = ctx;
  const { wt, notesDir, phase, plan, resumeSessionId } = input;
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
  const fullPrompt = [prompt, spec.extraPrompt, input.addPrompt].filter(Boolean).join("\n\n");
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
  if (deps.coderOptions) invocation.options = deps.coderOptions;
  // The ask_human server runs on the worker's node: shown read-only to the agent when not a system one.
  const extraReadOnly: string[] = [];
  if (phase === "work" && spec.askHuman) {
    const options = await withAskHuman(spec.coder, invocation.options, join(notesDir, QUESTION_FILE));
    if (options !== invocation.options && options) {
      invocation.options = options;
      extraReadOnly.push(...(await interpreterMounts(process.execPath, ctx.forbidden)));
    }
  }
  // The credential as configured: the contained run hands the agent a gateway token in its place.
  if (deps.credential) invocation.credential = { ...deps.credential };
  // The run's HOME was made afresh when the run started (freshAgentHome); a phase keeps what setup left.
  await mkdir(invocation.home!, { recursive: true });
  // runAgent appends; one attempt's log per file keeps the posted tail about this run.
  await writeFile(logFile, "");
  // `home: inherit`: the user's own files of this coder, read-only over the private HOME (sandboxed runs only).
  const inheritHome = (deps.sandbox ?? "bubblewrap") === "bubblewrap" ? deps.inheritHome : undefined;
  const homeOverlay = inheritHome ? await inheritedHomeMounts(spec.coder, inheritHome, invocation.home!) : [];
  // What the agent is about to load (`fleet task <id> knowledge` shows it), its inherited files included.
  const context = await buildContextManifest({
    coder: spec.coder,
    cwd: wt.path,
    home: inheritHome ?? invocation.home,
    prompt: fullPrompt,
  });
  return { invocation, logFile, context, homeOverlay, extraReadOnly };
}

/**
 * The agent's events as they come: live tokens and steps on the tracking comment, the plan it
 * states, and the per-task ceiling (the plan phase counts too), which stops the run at once.
 */
function trackPhase(ctx: RunContext, phase: Phase) {
  const { deps } = ctx;
  let usage = emptyUsage();
  const byMessage = new Map<string, Partial<TokenUsage>>();
  let planText: string | undefined;
  // What the agent said since its last tool call: its final answer, for a coder whose result event
  // carries none (Codex, Gemini). Streamed parts join as they came.
  let textSinceTool = "";
  let checklist: ChecklistItem[] = [];
  let overBudget: string | undefined;
  // The gateway meters the wire: its figures, not the agent's, are held against the ceilings.
  let wireMetered = false;
  const state: TaskState = phase === "plan" ? "planning" : "running";
  const before = spentBefore(ctx, phase);
  const earlier = before ? totalTokens(before.usage) : 0;
  const stop = new AbortController();
  const onOuterAbort = () => stop.abort();
  if (deps.signal?.aborted) stop.abort();
  deps.signal?.addEventListener("abort", onOuterAbort, { once: true });
  const onEvent = (e: AgentEvent) => {
    if (e.type === "usage") {
      if (e.id) byMessage.set(e.id, e.usage);
      else usage = addUsage(usage, e.usage);
      const live = [...byMessage.values()].reduce<TokenUsage>((a, u) => addUsage(a, u), usage);
      void ctx.progress({ state, step: phase === "plan" ? "planning" : "agent working", usage: live });
      if (deps.perTaskLimits && !overBudget && !wireMetered) {
        overBudget = overPerTaskBudget(deps.perTaskLimits, { tokens: earlier + totalTokens(live) });
        if (overBudget) stop.abort();
      }
    } else if (e.type === "text") {
      textSinceTool += e.text;
    } else if (e.type === "tool_use") {
      textSinceTool = "";
      const input = e.input as { plan?: unknown } | undefined;
      if (e.name === "ExitPlanMode" && typeof input?.plan === "string") planText = input.plan;
      const next = checklistAfter(checklist, e.name, e.input);
      if (next) {
        checklist = next;
        // Best effort, throttled by the tracker: a failed edit never stops the run.
        void ctx.reporter.progress(checklist).catch(() => {});
      }
      void ctx.progress({ state, step: `${phase === "plan" ? "planning" : "working"}: ${e.name}` });
    } else if (e.type === "result" && phase === "plan" && planText === undefined) {
      const said = e.summary || textSinceTool.trim();
      if (said) planText = said;
    }
  };
  return {
    state,
    earlier,
    onEvent,
    signal: stop.signal,
    get overBudget() {
      return overBudget;
    },
    set overBudget(reason: string | undefined) {
      overBudget = reason;
    },
    get planText() {
      return planText;
    },
    /** The gateway stops the run with `reason` (a ceiling, a runaway, the context limit). */
    stopAt(reason: string) {
      overBudget ??= reason;
      stop.abort();
    },
    meteredAtGateway() {
      wireMetered = true;
    },
    firstTurn: () => [...byMessage.values()][0],
    dispose: () => deps.signal?.removeEventListener("abort", onOuterAbort),
  };
}

/** The agent, contained; on a rate limit, again on the coder's next free credential, resuming its session. */
async function runRotating(
  ctx: RunContext,
  { wt, notesDir, phase }: PhaseInput,
  setup: Awaited<ReturnType<typeof preparePhase>>,
  tracker: ReturnType<typeof trackPhase>,
  gatewayRun: GatewayRun | undefined,
): Promise<{
  r: RunAgentResult;
  spent?: RunTotals;
  credential?: { name: string; value: string };
  gatewayRun?: GatewayRun;
}> {
  const { spec, deps } = ctx;
  const { invocation } = setup;
  let credential = deps.credential;
  let spent: RunTotals | undefined;
  for (;;) {
    let scrub: ((line: string) => string) | undefined;
    // Built at the first line, once this run's gateway token is among the known secrets.
    const scrubLog = (line: string) => {
      scrub ??= secretRedactor(ctx.knownSecrets, { split: false });
      return scrub(line);
    };
    const r = await runContainedAgent(
      deps.adapter,
      invocation,
      {
        timeoutMs: spec.timeouts.runMs,
        stallMs: spec.timeouts.stallMs,
        signal: tracker.signal,
        onEvent: tracker.onEvent,
        logFile: setup.logFile,
        scrubLog,
      },
      {
        ...runContainment(ctx),
        mounts: withReadOnly(
          { ...worktreeMounts(wt, notesDir, phase), homeOverlay: setup.homeOverlay },
          setup.extraReadOnly,
        ),
        gateway: ctx.gateway,
        onRunToken: (token) => addSecret(ctx, "this run's model-gateway token", token),
        ...(gatewayRun ? { gatewayRun } : {}),
      },
    );
    noteRefused(ctx, r.refused);
    // Reports name the credential as configured, not the variable it travelled in.
    spent = combineTotals(
      spent,
      r.totals && credential ? { ...r.totals, credential: credential.name } : r.totals,
    );
    // At the gateway, the run went on (or ended) on the credential it holds now.
    if (gatewayRun) credential = gatewayRun.credential;
    const done = { r, spent, credential, ...(gatewayRun ? { gatewayRun } : {}) };
    if (r.reason !== "rate-limited" || !credential || !deps.rotateCredential || tracker.overBudget)
      return done;
    const next = await deps.rotateCredential({ name: credential.name, rateLimit: r.rateLimit });
    if (!next) return done;
    addSecret(ctx, `the credential ${next.name}`, next.value);
    const limited = credential.name;
    credential = next;
    invocation.credential = { ...next };
    gatewayRun?.use(next);
    if (r.sessionId) {
      // The same session goes on under the next credential; it already holds the task's prompt.
      invocation.resumeSessionId = r.sessionId;
      invocation.prompt = `The previous request was rate-limited; continue the task where you stopped.`;
    }
    void ctx.progress(
      { state: tracker.state, step: `rate-limited on ${limited}; continuing on ${next.name}` },
      true,
    );
  }
}

/**
 * The phase at the gateway: its credentials (the pool's, when there is one), its ceilings and runaway
 * limits, the worktree watched between turns; a stop aborts the agent with the reason.
 */
function startGatewayRun(
  ctx: RunContext,
  run: {
    wt: Worktree;
    phase: Phase;
    credential: { name: string; value: string };
    tracker: ReturnType<typeof trackPhase>;
  },
): GatewayRun {
  const { deps } = ctx;
  const earlier = spentBefore(ctx, run.phase);
  run.tracker.meteredAtGateway();
  return gatewayRunFor(deps, {
    phase: run.phase,
    ...(earlier ? { earlier } : {}),
    credential: run.credential,
    model: ctx.spec.model,
    worktree: run.wt,
    onStop: (reason) => run.tracker.stopAt(reason),
    onCredential: (c) => addSecret(ctx, `the credential ${c.name}`, c.value),
    onTurn: (guard) => {
      if (guard.context) deps.onContext?.(guard.context);
      const step = run.phase === "plan" ? "planning" : "agent working";
      void ctx.progress({ state: run.tracker.state, step, usage: guard.usage, costUsd: guard.costUsd });
    },
  });
}

/**
 * What the task spent before this phase, held with it against the per-task ceilings: its earlier runs
 * (a plan run before approval, failed attempts, review rounds) and, for a work phase, this run's plan phase.
 */
function spentBefore(ctx: RunContext, phase: Phase): RunTotals | undefined {
  const earlierRuns = ctx.spec.earlierRuns?.length ? sumRuns(ctx.spec.earlierRuns) : undefined;
  return combineTotals(earlierRuns, phase === "work" ? ctx.result.planTotals : undefined);
}

/** How the phase ended, with its totals (under the credential that finished it) and the ceiling checked once more. */
function phaseResult(
  ctx: RunContext,
  phase: Phase,
  ran: Awaited<ReturnType<typeof runRotating>>,
  tracker: ReturnType<typeof trackPhase>,
  logFile: string,
): PhaseRun {
  const { r, spent, credential, gatewayRun } = ran;
  const { deps, spec } = ctx;
  const agentTotals = spent && credential ? { ...spent, credential: credential.name } : spent;
  // The gateway's figures are the report's; the agent's own account is kept beside them.
  const metered = gatewayRun?.totals(spec.model, agentTotals?.durationMs ?? 0);
  if (metered) ctx.result.agentTotals = combineTotals(ctx.result.agentTotals, agentTotals);
  const totals = reportedTotals(metered, agentTotals);
  if (deps.perTaskLimits && !tracker.overBudget && totals) {
    const tokens = tracker.earlier + totalTokens(totals.usage);
    const costUsd = (totals.costUsd ?? 0) + (spentBefore(ctx, phase)?.costUsd ?? 0);
    tracker.overBudget = overPerTaskBudget(deps.perTaskLimits, { tokens, costUsd });
  }
  if (r.reason === "limit" && r.limitHit) {
    // Running it again would reach the same limit: a person raises it, or changes the task.
    ctx.result.noRetry = true;
    const reason = limitHitReason(r.limitHit, deps.limits ?? DEFAULT_RESOURCE_LIMITS);
    return { kind: "failed", reason, totals, sessionId: r.sessionId, planText: tracker.planText, logFile };
  }
  // A work phase that finished over a dollar ceiling keeps its result; anything else over it stops.
  const stopped = tracker.overBudget !== undefined && (r.reason !== "completed" || phase === "plan");
  const kind: PhaseRun["kind"] = stopped ? "over-budget" : phaseKind(r.reason);
  return {
    kind,
    reason:
      kind === "over-budget" ? tracker.overBudget : kind === "ok" ? undefined : describeStop(kind, r, spec),
    totals,
    sessionId: r.sessionId,
    rateLimit: r.rateLimit,
    planText: tracker.planText,
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

export async function loadPlan(artifactsDir: string): Promise<{ plan?: string; state: SavedPlan }> {
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

const withReadOnly = (mounts: SandboxMounts, extra: readonly string[]): SandboxMounts =>
  extra.length ? { ...mounts, readOnly: [...mounts.readOnly, ...extra] } : mounts;
