import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { plainAgentText } from "../core/published-text.ts";
import { scanOutgoing } from "../core/secret-scan.ts";
import { parseRepoFullName } from "../github/port.ts";
import { renderDraftStartBody, renderPrBody } from "../render/pr-body.ts";
import { loadPlan, runPhase } from "./3-phase.ts";
import { finish } from "./4-finish.ts";
import {
  assertFleetBranch,
  commitAll,
  commitMessage,
  forgetCommit,
  hasNewCommits,
  holdBackWorkflowChanges,
  openOrUpdatePullRequest,
  pushBranch,
} from "./4-publish.ts";
import { readQuestions } from "./ask-human/ask-human.ts";
import {
  answerPrompt,
  QUESTION_FILE,
  restoreQuestionChange,
  savedQuestionSession,
  saveQuestionRun,
} from "./question.ts";
import {
  createRunContext,
  noteRefused,
  type PhaseRun,
  PLAN_STATE_FILE,
  type RunContext,
  runContainment,
  type SavedPlan,
  type TaskOutcome,
  type TaskSpec,
  type WorkerDeps,
} from "./run-context.ts";
import { runPrReview } from "./runs/pr-review.ts";
import { freshAgentHome } from "./sandbox/agent-home.ts";
import { limitsEnforcement } from "./sandbox/cgroup-limits.ts";
import { type ModelGateway, startModelGateway } from "./sandbox/model-gateway.ts";
import { checkOutgoing } from "./sandbox/outgoing-check.ts";
import {
  type AgentArtifacts,
  agentHomeDir,
  agentNotesDir,
  keepArtifacts,
  PLAN_FILE,
  prepareNotesDir,
  readArtifacts,
} from "./workspace/artifacts.ts";
import { gitIn } from "./workspace/git.ts";
import { runSetup } from "./workspace/setup-steps.ts";
import { addWorktree, cleanAfterAgent, removeWorktree, type Worktree } from "./workspace/worktree.ts";

export type { OutcomeKind, TaskOutcome, TaskSpec, WorkerDeps } from "./run-context.ts";
export { knownSecretsOf, labeledSecretsOf, worktreeMounts } from "./run-context.ts";
export { taskArtifactsDir } from "./workspace/artifacts.ts";

/**
 * Runs one task, start to finish, in its own worktree:
 *
 * 1. Check the branch is a fleet/* branch and prepare the artifacts folder.
 * 2. Create the worktree (removing whatever a crashed run left) and the agent's notes folder.
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
  const ctx = createRunContext(spec, deps);
  let wt: Worktree | undefined;
  let ownGateway: ModelGateway | undefined;
  try {
    // Step 1
    assertFleetBranch(ctx.branch);
    await mkdir(ctx.artifactsDir, { recursive: true });
    if (!deps.gateway) ownGateway = await startModelGateway();
    ctx.gateway = deps.gateway ?? ownGateway;
    if (deps.signal?.aborted) return await finish(ctx, "cancelled", "Cancelled before the run started.");

    // Step 2
    const planning = spec.planPhase && !spec.approved;
    await ctx.progress({ state: planning ? "planning" : "running", step: "preparing the worktree" }, true);
    wt = await addWorktree(
      deps.workDir,
      { repo: spec.repo, cloneUrl: deps.cloneUrl, auth: deps.gitAuth },
      spec.taskId,
      ctx.branch,
    );
    const notesDir = agentNotesDir(wt.path, spec.taskId);
    await prepareNotesDir(notesDir);
    // A HOME Fleet controls: nothing an earlier run left there but the session this run resumes.
    const resumed = await resumedSession(ctx);
    const carried = await freshAgentHome(agentHomeDir(deps.workDir, spec.taskId), resumed);
    ctx.result.limits = await limitsEnforcement();
    if ((deps.sandbox ?? "bubblewrap") === "bubblewrap")
      ctx.result.network = { mode: runContainment(ctx).network.mode, refused: [] };
    if (spec.split) return await runSplitPlanning(ctx, wt, notesDir);
    if (spec.prReview !== undefined) return await runPrReview(ctx, wt, notesDir);

    // Step 2b: the repository's setup steps, in the sandbox, before any agent.
    const setupFailed = await setupStep(ctx, wt, planning);
    if (setupFailed) return setupFailed;

    // Step 2c: `draft_pr`: the task's pull request opens now, as a draft, so people see it while it runs.
    await openDraftAtStart(ctx, wt, planning);

    // Step 3 (a run with the answer to the agent's question goes on where it stopped: no new plan)
    const answered = spec.question?.answer
      ? await answeredStep(ctx, wt, notesDir, carried.length > 0 ? resumed?.sessionId : undefined)
      : undefined;
    const planned = answered ?? (await planStep(ctx, wt, notesDir));
    if ("outcome" in planned) return planned;

    // Step 4
    await ctx.progress({ state: "running", step: "agent working" }, true);
    const run = await runPhase(ctx, {
      wt,
      notesDir,
      phase: "work",
      plan: planned.plan,
      resumeSessionId: planned.resumeSessionId,
      ...(answered?.addPrompt ? { addPrompt: answered.addPrompt } : {}),
    });
    ctx.result.totals = run.totals;
    if (run.sessionId) ctx.result.sessionId = run.sessionId;

    // Step 5. Nothing the agent left in the worktree may steer Fleet's git (see cleanAfterAgent).
    await cleanAfterAgent(wt);
    const notes = await readArtifacts(notesDir);
    await keepArtifacts(notesDir, ctx.artifactsDir);
    ctx.result.artifacts = {
      plan: notes.plan ?? planned.plan,
      knowledge: notes.knowledge,
      result: notes.rawResult,
    };
    // Step 5b. The agent asked a person (its ask_human tool): the run ends waiting for the answer.
    const asked = await askedStep(ctx, wt, notesDir, run, notes);
    if (asked) return asked;
    if (run.kind !== "ok") return await finish(ctx, run.kind, run.reason, run, notes);

    // Steps 6 to 9
    return await publishChange(ctx, wt, run, notes);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return await finish(ctx, deps.signal?.aborted ? "cancelled" : "failed", reason);
  } finally {
    // Step 10
    if (wt) await removeWorktree(wt);
    await ownGateway?.close();
  }
}

/**
 * The session this run resumes: the asking run's when this run has the answer to its question, or the
 * plan phase's for an approved work phase (saved when the plan was posted).
 */
