import { access, mkdir, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { AgentInvocation } from "../agents/types.ts";
import { redactSecrets } from "../core/redact.ts";
import type { RebaseRequest } from "../core/task.ts";
import { combineTotals, type RunTotals } from "../core/usage.ts";
import { parseRepoFullName } from "../github/client.ts";
import { renderRebased, renderRebaseFailed, renderRebaseNotNeeded } from "../render/rebase-comment.ts";
import { agentHomeDir, readAgentFile, taskArtifactsDir } from "./artifacts.ts";
import { runContainedAgent } from "./contained-run.ts";
import { gitIn } from "./git.ts";
import { type ModelGateway, startModelGateway } from "./model-gateway.ts";
import { checkOutgoing } from "./outgoing-check.ts";
import { assertFleetBranch } from "./publish.ts";
import { labeledSecretsOf, type TaskOutcome, type WorkerDeps, worktreeMounts } from "./run-task.ts";
import { addWorktree, cleanAfterAgent, removeWorktree, type Worktree } from "./worktree.ts";

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
}

export type RebaseDeps = Pick<
  WorkerDeps,
  | "octokit"
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
  | "gateway"
>;

/** At most this many conflicted commits are handed to the agent in one rebase. */
const MAX_AGENT_STEPS = 5;
export const REBASE_LOG_FILE = "rebase.log";
const MARKER = /^(<{7}|>{7})( |$)|^={7}$/m;

