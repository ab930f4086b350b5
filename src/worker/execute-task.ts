import type { AgentAdapter } from "../agents/types.ts";
import type { FleetConfig } from "../core/config.ts";
import { transition } from "../core/lifecycle.ts";
import { choosePromptText } from "../core/prompt-pin.ts";
import { appendRun, runKindOf } from "../core/run-history.ts";
import { retryNotBefore, retryReason } from "../core/scheduler.ts";
import type { Task, TaskState } from "../core/task.ts";
import { combineTotals } from "../core/usage.ts";
import { perTaskLimits } from "../economy/budgets.ts";
import { createCredentialRotation } from "../economy/rotation.ts";
import type { GitHubClient, RepoRef } from "../github/client.ts";
import { getRepoRole } from "../github/permissions.ts";
import type { RepoQueue } from "../queue/repo-queue.ts";
import type { Tracker } from "../queue/tracker.ts";
import { hasMarker, trackingMarker } from "../render/markers.ts";
import { recordLedger } from "../state/doc.ts";
import { pinnedTextOf } from "../state/mirror.ts";
import type { StateStore } from "../state/store.ts";
import { postAbComparisonIfDue, resultSummaryOf } from "./ab-comparison.ts";
import { fileDiscoveredWork } from "./discovered-work.ts";
import type { GitAuth } from "./git.ts";
import { runRebase } from "./rebase-run.ts";
import { runTask, type TaskOutcome } from "./run-task.ts";
import type { SandboxMode } from "./sandbox.ts";
import { applySplitOutcome, specialRunFor } from "./special-runs.ts";

export interface ExecuteDeps {
  repo: RepoRef;
  octokit: GitHubClient;
  store: StateStore;
  queue: RepoQueue;
  /** The queue's tracker, told the tracking comment's id when the issue's comments are listed anyway. */
  tracker?: Tracker;
  config: FleetConfig;
  cloneUrl: string;
  gitAuth?: GitAuth;
  workDir: string;
  adapterFor: (coder: string) => AgentAdapter | undefined;
  /** The credential for a coder: its name and value, looked up by name in the worker's environment. */
  credentialFor?: (coder: string) => { name: string; value: string } | undefined;
  /**
   * A credential's value by name (e.g. `process.env[name]` at the edge). With it, a run draws on the
   * coder's whole pool (`coders.<c>.credentials`) and moves on to the next credential on a rate limit.
   */
  credentialValue?: (name: string) => string | undefined;
  modelBaseUrl?: string;
  agentEnv?: Record<string, string>;
  /** How agents are contained; default: `config.sandbox`. */
  sandbox?: SandboxMode;
  /** Lease holder: this worker or Actions run. */
  holder: string;
  clock?: () => Date;
  signal?: AbortSignal;
  heartbeatMs?: number;
  leaseTtlMs?: number;
  secrets?: string[];
  log?: (message: string) => void;
}

const UNCLAIMED = /^dispatch:/;

/** Claims a dispatched task's lease for `holder` (compare-and-swap); undefined when someone else has it. */
export async function claimTask(...args: Parameters<typeof claimTaskState>): Promise<Task | undefined> {
  return (await claimTaskState(...args))?.task;
}

/** `claimTask`, with the beads mirror as the claim saw it (the task's pinned prompt is its bead). */
export async function claimTaskState(
  store: StateStore,
  taskId: string,
  holder: string,
  now: Date,
  ttlMs: number,
  /** The state the worker starts in (planning or running): claimed and started in one commit. */
  startIn?: (task: Task) => "planning" | "running",
) {
  const result = await store.update(({ doc }) => {
    const task = doc.tasks[taskId];
    if (task?.state !== "dispatched" || !task.lease) return null;
    if (task.lease.holder !== holder && !UNCLAIMED.test(task.lease.holder)) return null;
    const at = now.toISOString();
    const lease = {
      ...task.lease,
      holder,
      heartbeatAt: at,
      expiresAt: new Date(now.getTime() + ttlMs).toISOString(),
    };
    const first = startIn?.(task);
    const started = first
      ? { ...transition(task, first, { now: at }), lease }
      : { ...task, lease, updatedAt: at };
    return {
      doc: { ...doc, tasks: { ...doc.tasks, [taskId]: started } },
      message: `claim gh-${task.issue} (${taskId}) by ${holder} (slot ${task.lease.slot})${first ? `, ${first}` : ""}`,
    };
  });
  const task = result.snapshot.doc.tasks[taskId];
  return result.applied && task ? { task, beads: result.snapshot.beads } : undefined;
}

