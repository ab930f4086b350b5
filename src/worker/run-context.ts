import { join } from "node:path";
import type { AgentAdapter } from "../agents/types.ts";
import { taskBranchName } from "../core/branch.ts";
import type { CoderOptions } from "../core/coder-options.ts";
import {
  mergeRefusals,
  type NetworkPolicy,
  networkPolicyOf,
  type RefusedConnection,
} from "../core/network-policy.ts";
import type { RunOutcome } from "../core/outcomes.ts";
import { secretRedactor } from "../core/redact.ts";
import {
  DEFAULT_RESOURCE_LIMITS,
  type LimitsEnforcement,
  type ResourceLimits,
} from "../core/resource-limits.ts";
import type { GuardLimits } from "../core/run-guard.ts";
import type { RunKind, RunRecord } from "../core/run-history.ts";
import type { LabeledSecret } from "../core/secret-scan.ts";
import type { TaskContext, TaskQuestion, TaskState } from "../core/task.ts";
import type { RunTotals, TokenUsage } from "../core/usage.ts";
import type { PerTaskLimits } from "../economy/budgets.ts";
import { type GitHub, type IssueRef, parseRepoFullName } from "../github/port.ts";
import type { Tracker } from "../queue/tracker.ts";
import { createIssueReporter, type IssueReporter, type Progress, throttleProgress } from "./reports.ts";
import { forbiddenFolders, type SandboxMode, type SandboxMounts } from "./sandbox/bubblewrap.ts";
import type { RunPool } from "./sandbox/gateway-run.ts";
import type { ModelGateway } from "./sandbox/model-gateway.ts";
import { LOG_FILE, taskArtifactsDir } from "./workspace/artifacts.ts";
import type { GitAuth } from "./workspace/git.ts";
import type { SetupSpec } from "./workspace/setup-steps.ts";
import type { Worktree } from "./workspace/worktree.ts";

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
  /** `max_follow_ups`: the PR body and the run report say how many of the agent's follow-ups it left out. */
  maxFollowUps?: number;
  /** `allow_workflow_changes`: an agent's change may touch `.github/workflows/` (held back otherwise). */
  allowWorkflowChanges?: boolean;
  /** A review round's pull request: the round adds to it, and never opens another once it is merged or closed. */
  reviewPr?: number;
  /** `draft_pr`: a pull request this run opens is a draft until the run succeeds. */
  draftPr?: boolean;
  /** An agent review of this pull request: read-only, and the outcome is one GitHub review (runs/pr-review.ts). */
  prReview?: number;
  /** `ask_human.enabled`: the work phase offers the agent its ask_human tool (coders that take MCP servers). */
  askHuman?: { expireAfterHours: number; requestedBy?: string };
  /** The question an earlier run of the task asked, answered: this run resumes with the answer. */
  question?: TaskQuestion;
}

export interface WorkerDeps {
  /** GitHub with contents/issues/pulls write on the repo (local mode's records in local mode). */
  github: GitHub;
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
  /**
   * `home: inherit`: the worker user's HOME, whose files of this coder (INHERITED_HOME_PATHS) the
   * agent's sandbox shows read-only inside its private HOME. Absent: the private HOME only.
   */
  inheritHome?: string;
  /** `coders.<coder>.options` of the repository's config, checked for the coder and network when it was read. */
  coderOptions?: CoderOptions;
  /** A running model gateway; without one, the task starts its own for its duration. */
  gateway?: ModelGateway;
  /** What the agent may reach (`network`); default: Fleet's egress proxy with the package registries. */
  network?: NetworkPolicy;
  /** The repository's setup steps, run in the sandbox before the agent (`setup`, `setup_cache`, `setup_network`). */
  setup?: SetupSpec;
  /** Each run's resource limits (`limits`); default: DEFAULT_RESOURCE_LIMITS. */
  limits?: ResourceLimits;
  /** Names the operator maps to addresses for the egress proxy (`FLEET_EGRESS_HOSTS`). */
  egressHosts?: Readonly<Record<string, string>>;
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
   * The repository's tracker: the run's plan and report go into the task's tracking comment with its
   * next state edit. Without one (a run on its own), the reporter writes them at once.
   */
  tracker?: Tracker;
  /** Local mode: the plan's approval line and the PR body name `fleet` commands. */
  local?: boolean;
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
  /**
   * What else stops a run at the gateway: runaway detection and max_context_pct (default: the
   * config's defaults, DEFAULT_RUN_LIMITS).
   */
  runLimits?: Pick<GuardLimits, "repeatedToolCalls" | "idleTurns" | "maxContextPct">;
  /** The coder's pool at the gateway: a run moves off a credential near its limit, and past a 429. */
  credentialPool?: RunPool;
  /** The agent's context after each model turn (recorded on the task with the heartbeat). */
  onContext?: (context: TaskContext) => void;
  /**
   * Before anything leaves the run (a push, a PR): the worker checks it still holds the task, and a run
   * whose task was cancelled or taken over meanwhile is stopped (`signal` aborts) instead of publishing;
   * it throws when it cannot tell (the state unreadable), so the run publishes nothing.
   */
  confirmHeld?: () => Promise<void>;
  onProgress?: (p: {
    state: TaskState;
    step: string;
    usage?: TokenUsage;
    costUsd?: number | null;
  }) => void | Promise<void>;
}

