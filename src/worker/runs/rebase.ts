import { access, mkdir, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { AgentInvocation } from "../../agents/types.ts";
import { redactSecrets } from "../../core/redact.ts";
import { DEFAULT_RESOURCE_LIMITS } from "../../core/resource-limits.ts";
import { type RunRecord, sumRuns } from "../../core/run-history.ts";
import type { LabeledSecret } from "../../core/secret-scan.ts";
import type { RebaseRequest } from "../../core/task.ts";
import { combineTotals, type RunTotals } from "../../core/usage.ts";
import { parseRepoFullName } from "../../github/port.ts";
import { renderRebased, renderRebaseFailed, renderRebaseNotNeeded } from "../../render/rebase-comment.ts";
import { labeledSecretsOf, type TaskOutcome, type WorkerDeps, worktreeMounts } from "../3-attempt.ts";
import { assertFleetBranch } from "../4-publish.ts";
import { freshAgentHome } from "../sandbox/agent-home.ts";
import { forbiddenFolders, inheritedHomeMounts } from "../sandbox/bubblewrap.ts";
import { runContainedAgent } from "../sandbox/contained-run.ts";
import { gatewayRunFor, reportedTotals } from "../sandbox/gateway-run.ts";
import { type ModelGateway, startModelGateway } from "../sandbox/model-gateway.ts";
import { checkOutgoing } from "../sandbox/outgoing-check.ts";
import { agentHomeDir, readAgentFile, taskArtifactsDir } from "../workspace/artifacts.ts";
import { gitIn } from "../workspace/git.ts";
import { addWorktree, cleanAfterAgent, removeWorktree, type Worktree } from "../workspace/worktree.ts";

export interface RebaseSpec {
  taskId: string;
  /** "owner/name". */
  repo: string;
  issue: number;
  title: string;
  coder: string;
  model: string;
  pr: number;
  request: RebaseRequest;
  timeouts: { runMs: number; stallMs: number };
  /** The task's earlier runs: counted with this one against the per-task ceilings. */
  earlierRuns?: RunRecord[];
}

export type RebaseDeps = Pick<
  WorkerDeps,
  | "github"
  | "cloneUrl"
  | "gitAuth"
  | "workDir"
  | "adapter"
  | "credential"
  | "modelBaseUrl"
  | "agentEnv"
  | "signal"
  | "secrets"
  | "sandbox"
  | "inheritHome"
  | "coderOptions"
  | "gateway"
  | "perTaskLimits"
  | "runLimits"
  | "credentialPool"
  | "confirmHeld"
  | "clock"
  | "network"
  | "limits"
  | "egressHosts"
>;

/** At most this many conflicted commits are handed to the agent in one rebase. */
const MAX_AGENT_STEPS = 5;
export const REBASE_LOG_FILE = "rebase.log";
const MARKER = /^(<{7}|>{7})( |$)|^={7}$/m;

class RebaseFailed extends Error {
  readonly conflicts: string[];
  constructor(message: string, conflicts: string[]) {
    super(message);
    this.conflicts = conflicts;
  }
}

/**
 * A rebase run of a task whose pull request is open: in the task's own worktree, a plain `git rebase`
 * of the PR branch onto its base; at each commit that conflicts, the task's agent resolves the files
 * git names (and must leave no conflict markers); then a force-push with lease, so a push made to the
 * branch meanwhile is never overwritten. When the request came from a merge elsewhere, a branch that
 * still merges cleanly is left alone. Any failure leaves the branch as it was and tells the PR which
 * files conflict and what to do. The task stays `pr-open` either way (outcome `pr-opened`), except
 * for a cancel, or a PR that was merged (done) or closed meanwhile.
 */
export async function runRebase(spec: RebaseSpec, deps: RebaseDeps): Promise<TaskOutcome> {
  const ref = parseRepoFullName(spec.repo);
  const artifactsDir = taskArtifactsDir(deps.workDir, spec.taskId);
  const logPath = join(artifactsDir, REBASE_LOG_FILE);
  const outcome: TaskOutcome = { outcome: "pr-opened", logPath, artifacts: {} };
  await mkdir(artifactsDir, { recursive: true });
  await writeFile(logPath, "");

  const pr = await deps.github.pulls.get(ref, spec.pr);
  if (pr.state !== "open") {
    outcome.outcome = pr.merged ? "no-changes" : "failed";
    outcome.noRetry = true;
    outcome.reason = `Pull request #${spec.pr} was ${pr.merged ? "merged" : "closed"} before the rebase ran; nothing to rebase.`;
    return outcome;
  }
  outcome.pr = { number: pr.number, url: pr.html_url, head: pr.head.ref };
  // Grows with each gateway token handed to the agent.
  const labeled = labeledSecretsOf(deps);
  const secrets = labeled.map((s) => s.value);
  const redact = (text: string) => redactSecrets(text, secrets);
  const run: RebaseState = {
    spec,
    deps,
    view: { why: spec.request.why, branch: pr.head.ref, base: pr.base.ref },
    logPath,
    artifactsDir,
    labeled,
    onRunToken: (token) => {
      labeled.push({ label: "this run's model-gateway token", value: token });
      secrets.push(token);
    },
    conflicts: [],
    resolved: new Set(),
    comment: (body) =>
      deps.github.issues.createComment(ref, spec.pr, redact(body)).then(
        () => undefined,
        () => undefined,
      ),
  };
  let wt: Worktree | undefined;
  let ownGateway: ModelGateway | undefined;
  try {
    assertFleetBranch(run.view.branch);
    if (!deps.gateway) ownGateway = await startModelGateway();
    run.gateway = deps.gateway ?? ownGateway;
    wt = await addWorktree(
      deps.workDir,
      { repo: spec.repo, cloneUrl: deps.cloneUrl, auth: deps.gitAuth },
      spec.taskId,
      run.view.branch,
    );
    if (!wt.continued)
      throw new RebaseFailed(`The branch \`${run.view.branch}\` is not on GitHub any more.`, []);
    // A HOME Fleet controls: nothing the task's earlier runs left there.
    await freshAgentHome(agentHomeDir(deps.workDir, spec.taskId));
    await rebaseAndPush(run, wt, outcome);
    return outcome;
  } catch (error) {
    if (run.totals) outcome.totals = run.totals;
    const reason = redact(error instanceof Error ? error.message : String(error));
    if (deps.signal?.aborted) {
      outcome.outcome = "cancelled";
      outcome.reason = reason;
      return outcome;
    }
    outcome.reason = `Rebase failed: ${reason}`;
    const conflicts = error instanceof RebaseFailed ? error.conflicts : run.conflicts;
    await run.comment(renderRebaseFailed({ ...run.view, conflicts, reason, totals: run.totals }));
    return outcome;
  } finally {
    if (wt) {
      // Fleet's git runs in the checkout only once what the agent left is cleared and it is still this task's.
      const own = await cleanAfterAgent(wt).then(
        () => true,
        () => false,
      );
      if (own) await gitIn(wt, ["rebase", "--abort"], { okCodes: [1, 128] }).catch(() => undefined);
      await removeWorktree(wt);
    }
    await ownGateway?.close();
  }
}

/** What the task spent before this step of its rebase: its earlier runs and the rebase's earlier steps. */
const spentBefore = (spec: RebaseSpec, steps: RunTotals | undefined): RunTotals | undefined =>
  combineTotals(spec.earlierRuns?.length ? sumRuns(spec.earlierRuns) : undefined, steps);

/** What a rebase run knows as it goes: its request, its secrets, the files that conflicted and were resolved. */
interface RebaseState {
  spec: RebaseSpec;
  deps: RebaseDeps;
  view: { why: string; branch: string; base: string };
  logPath: string;
  artifactsDir: string;
  labeled: LabeledSecret[];
  gateway?: ModelGateway;
  onRunToken: (token: string) => void;
  totals?: RunTotals;
  conflicts: string[];
  resolved: Set<string>;
  comment: (body: string) => Promise<void>;
}

/**
 * The branch onto its base: nothing when it already contains the base (or, when only a conflict asks
 * for it, still merges cleanly); else the rebase with the agent's help, checked, pushed with lease.
 */
async function rebaseAndPush(run: RebaseState, wt: Worktree, outcome: TaskOutcome): Promise<void> {
  const { spec, deps, view } = run;
  const baseSha = (await gitIn(wt, ["rev-parse", `refs/remotes/origin/${view.base}^{commit}`])).stdout.trim();
  const based = await gitIn(wt, ["merge-base", "--is-ancestor", baseSha, "HEAD"], { okCodes: [1] });
  const clean = await gitIn(
    wt,
    ["merge-tree", "--write-tree", "--name-only", "--no-messages", "HEAD", baseSha],
    {
      okCodes: [1],
    },
  );
  if (based.exitCode === 0 || (spec.request.onlyIfConflicting && clean.exitCode === 0)) {
    outcome.reason =
      based.exitCode === 0
        ? `\`${view.branch}\` already contains \`${view.base}\`; nothing to rebase.`
        : `\`${view.branch}\` still merges cleanly into \`${view.base}\`; left as it is.`;
    // Asked for by hand: say why nothing happened.
    if (!spec.request.onlyIfConflicting)
      await run.comment(renderRebaseNotNeeded({ ...view, reason: outcome.reason }));
    return;
  }
  await replayWithAgent(run, wt, baseSha);
  const changed = (await gitIn(wt, ["diff", "--name-only", baseSha, "HEAD"])).stdout
    .split("\n")
    .filter(Boolean);
  const marked = await filesWithMarkers(wt.path, changed);
  if (marked.length > 0)
    throw new RebaseFailed(
      `The rebased branch still has conflict markers in ${marked.map((f) => `\`${f}\``).join(", ")}.`,
      run.conflicts,
    );
  // What the branch adds on top of the new base: the base's own changes are not the agent's.
  const leak = await checkOutgoing(wt, baseSha, run.labeled, []);
  if (leak) throw new RebaseFailed(leak, run.conflicts);
  await deps.confirmHeld?.();
  if (deps.signal?.aborted) throw new RebaseFailed("The run was cancelled before the push.", run.conflicts);
  // Someone pushing to the branch meanwhile wins: the lease is the commit this run started from.
  const push = await gitIn(
    wt,
    [
      "push",
      "-q",
      `--force-with-lease=refs/heads/${view.branch}:${wt.startSha}`,
      deps.cloneUrl,
      `HEAD:refs/heads/${view.branch}`,
    ],
    { auth: deps.gitAuth, okCodes: [1] },
  );
  if (push.exitCode !== 0)
    throw new RebaseFailed(
      `The push was refused: \`${view.branch}\` changed on GitHub while Fleet rebased it.`,
      run.conflicts,
    );
  if (run.totals) outcome.totals = run.totals;
  await run.comment(
    renderRebased({ ...view, baseSha, resolved: [...run.resolved].sort(), totals: run.totals }),
  );
}