async function resumedSession(ctx: RunContext): Promise<{ coder: string; sessionId: string } | undefined> {
  const { spec } = ctx;
  if (spec.question?.answer) {
    const sessionId = await savedQuestionSession(ctx.artifactsDir);
    return sessionId ? { coder: spec.coder, sessionId } : undefined;
  }
  if (!(spec.planPhase && spec.planApproval && spec.approved === true)) return undefined;
  const { state } = await loadPlan(ctx.artifactsDir);
  return state.sessionId ? { coder: spec.coder, sessionId: state.sessionId } : undefined;
}

/**
 * Step 2b: `setup` from .github/fleet.yml, in the sandbox with the setup network and the run's limits
 * (see runSetup). A failure ends the task with the step, its exit status and its output's end; it is
 * the repository's setup, not the agent, so it is not retried by itself.
 */
async function setupStep(ctx: RunContext, wt: Worktree, planning: boolean): Promise<TaskOutcome | undefined> {
  const { spec, deps } = ctx;
  const setup = deps.setup;
  if (!setup?.commands.length) return undefined;
  await ctx.progress({ state: planning ? "planning" : "running", step: "setup" }, true);
  const c = runContainment(ctx);
  const r = await runSetup(setup, wt, {
    repo: spec.repo,
    workDir: deps.workDir,
    artifactsDir: ctx.artifactsDir,
    home: agentHomeDir(deps.workDir, spec.taskId),
    sandbox: c.sandbox,
    agentNetwork: c.network,
    limits: c.limits,
    forbidden: c.forbidden,
    ...(c.egressHosts ? { egressHosts: c.egressHosts } : {}),
    timeouts: spec.timeouts,
    ...(deps.signal ? { signal: deps.signal } : {}),
    redact: ctx.redact,
    log: (command) =>
      void ctx.progress({ state: planning ? "planning" : "running", step: `setup: ${command}` }),
  });
  noteRefused(ctx, r.refused);
  if (r.ok) {
    ctx.result.setup = { ran: r.ran, ...(r.cache ? { cache: r.cache } : {}) };
    return undefined;
  }
  ctx.result.noRetry = true;
  return finish(ctx, deps.signal?.aborted ? "cancelled" : "failed", r.reason);
}