/** The network a run has when the worker is told none: the egress proxy with the package registries. */
const DEFAULT_NETWORK = networkPolicyOf(undefined);

/** How a run ended (see core/outcomes.ts for the task state each one leads to). */
export type OutcomeKind = RunOutcome;

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
  /** The agent's own account of its usage (plan and work), kept beside the gateway's figures. */
  agentTotals?: RunTotals;
  /** What the run turned out to be when not the task's next run kind (a plan phase alone, a split): its row's label. */
  kind?: RunKind;
  /** The run's network and what its egress proxy refused (setup and every agent phase together). */
  network?: { mode: NetworkPolicy["mode"]; refused: RefusedConnection[] };
  /** How limits were enforced on the worker that ran it (`none`: said in the report). */
  limits?: LimitsEnforcement;
  /** Setup: how many steps ran, or whether the cache stood in for them. */
  setup?: { ran: number; cache?: "restored" | "saved" };
  /** `waiting`: the agent's question to a person (redacted, checked for secrets, bounded). */
  question?: string;
}

/** What a plan phase leaves for the work phase of a later call (after `/fleet approve`). */
export interface SavedPlan {
  sessionId?: string;
  totals?: RunTotals;
}
export const PLAN_STATE_FILE = "plan-phase.json";
export const PLAN_LOG_FILE = "plan.log";

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

export interface RunContext {
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
  /** Folders no sandbox of this run shows, nor any folder holding one. */
  forbidden: readonly string[];
  /** `draft_pr`: the draft this run opened at its start (its change goes to it at the end). */
  draftAtStart?: number;
}

/** What every contained process of a run shares: its network policy, limits and forbidden folders. */
export function runContainment(ctx: RunContext) {
  const { deps } = ctx;
  return {
    sandbox: deps.sandbox ?? "bubblewrap",
    network: deps.network ?? DEFAULT_NETWORK,
    limits: deps.limits ?? DEFAULT_RESOURCE_LIMITS,
    forbidden: ctx.forbidden,
    ...(deps.egressHosts ? { egressHosts: deps.egressHosts } : {}),
  } as const;
}

/** Connections a contained process of the run had refused: added to the run's report. */
export function noteRefused(ctx: RunContext, refused: readonly RefusedConnection[]) {
  const network = ctx.result.network ?? { mode: (ctx.deps.network ?? DEFAULT_NETWORK).mode, refused: [] };
  ctx.result.network = { ...network, refused: mergeRefusals(network.refused, refused) };
}

/** A secret the run learnt of (a gateway token, a rotated credential): redacted and checked from now on. */
export function addSecret(ctx: RunContext, label: string, value: string) {
  ctx.secrets.push({ label, value });
  ctx.knownSecrets.push(value);
}

export interface PhaseRun {
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

/** A run's context: its secrets, redaction, reporter, throttled progress and its result so far. */
export function createRunContext(spec: TaskSpec, deps: WorkerDeps): RunContext {
  const clock = deps.clock ?? (() => new Date());
  const artifactsDir = taskArtifactsDir(deps.workDir, spec.taskId);
  // Grows during the run: each per-run gateway token and each credential rotated to is added.
  const secrets = labeledSecretsOf(deps);
  const knownSecrets = secrets.map((s) => s.value);
  // The secrets' encoded forms are worked out once for each set of secrets, not at every text.
  let redactor: { of: string; redact: (text: string) => string } | undefined;
  const redact = (text: string) => {
    const of = knownSecrets.join("\0");
    if (redactor?.of !== of) redactor = { of, redact: secretRedactor(knownSecrets) };
    return redactor.redact(text);
  };
  const issueRef: IssueRef = { ...parseRepoFullName(spec.repo), issue_number: spec.issue };
  return {
    spec,
    deps,
    redact,
    reporter: createIssueReporter(deps.github, issueRef, spec.taskId, redact, deps.issueComments, {
      tracker: deps.tracker,
      describe: { coder: spec.coder, model: spec.model },
      ...(deps.local ? { local: true } : {}),
    }),
    progress: throttleProgress(deps.onProgress, clock),
    artifactsDir,
    branch: spec.branch ?? taskBranchName(spec.issue, spec.title),
    knownSecrets,
    secrets,
    result: { outcome: "failed", logPath: join(artifactsDir, LOG_FILE), artifacts: {} },
    forbidden: forbiddenFolders(deps.workDir),
  };
}