/** A plain rebase; at each commit that conflicts, the agent resolves the files git names (no marker may remain). */
async function replayWithAgent(run: RebaseState, wt: Worktree, baseSha: string): Promise<void> {
  const { spec, deps, view } = run;
  let r = await gitIn(wt, ["-c", "core.editor=true", "rebase", baseSha], { okCodes: [1] });
  let agentSteps = 0;
  for (let guard = 0; r.exitCode !== 0 || (await rebaseInProgress(wt)); guard++) {
    if (guard > 100) throw new RebaseFailed("The rebase did not finish.", run.conflicts);
    if (deps.signal?.aborted) throw new RebaseFailed("The run was cancelled.", run.conflicts);
    const unmerged = await unmergedFiles(wt);
    if (unmerged.length === 0) {
      // Nothing left to resolve: the commit became empty (its change is already in the base).
      r = await gitIn(wt, ["-c", "core.editor=true", "rebase", "--skip"], { okCodes: [1] });
      continue;
    }
    run.conflicts = [...new Set([...run.conflicts, ...unmerged])].sort();
    if (++agentSteps > MAX_AGENT_STEPS)
      throw new RebaseFailed(
        `More than ${MAX_AGENT_STEPS} commits of the branch conflict; this needs a person.`,
        run.conflicts,
      );
    const step = await resolveWithAgent(spec, deps, wt, {
      ...view,
      files: unmerged,
      logPath: run.logPath,
      artifactsDir: run.artifactsDir,
      gateway: run.gateway!,
      onRunToken: run.onRunToken,
      // The task's earlier runs and this rebase's earlier steps: the task is held to its ceilings as a whole.
      earlier: spentBefore(spec, run.totals),
    });
    run.totals = combineTotals(run.totals, step.totals);
    await cleanAfterAgent(wt);
    if (step.error) throw new RebaseFailed(step.error, run.conflicts);
    const left = await filesWithMarkers(wt.path, unmerged);
    if (left.length > 0)
      throw new RebaseFailed(
        `The agent left conflict markers in ${left.map((f) => `\`${f}\``).join(", ")}${step.summary ? `. Its summary: ${step.summary}` : "."}`,
        run.conflicts,
      );
    for (const f of unmerged) run.resolved.add(f);
    await gitIn(wt, ["add", "-A"]);
    r = await gitIn(wt, ["-c", "core.editor=true", "rebase", "--continue"], { okCodes: [1] });
  }
}

async function rebaseInProgress(tree: Worktree): Promise<boolean> {
  for (const dir of ["rebase-merge", "rebase-apply"]) {
    const p = (await gitIn(tree, ["rev-parse", "--git-path", dir])).stdout.trim();
    if (
      await access(resolve(tree.path, p)).then(
        () => true,
        () => false,
      )
    )
      return true;
  }
  return false;
}

async function unmergedFiles(tree: Worktree): Promise<string[]> {
  const out = (await gitIn(tree, ["diff", "--name-only", "--diff-filter=U", "--ignore-submodules=all"]))
    .stdout;
  return [...new Set(out.split("\n").filter(Boolean))].sort();
}

async function filesWithMarkers(cwd: string, files: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  for (const f of files) {
    // The agent wrote these: no symlink followed, no FIFO waited on, no endless file read.
    const text = await readAgentFile(join(cwd, f), 16 * 1024 * 1024).catch(() => undefined);
    if (text !== undefined && MARKER.test(text)) out.push(f);
  }
  return out;
}

export function conflictPrompt(
  spec: Pick<RebaseSpec, "pr" | "issue" | "title" | "request">,
  at: { branch: string; base: string; files: readonly string[]; commit?: string },
): string {
  return [
    `Fleet is rebasing \`${at.branch}\` (pull request #${spec.pr}, for issue #${spec.issue}: ${JSON.stringify(spec.title)}) onto \`${at.base}\`: ${spec.request.why}.`,
    "",
    `Git stopped${at.commit ? ` while replaying ${at.commit}` : ""} because these files conflict with \`${at.base}\`:`,
    "",
    ...at.files.map((f) => `- ${f}`),
    "",
    "Edit each of these files in the working directory so that it keeps the intent of both sides: the base branch's change and this branch's change. Remove every conflict marker (<<<<<<<, =======, >>>>>>>).",
    "Do not run git commands that change history or the index (commit, rebase, reset, checkout, stash, add); Fleet stages your edits, continues the rebase and pushes.",
    "If a conflict cannot be resolved sensibly, leave that file's markers in place and say why in your final message.",
  ].join("\n");
}