/**
 * Runs one dispatched task to its end, as its lease holder, and records every transition in
 * repository state: the one path both the local worker and the Action take.
 * 1. claim the lease; 2. read the issue (collaborators' comments only are trusted);
 * 3. heartbeat while running, stopping the agent if the task is cancelled or the lease is lost;
 * 4. run the task; 5. record the outcome, the ledger, and free the slot; 6. schedule what is next.
 */
export async function executeTask(taskId: string, deps: ExecuteDeps): Promise<TaskOutcome | undefined> {
  const clock = deps.clock ?? (() => new Date());
  const ttl = deps.leaseTtlMs ?? 15 * 60_000;
  const log = deps.log ?? (() => {});

  // 1.
  // A rebase run has no plan phase.
  const startIn = (t: Task) => (deps.config.plan_phase && !t.approved && !t.rebase ? "planning" : "running");
  const claimed = await claimTaskState(deps.store, taskId, deps.holder, clock(), ttl, startIn);
  if (!claimed) return undefined;
  const { task } = claimed;
  const adapter = deps.adapterFor(task.coder);
  if (!adapter) {
    await deps.queue.move(task.issue, "failed", {
      taskId,
      reason: `no adapter for coder "${task.coder}" on this worker`,
    });
    return undefined;
  }

  // 2. The issue's text as it was approved (pinned when queued), whatever was edited since.
  const { data: issue } = await deps.octokit.rest.issues.get({ ...deps.repo, issue_number: task.issue });
  const prompt = choosePromptText({
    task,
    issue: { title: issue.title, body: issue.body ?? "" },
    bead: pinnedTextOf(claimed.beads, task.id),
  });
  if (prompt.source === "missing") {
    await deps.queue.move(task.issue, "failed", { taskId, reason: prompt.note });
    return undefined;
  }
  if (prompt.note) log(`${task.id}: ${prompt.note}`);
  const comments = await deps.octokit.paginate(deps.octokit.rest.issues.listComments, {
    ...deps.repo,
    issue_number: task.issue,
    per_page: 100,
  });
  const tracking = comments.find((c) => c.user?.type === "Bot" && hasMarker(c.body, trackingMarker(task.id)));
  if (tracking) deps.tracker?.remember(task.id, tracking.id);
  const roles = new Map<string, boolean>();
  const trusted = async (login: string, type?: string) => {
    if (type === "Bot") return false;
    if (!roles.has(login)) {
      const role = await getRepoRole(deps.octokit, deps.repo, login);
      roles.set(login, ["admin", "maintain", "write"].includes(role));
    }
    return roles.get(login)!;
  };
  const promptComments = [];
  for (const c of comments) {
    const login = c.user?.login ?? "ghost";
    if (c.user?.type === "Bot") continue;
    promptComments.push({ author: login, body: c.body ?? "", trusted: await trusted(login, c.user?.type) });
  }

  const special = await specialRunFor(task, issue.labels ?? [], deps);

  // 3.
  const abort = new AbortController();
  const onOuterAbort = () => abort.abort();
  deps.signal?.addEventListener("abort", onOuterAbort);
  let lost: string | undefined;
  const heartbeat = setInterval(
    () =>
      void deps.store
        .update(({ doc }) => {
          const t = doc.tasks[taskId];
          if (!t?.lease || t.lease.holder !== deps.holder) {
            lost = t?.state === "cancelled" ? "cancelled" : "lease lost";
            abort.abort();
            return null;
          }
          const now = clock();
          const lease = {
            ...t.lease,
            heartbeatAt: now.toISOString(),
            expiresAt: new Date(now.getTime() + ttl).toISOString(),
          };
          return {
            doc: { ...doc, tasks: { ...doc.tasks, [taskId]: { ...t, lease } } },
            message: `heartbeat gh-${t.issue} (${taskId}) by ${deps.holder}`,
          };
        })
        .catch((e) => log(`heartbeat of ${taskId} failed: ${(e as Error).message}`)),
    // A third of the lease: two missed beats are tolerated, and a beat is a commit, so not more often.
    deps.heartbeatMs ?? ttl / 3,
  );
  heartbeat.unref?.();

  // 4. A credential from the coder's pool; when every one is cooling the task waits for the first reset.
  const rotation = credentialPool(task.coder, deps, clock);
  const first = await rotation.first();
  if (first.kind === "all-cooling") {
    clearInterval(heartbeat);
    deps.signal?.removeEventListener("abort", onOuterAbort);
    const outcome: TaskOutcome = {
      outcome: "rate-limited",
      reason: `every credential of ${task.coder} is rate-limited; the task waits for the first reset`,
      rateLimit: { resetsAt: first.resetAt },
      logPath: "",
      artifacts: {},
    };
    await recordOutcome(task, outcome, deps, lost);
    return outcome;
  }
  let current: TaskState = task.state;
  const planPhase = deps.config.plan_phase && !task.approved;
  let outcome: TaskOutcome;
  // A rebase run of an open PR (after a merge elsewhere, or `fleet:rebase`) takes the same worker deps.
  const rebase = task.rebase && task.pr !== undefined ? { request: task.rebase, pr: task.pr } : undefined;
  const run: typeof runTask = rebase
    ? (spec, workerDeps) => runRebase({ ...spec, pr: rebase.pr, request: rebase.request }, workerDeps)
    : runTask;
  try {
    outcome = await run(
      {
        taskId,
        repo: `${deps.repo.owner}/${deps.repo.repo}`,
        issue: task.issue,
        title: prompt.title,
        body: prompt.body,
        comments: promptComments,
        coder: task.coder,
        model: task.model,
        branch: task.branch,
        // A review-loop run continues the PR's work: no new plan.
        planPhase: deps.config.plan_phase && !task.instructions,
        planApproval: deps.config.plan_approval,
        approved: task.approved ?? !planPhase,
        timeouts: {
          runMs: deps.config.timeouts.run_minutes * 60_000,
          stallMs: deps.config.timeouts.stall_minutes * 60_000,
        },
        attempt: task.attempts,
        split: special.split,
        extraPrompt: special.extraPrompt,
        earlierRuns: task.runs,
        runKind: runKindOf(task),
      },
      {
        octokit: deps.octokit,
        cloneUrl: deps.cloneUrl,
        gitAuth: deps.gitAuth,
        workDir: deps.workDir,
        adapter,
        credential: first.kind === "credential" ? first.credential : undefined,
        rotateCredential: rotation.rotate,
        perTaskLimits: perTaskLimits(deps.config.budgets, task.coder),
        modelBaseUrl: deps.modelBaseUrl,
        agentEnv: deps.agentEnv,
        sandbox: deps.sandbox ?? deps.config.sandbox,
        clock,
        signal: abort.signal,
        secrets: deps.secrets,
        // Listed above for the prompt: the final report finds its earlier comment here, not by another listing.
        issueComments: comments,
        onProgress: async (p) => {
          if (p.state !== current && (p.state === "planning" || p.state === "running")) {
            const from = current;
            current = p.state;
            await deps.queue.move(task.issue, p.state, { taskId, from: [from] });
          }
        },
      },
    );
  } finally {
    clearInterval(heartbeat);
    deps.signal?.removeEventListener("abort", onOuterAbort);
  }

  if (special.split) await applySplitOutcome(task, outcome, deps);
  // The agent's follow-ups become issues discovered from this task.
  else await fileDiscoveredWork(task, outcome, deps);

  // 5. Out of credentials: the task waits until the first one of the pool is free again.
  const poolReset = outcome.outcome === "rate-limited" ? rotation.resetAt() : undefined;
  if (poolReset) outcome.rateLimit = { ...outcome.rateLimit, resetsAt: poolReset };
  await recordOutcome(task, outcome, deps, lost);
  // The last side of an A/B run to finish posts the comparison.
  await postAbComparisonIfDue(deps, task.issue).catch((e) =>
    log(`A/B comparison of #${task.issue} failed: ${(e as Error).message}`),
  );
  return outcome;
}