class RebaseFailed extends Error {
  constructor(
    message: string,
    readonly conflicts: string[],
  ) {
    super(message);
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
  // Grows with each gateway token handed to the agent.
  const labeled = labeledSecretsOf(deps);
  const secrets = labeled.map((s) => s.value);
  const redact = (text: string) => redactSecrets(text, secrets);
  const outcome: TaskOutcome = { outcome: "pr-opened", logPath, artifacts: {} };
  await mkdir(artifactsDir, { recursive: true });
  await writeFile(logPath, "");

  const { data: pr } = await deps.octokit.rest.pulls.get({ ...ref, pull_number: spec.pr });
  if (pr.state !== "open") {
    outcome.outcome = pr.merged ? "no-changes" : "failed";
    outcome.noRetry = true;
    outcome.reason = `Pull request #${spec.pr} was ${pr.merged ? "merged" : "closed"} before the rebase ran; nothing to rebase.`;
    return outcome;
  }
  const branch = pr.head.ref;
  const base = pr.base.ref;
  const view = { why: spec.request.why, branch, base };
  outcome.pr = { number: pr.number, url: pr.html_url, head: branch };
  const comment = (body: string) =>
    deps.octokit.rest.issues
      .createComment({ ...ref, issue_number: spec.pr, body: redact(body) })
      .catch(() => undefined);

  let wt: Worktree | undefined;
  let totals: RunTotals | undefined;
  let conflicts: string[] = [];
  let ownGateway: ModelGateway | undefined;
  try {
    assertFleetBranch(branch);
    if (!deps.gateway) ownGateway = await startModelGateway();
    const gateway = deps.gateway ?? ownGateway!;
    const onRunToken = (token: string) => {
      labeled.push({ label: "this run's model-gateway token", value: token });
      secrets.push(token);
    };
    wt = await addWorktree(
      deps.workDir,
      { repo: spec.repo, cloneUrl: deps.cloneUrl, auth: deps.gitAuth },
      spec.taskId,
      branch,
    );
    if (!wt.continued) throw new RebaseFailed(`The branch \`${branch}\` is not on GitHub any more.`, []);
    const tree = wt;
    const baseSha = (await gitIn(tree, ["rev-parse", `refs/remotes/origin/${base}^{commit}`])).stdout.trim();

    const based = await gitIn(tree, ["merge-base", "--is-ancestor", baseSha, "HEAD"], { okCodes: [1] });
    const clean = await gitIn(
      tree,
      ["merge-tree", "--write-tree", "--name-only", "--no-messages", "HEAD", baseSha],
      {
        okCodes: [1],
      },
    );
    if (based.exitCode === 0 || (spec.request.onlyIfConflicting && clean.exitCode === 0)) {
      outcome.reason =
        based.exitCode === 0
          ? `\`${branch}\` already contains \`${base}\`; nothing to rebase.`
          : `\`${branch}\` still merges cleanly into \`${base}\`; left as it is.`;
      // Asked for by hand: say why nothing happened.
      if (!spec.request.onlyIfConflicting)
        await comment(renderRebaseNotNeeded({ ...view, reason: outcome.reason }));
      return outcome;
    }

    // 1. A plain rebase; 2. the agent at each conflicted commit; 3. no markers anywhere in the result.
    let r = await gitIn(tree, ["-c", "core.editor=true", "rebase", baseSha], { okCodes: [1] });
    const resolved = new Set<string>();
    let agentSteps = 0;
    for (let guard = 0; r.exitCode !== 0 || (await rebaseInProgress(tree)); guard++) {
      if (guard > 100) throw new RebaseFailed("The rebase did not finish.", conflicts);
      if (deps.signal?.aborted) throw new RebaseFailed("The run was cancelled.", conflicts);
      const unmerged = await unmergedFiles(tree);
      if (unmerged.length === 0) {
        // Nothing left to resolve: the commit became empty (its change is already in the base).
        r = await gitIn(tree, ["-c", "core.editor=true", "rebase", "--skip"], { okCodes: [1] });
        continue;
      }
      conflicts = [...new Set([...conflicts, ...unmerged])].sort();
      if (++agentSteps > MAX_AGENT_STEPS)
        throw new RebaseFailed(
          `More than ${MAX_AGENT_STEPS} commits of the branch conflict; this needs a person.`,
          conflicts,
        );
      const step = await resolveWithAgent(spec, deps, tree, {
        branch,
        base,
        files: unmerged,
        logPath,
        artifactsDir,
        gateway,
        onRunToken,
      });
      totals = combineTotals(totals, step.totals);
      await cleanAfterAgent(tree);
      if (step.error) throw new RebaseFailed(step.error, conflicts);
      const left = await filesWithMarkers(tree.path, unmerged);
      if (left.length > 0)
        throw new RebaseFailed(
          `The agent left conflict markers in ${left.map((f) => `\`${f}\``).join(", ")}${step.summary ? `. Its summary: ${step.summary}` : "."}`,
          conflicts,
        );
      for (const f of unmerged) resolved.add(f);
      await gitIn(tree, ["add", "-A"]);
      r = await gitIn(tree, ["-c", "core.editor=true", "rebase", "--continue"], { okCodes: [1] });
    }
    const changed = (await gitIn(tree, ["diff", "--name-only", baseSha, "HEAD"])).stdout
      .split("\n")
      .filter(Boolean);
    const marked = await filesWithMarkers(tree.path, changed);
    if (marked.length > 0)
      throw new RebaseFailed(
        `The rebased branch still has conflict markers in ${marked.map((f) => `\`${f}\``).join(", ")}.`,
        conflicts,
      );
    // What the branch adds on top of the new base: the base's own changes are not the agent's.
    const leak = await checkOutgoing(tree, baseSha, labeled, []);
    if (leak) throw new RebaseFailed(leak, conflicts);
    if (deps.signal?.aborted) throw new RebaseFailed("The run was cancelled before the push.", conflicts);

    // Someone pushing to the branch meanwhile wins: the lease is the commit this run started from.
    const push = await gitIn(
      tree,
      [
        "push",
        "-q",
        `--force-with-lease=refs/heads/${branch}:${wt.startSha}`,
        deps.cloneUrl,
        `HEAD:refs/heads/${branch}`,
      ],
      { auth: deps.gitAuth, okCodes: [1] },
    );
    if (push.exitCode !== 0)
      throw new RebaseFailed(
        `The push was refused: \`${branch}\` changed on GitHub while Fleet rebased it.`,
        conflicts,
      );
    if (totals) outcome.totals = totals;
    await comment(renderRebased({ ...view, baseSha, resolved: [...resolved].sort(), totals }));
    return outcome;
  } catch (error) {
    if (totals) outcome.totals = totals;
    const reason = redact(error instanceof Error ? error.message : String(error));
    if (deps.signal?.aborted) {
      outcome.outcome = "cancelled";
      outcome.reason = reason;
      return outcome;
    }
    outcome.reason = `Rebase failed: ${reason}`;
    await comment(
      renderRebaseFailed({
        ...view,
        conflicts: error instanceof RebaseFailed ? error.conflicts : conflicts,
        reason,
        totals,
      }),
    );
    return outcome;
  } finally {
    if (wt) {
      await gitIn(wt, ["rebase", "--abort"], { okCodes: [1, 128] }).catch(() => undefined);
      await removeWorktree(wt);
    }
    await ownGateway?.close();
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
  if (deps.credential) invocation.credential = { ...deps.credential };
  await mkdir(invocation.home!, { recursive: true });
  const r = await runContainedAgent(
    deps.adapter,
    invocation,
    {
      timeoutMs: spec.timeouts.runMs,
      stallMs: spec.timeouts.stallMs,
      signal: deps.signal,
      logFile: at.logPath,
    },
    {
      sandbox: deps.sandbox ?? "bubblewrap",
      mounts: worktreeMounts(tree, undefined, "work"),
      gateway: at.gateway,
      onRunToken: at.onRunToken,
    },
  );
  const totals = r.totals && deps.credential ? { ...r.totals, credential: deps.credential.name } : r.totals;
  if (r.reason === "completed") return { totals, summary: r.summary };
  const why =
    r.reason === "timeout" || r.reason === "stall"
      ? `The agent resolving the conflicts was stopped (${r.reason}).`
      : r.reason === "rate-limited"
        ? "The agent resolving the conflicts was rate-limited."
        : `The agent resolving the conflicts failed${r.error ? `: ${r.error}` : "."}`;
  return { totals, error: why };
}