async function resolveWithAgent(
  spec: RebaseSpec,
  deps: RebaseDeps,
  tree: Worktree,
  at: {
    branch: string;
    base: string;
    files: string[];
    logPath: string;
    artifactsDir: string;
    gateway: ModelGateway;
    onRunToken: (token: string) => void;
    /** What the task spent before this step: its earlier runs and the rebase's earlier steps. */
    earlier?: RunTotals;
  },
): Promise<{ totals?: RunTotals; error?: string; summary?: string }> {
  const commit = (
    await gitIn(tree, ["log", "-1", "--format=%h %s", "REBASE_HEAD"], { okCodes: [128] })
  ).stdout.trim();
  const invocation: AgentInvocation = {
    prompt: conflictPrompt(spec, { ...at, commit: commit || undefined }),
    model: spec.model,
    phase: "work",
    cwd: tree.path,
    home: agentHomeDir(deps.workDir, spec.taskId),
  };
  if (deps.modelBaseUrl) invocation.modelBaseUrl = deps.modelBaseUrl;
  if (deps.agentEnv) invocation.env = { ...deps.agentEnv };
  // `coders.<coder>.options` apply to every run of the coder, this conflict resolution too.
  if (deps.coderOptions) invocation.options = deps.coderOptions;
  if (deps.credential) invocation.credential = { ...deps.credential };
  await mkdir(invocation.home!, { recursive: true });
  const sandbox = deps.sandbox ?? "bubblewrap";
  // `home: inherit`: the user's own files of this coder, read-only, as in the task's other runs.
  const homeOverlay =
    sandbox === "bubblewrap" && deps.inheritHome
      ? await inheritedHomeMounts(spec.coder, deps.inheritHome, invocation.home!)
      : [];
  // At the gateway like every run: metered, held to the task's ceilings and runaway limits.
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  if (deps.signal?.aborted) stop.abort();
  deps.signal?.addEventListener("abort", onAbort, { once: true });
  let stopped: string | undefined;
  const gatewayRun =
    deps.credential && deps.adapter.upstream
      ? gatewayRunFor(deps, {
          phase: "work",
          // The task's earlier runs and the rebase's earlier steps count: the task is held to the ceilings as a whole.
          ...(at.earlier ? { earlier: at.earlier } : {}),
          credential: deps.credential,
          model: spec.model,
          worktree: tree,
          onStop: (reason) => {
            stopped = reason;
            stop.abort();
          },
          onCredential: (c) => at.onRunToken(c.value),
        })
      : undefined;
  let r: Awaited<ReturnType<typeof runContainedAgent>>;
  try {
    r = await runContainedAgent(
      deps.adapter,
      invocation,
      {
        timeoutMs: spec.timeouts.runMs,
        stallMs: spec.timeouts.stallMs,
        signal: stop.signal,
        logFile: at.logPath,
      },
      {
        sandbox,
        mounts: { ...worktreeMounts(tree, undefined, "work"), homeOverlay },
        ...(deps.network ? { network: deps.network } : {}),
        limits: deps.limits ?? DEFAULT_RESOURCE_LIMITS,
        ...(deps.egressHosts ? { egressHosts: deps.egressHosts } : {}),
        forbidden: forbiddenFolders(deps.workDir),
        gateway: at.gateway,
        onRunToken: at.onRunToken,
        ...(gatewayRun ? { gatewayRun } : {}),
      },
    );
  } finally {
    deps.signal?.removeEventListener("abort", onAbort);
    gatewayRun?.dispose();
  }
  const own = r.totals && deps.credential ? { ...r.totals, credential: deps.credential.name } : r.totals;
  const totals = reportedTotals(gatewayRun?.totals(spec.model, own?.durationMs ?? 0), own);
  if (stopped) return { totals, error: stopped };
  if (r.reason === "completed") return { totals, summary: r.summary };
  const why =
    r.reason === "timeout" || r.reason === "stall"
      ? `The agent resolving the conflicts was stopped (${r.reason}).`
      : r.reason === "rate-limited"
        ? "The agent resolving the conflicts was rate-limited."
        : `The agent resolving the conflicts failed${r.error ? `: ${r.error}` : "."}`;
  return { totals, error: why };
}