async function recordOutcome(task: Task, outcome: TaskOutcome, deps: ExecuteDeps, lost: string | undefined) {
  const clock = deps.clock ?? (() => new Date());
  const totals = combineTotals(outcome.planTotals, outcome.totals);
  const patch: Partial<Task> = {};
  if (totals) patch.totals = totals;
  if (totals) patch.runs = appendRun(task.runs, { kind: runKindOf(task), at: clock().toISOString(), totals });
  if (outcome.pr) patch.pr = outcome.pr.number;
  // A rebase run writes no RESULT.json: the work run's result stays the task's.
  if (!task.rebase) patch.result = resultSummaryOf(task.attempts, outcome.artifacts.result);
  // Review instructions are used once; a later review asks again.
  if (task.instructions) patch.instructions = undefined;
  const reason = outcome.reason;
  const retriesLeft = task.attempts <= deps.config.retries.max;
  let to: TaskState;
  switch (outcome.outcome) {
    case "pr-opened":
      to = "pr-open";
      break;
    case "no-changes":
      to = "done";
      break;
    case "awaiting-approval":
      to = "awaiting-approval";
      break;
    case "rate-limited":
      to = "rate-limited";
      break;
    case "over-budget":
      // Running it again would spend the same budget again.
      to = "failed";
      break;
    case "cancelled":
      // A cancel from the issue already moved the task; a worker shutting down puts it back in the queue.
      to = lost === "cancelled" ? "cancelled" : "queued";
      break;
    default:
      to = retriesLeft && !outcome.noRetry ? "queued" : "failed";
  }
  const retrying = to === "queued" && outcome.outcome !== "cancelled";
  const now = clock().toISOString();
  const resetAt = retrying
    ? retryNotBefore(now, task.attempts, deps.config.retries.backoff_seconds)
    : (outcome.rateLimit?.resetsAt ??
      (outcome.rateLimit?.retryAfterSeconds !== undefined
        ? new Date(clock().getTime() + outcome.rateLimit.retryAfterSeconds * 1000).toISOString()
        : undefined));
  const why = retrying
    ? retryReason(
        `attempt ${task.attempts} ended (${outcome.outcome}${reason ? `: ${reason}` : ""})`,
        resetAt,
      )
    : reason;
  // The rebase request is used once, unless the run is retried.
  if (task.rebase && to !== "queued" && to !== "rate-limited") patch.rebase = undefined;
  await deps.queue.move(task.issue, to, {
    taskId: task.id,
    // The PR's own webhook may have moved the task to pr-open already: then only the fields are added.
    from: ["dispatched", "planning", "running", to],
    reason: why,
    resetAt,
    patch,
    // The run's line in the token ledger goes into the same commit.
    alsoDoc: totals
      ? (doc) =>
          recordLedger(doc, {
            day: clock().toISOString().slice(0, 10),
            coder: task.coder,
            usage: totals.usage,
            costUsd: totals.costUsd,
          })
      : undefined,
  });
}

/** The coder's credential pool: configured names (plus `credentialFor`'s own, when it is not one of them). */
function credentialPool(coder: string, deps: ExecuteDeps, clock: () => Date) {
  const names = [...(deps.config.coders[coder]?.credentials ?? [])];
  const given = deps.credentialFor?.(coder);
  if (given && !names.includes(given.name)) names.push(given.name);
  const secretOf =
    deps.credentialValue ?? ((name: string) => (given && given.name === name ? given.value : undefined));
  return createCredentialRotation({
    store: deps.store,
    coder,
    names,
    secretOf,
    clock,
    fallbackSeconds: deps.config.retries.backoff_seconds,
    log: deps.log,
  });
}