/**
 * Step 3 of a run that has the answer to its agent's question: the asking run's change applied again,
 * its session resumed when this worker kept it (else a fresh session told the question and answer),
 * and its plan as it was; no plan phase.
 */
async function answeredStep(
  ctx: RunContext,
  wt: Worktree,
  notesDir: string,
  /** The asking run's session, when this worker kept it. */
  sessionId: string | undefined,
): Promise<{ plan?: string; resumeSessionId?: string; addPrompt?: string }> {
  const question = ctx.spec.question!;
  const restored = await restoreQuestionChange(ctx.artifactsDir, wt);
  const saved = await loadPlan(ctx.artifactsDir);
  if (saved.plan !== undefined) await writeFile(join(notesDir, PLAN_FILE), saved.plan);
  return {
    plan: saved.plan,
    ...(sessionId ? { resumeSessionId: sessionId } : {}),
    addPrompt: answerPrompt(question, { restored, resumed: sessionId !== undefined }),
  };
}

/**
 * Step 5b: the question the agent asked with its ask_human tool, if it asked one (a run that ended
 * otherwise than cancelled, rate-limited or over budget). It is published, so it is checked for secrets
 * like anything else that leaves the run; the run's session and change so far are kept for the run
 * that gets the answer (the question is posted once the task is recorded waiting: postQuestion).
 */
async function askedStep(
  ctx: RunContext,
  wt: Worktree,
  notesDir: string,
  run: PhaseRun,
  notes: AgentArtifacts,
): Promise<TaskOutcome | undefined> {
  const { spec, result } = ctx;
  if (!spec.askHuman || !["ok", "timeout", "stall"].includes(run.kind)) return undefined;
  const asked = await readQuestions(join(notesDir, QUESTION_FILE)).catch(() => undefined);
  if (asked === undefined) return undefined;
  // Published as Fleet's own text: plain lines, no HTML comment (see plainAgentText); checked as published.
  const question = plainAgentText(asked);
  const hit = scanOutgoing(question, ctx.secrets) ?? scanOutgoing(asked, ctx.secrets);
  if (hit) {
    result.noRetry = true;
    return await finish(
      ctx,
      "failed",
      `Fleet posted nothing: the agent's question gives away a secret, ${hit.label} (${hit.form}).`,
      run,
      notes,
    );
  }
  await saveQuestionRun(ctx.artifactsDir, wt, run.sessionId);
  result.question = ctx.redact(question);
  return await finish(
    ctx,
    "waiting",
    "The agent stopped to ask a person a question; it goes on once someone answers.",
    run,
    notes,
  );
}

/**
 * Step 3: the read-only plan phase, posted on the issue; or, after `/fleet approve`, the plan saved then.
 * A plan that waits for approval (or a phase that failed) ends the run here.
 */
async function planStep(
  ctx: RunContext,
  wt: Worktree,
  notesDir: string,
): Promise<{ plan?: string; resumeSessionId?: string } | TaskOutcome> {
  const { spec, result } = ctx;
  if (spec.planPhase && spec.planApproval && spec.approved === true) {
    // The plan phase was a run of its own, recorded (and counted) when it ended: only its text and session go on.
    const saved = await loadPlan(ctx.artifactsDir);
    if (saved.plan !== undefined) await writeFile(join(notesDir, PLAN_FILE), saved.plan);
    return { plan: saved.plan, resumeSessionId: saved.state.sessionId };
  }
  if (!spec.planPhase) return {};
  await ctx.progress({ state: "planning", step: "planning (read-only)" }, true);
  const run = await runPhase(ctx, { wt, notesDir, phase: "plan" });
  result.planTotals = run.totals;
  // A plan phase that ends the run (it failed, or waits for approval) is a plan run.
  if (spec.planApproval && !spec.approved) result.kind = "plan";
  if (run.kind !== "ok") return await finish(ctx, run.kind, run.reason, run);
  const notes = await readArtifacts(notesDir);
  const plan = notes.plan ?? run.planText ?? "";
  await writeFile(join(ctx.artifactsDir, PLAN_FILE), plan);
  await writeFile(
    join(ctx.artifactsDir, PLAN_STATE_FILE),
    JSON.stringify({ sessionId: run.sessionId, totals: run.totals } satisfies SavedPlan),
  );
  result.artifacts.plan = plan;
  const waiting = spec.planApproval && !spec.approved;
  await ctx.reporter.plan(plan, waiting);
  if (waiting) {
    result.sessionId = run.sessionId;
    const approve = ctx.deps.local ? `fleet approve ${spec.taskId}` : "/fleet approve";
    return await finish(ctx, "awaiting-approval", `The plan is posted and waits for \`${approve}\`.`);
  }
  return { plan, resumeSessionId: run.sessionId };
}

/**
 * Steps 6 to 9: commit what the agent left (no changes: no PR, and the issue says why); refuse to push
 * when the change, the commit message or the PR body gives a secret away (see `checkOutgoing`); push;
 * open the pull request or update the open one; post the report.
 */
async function publishChange(
  ctx: RunContext,
  wt: Worktree,
  run: PhaseRun,
  notes: AgentArtifacts,
): Promise<TaskOutcome> {
  const { spec, deps, result } = ctx;
  await ctx.progress(
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
  const committed = await commitAll(wt, ctx.redact(message));
  const heldBack = spec.allowWorkflowChanges ? undefined : await holdBackWorkflowChanges(wt, wt.startSha);
  const prBody = renderPrBody({
    ...(deps.local ? { local: true } : {}),
    taskId: spec.taskId,
    issue: spec.issue,
    coder: spec.coder,
    model: spec.model,
    summary: notes.result?.summary,
    testsRun: notes.result?.testsRun,
    followUps: notes.result?.followUps,
    ...(spec.maxFollowUps !== undefined ? { maxFollowUps: spec.maxFollowUps } : {}),
    resultProblem: notes.resultProblem,
    totals: run.totals,
    planTotals: result.planTotals,
    ...(heldBack ? { heldBack: { paths: heldBack.paths, patch: ctx.redact(heldBack.patch) } } : {}),
  });
  if (heldBack && !(await hasNewCommits(wt, wt.startSha))) {
    result.noRetry = true;
    return await finish(
      ctx,
      "failed",
      workflowOnlyReason(heldBack.paths, ctx.deps.local === true, spec.taskId),
      run,
      notes,
    );
  }
  // Fleet's own commit (when the workflows were not taken out of it) is new; else git is asked.
  const changed = (committed !== undefined && !heldBack) || (await hasNewCommits(wt, wt.startSha));
  if (!changed) {
    const why = notes.result?.summary
      ? `The agent changed no files. Its summary: ${notes.result.summary}`
      : "The agent changed no files in the repository.";
    return await finish(ctx, "no-changes", why, run, notes);
  }
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
  await deps.confirmHeld?.();
  if (deps.signal?.aborted) return await finish(ctx, "cancelled", "Cancelled before the push.", run, notes);
  const gone = await reviewPrGone(ctx);
  if (gone) {
    result.noRetry = true;
    return await finish(ctx, "failed", gone, run, notes);
  }
  await ctx.progress({ state: "running", step: "pushing the branch" }, true);
  await pushBranch(wt, deps.cloneUrl, ctx.branch, deps.gitAuth);
  const pr = await openOrUpdatePullRequest(deps.github, parseRepoFullName(spec.repo), {
    branch: ctx.branch,
    mayExist: (spec.earlierRuns?.length ?? 0) > 0 || ctx.draftAtStart !== undefined,
    base: wt.baseBranch,
    title: spec.title,
    body: ctx.redact(prBody),
    ...(spec.draftPr ? { draft: true } : {}),
  });
  result.pr = { number: pr.number, url: pr.url, head: pr.head };
  const outcome = await finish(ctx, "pr-opened", undefined, run, notes);
  if (spec.draftPr) await markReady(ctx, pr.number);
  return outcome;
}

/**
 * Step 2c, `draft_pr` on a task's first run (its branch not pushed yet): an empty commit of Fleet's is
 * pushed and the draft opened on it before any agent runs, so the PR is there while the agent works (its
 * change is pushed to it at the end, then it is marked ready; a later run pushes to it too). A failure to
 * open it leaves the run as it was (the PR then opens at the end). Nothing of the agent's is in it: the
 * commit and the body are Fleet's.
 */
async function openDraftAtStart(ctx: RunContext, wt: Worktree, planning: boolean): Promise<void> {
  const { spec, deps } = ctx;
  if (!spec.draftPr || deps.local || wt.pushed || spec.reviewPr !== undefined) return;
  if (deps.signal?.aborted) return;
  await ctx.progress(
    { state: planning ? "planning" : "running", step: "opening the draft pull request" },
    true,
  );
  try {
    // Nothing is published for a task this worker no longer holds (a cancel since the claim).
    await deps.confirmHeld?.();
    if (deps.signal?.aborted) return;
    // `[skip ci]`: no workflow runs for a commit with nothing in it (GitHub skips push and pull_request
    // runs whose head commit says so: https://docs.github.com/en/actions/managing-workflow-runs-and-deployments/managing-workflow-runs/skipping-workflow-runs).
    await gitIn(wt, [
      "commit",
      "-q",
      "--allow-empty",
      "--no-verify",
      "-m",
      `Start Fleet task ${spec.taskId} (#${spec.issue}) [skip ci]`,
    ]);
    try {
      await pushBranch(wt, deps.cloneUrl, ctx.branch, deps.gitAuth);
    } catch (error) {
      // Not on the remote: the run goes on from where it started, and its PR opens at the end.
      await gitIn(wt, ["reset", "-q", "--soft", wt.startSha]);
      throw error;
    }
    // The change is measured from here: Fleet's empty commit is not the agent's.
    wt.startSha = (await gitIn(wt, ["rev-parse", "HEAD"])).stdout.trim();
    const pr = await openOrUpdatePullRequest(deps.github, parseRepoFullName(spec.repo), {
      branch: ctx.branch,
      base: wt.baseBranch,
      title: spec.title,
      body: renderDraftStartBody({
        taskId: spec.taskId,
        issue: spec.issue,
        coder: spec.coder,
        model: spec.model,
      }),
      draft: true,
    });
    // Not the run's outcome: the task's PR is recorded when a run opens it with a change (5-record).
    ctx.draftAtStart = pr.number;
  } catch {
    // Opened at the end instead, as without the early start.
  }
}

/**
 * `draft_pr`: the run succeeded and its report is posted, so its draft is ready for people. A refusal
 * leaves the draft (a person can mark it ready) rather than failing a run whose change is pushed.
 */
async function markReady(ctx: RunContext, pull: number): Promise<void> {
  try {
    await ctx.deps.github.pulls.markReadyForReview(parseRepoFullName(ctx.spec.repo), pull);
  } catch {}
}

/** The reason for a change that touches nothing but workflows, which Fleet does not push. */
function workflowOnlyReason(paths: readonly string[], local: boolean, taskId: string): string {
  const listed = paths
    .slice(0, 10)
    .map((p) => `\`${p}\``)
    .join(", ");
  const more = paths.length > 10 ? `, and ${paths.length - 10} more` : "";
  return local
    ? `The agent changed only workflow files (${listed}${more}), and Fleet commits no change to .github/workflows/ (workflows run with the repository's secrets). Make the change yourself, or set \`allow_workflow_changes: true\` in the repository's .github/fleet.yml, then run \`fleet retry ${taskId}\`.`
    : `The agent changed only workflow files (${listed}${more}), and Fleet pushes no change to .github/workflows/: workflows run with the repository's secrets, and Fleet's app has no \`workflows\` permission. Make the change yourself, or grant the app the permission and set \`allow_workflow_changes: true\` in .github/fleet.yml, then \`/fleet retry\`.`;
}

/**
 * Why a review round must not push: its pull request was merged or closed while it ran (a push would
 * open another PR for a task that has ended). Undefined for any other run, or while the PR is open.
 */
async function reviewPrGone(ctx: RunContext): Promise<string | undefined> {
  const { spec, deps } = ctx;
  if (spec.reviewPr === undefined) return undefined;
  const data = await deps.github.pulls.get(parseRepoFullName(spec.repo), spec.reviewPr);
  if (data.state === "open") return undefined;
  return `Pull request #${spec.reviewPr} was ${data.merged ? "merged" : "closed"} while the round ran; nothing was pushed.`;
}

/**
 * A split task's run: the plan phase only (read-only, nothing committed); the plan it states (or its
 * RESULT.json) is handed back in `artifacts` for the caller to turn into sub-issues.
 */
async function runSplitPlanning(ctx: RunContext, wt: Worktree, notesDir: string): Promise<TaskOutcome> {
  ctx.result.kind = "split";
  await ctx.progress({ state: "planning", step: "splitting the issue (read-only)" }, true);
  const run = await runPhase(ctx, { wt, notesDir, phase: "plan" });
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
  return await finish(ctx, "split", "Split task: its plan is applied to the issue.", run);
}
