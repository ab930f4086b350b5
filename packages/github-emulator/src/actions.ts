import { parse as parseYaml } from "yaml";
import { notFound } from "./http-error.ts";
import type { Ctx } from "./router.ts";
import { type Issue, nowIso, type Repo, type User, type WorkflowRun } from "./state.ts";
import { hasSkipInstruction, parseOn, type TriggerFacts, triggers } from "./workflow-triggers.ts";
import type { WorkflowTriggers, World } from "./world.ts";

export type DispatchListener = (run: WorkflowRun & { repo: string }) => void;

/** A workflow file at a commit, with what its YAML says. */
export interface WorkflowFile {
  path: string;
  sha: string;
  name: string;
  on: unknown;
  /** Its `run-name:` as written, expressions unevaluated. */
  runName?: string;
}

/** A workflow as a run refers to it: its id, file and name. */
export type WorkflowRef = { id: number; path: string; name: string };

/**
 * GitHub Actions' runs, as far as Fleet meets them: the workflows of a commit, the runs that pushes,
 * pull requests and dispatches start, and how a run moves along (with its webhooks). The REST routes
 * over them are in routes/workflows.ts, workflow-runs.ts, workflow-jobs.ts and repository-dispatches.ts.
 */
export class Actions implements WorkflowTriggers {
  readonly listeners: DispatchListener[] = [];
  private readonly w: World;

  constructor(w: World) {
    this.w = w;
    w.workflowTriggers = this;
  }

  /** The workflow files (`.github/workflows/*.yml|yaml`) at a commit or ref. */
  async workflowFiles(repo: Repo, ref: string): Promise<Array<{ path: string; sha: string }>> {
    // A commit sha needs no lookup (pushes pass one; this runs for every push, state commits included).
    const commit = /^[0-9a-f]{40}$/.test(ref) ? ref : await repo.git.resolveCommitish(ref);
    if (!commit) return [];
    const entries = await repo.git.lsTree(`${commit}:.github/workflows`);
    return entries
      .filter((e) => e.type === "blob" && /\.ya?ml$/.test(e.path))
      .map((e) => ({ path: `.github/workflows/${e.path}`, sha: e.sha }));
  }

  /** A workflow's `name:` and `on:`; a file that is not YAML has its path as name and no trigger. */
  async readWorkflow(repo: Repo, file: { path: string; sha: string }): Promise<WorkflowFile> {
    try {
      const doc = parseYaml((await repo.git.readBlob(file.sha)).toString("utf8")) as {
        name?: unknown;
        on?: unknown;
        "run-name"?: unknown;
      };
      const runName = doc?.["run-name"];
      return {
        ...file,
        name: typeof doc?.name === "string" ? doc.name : file.path,
        on: doc?.on,
        ...(typeof runName === "string" ? { runName } : {}),
      };
    } catch {
      return { ...file, name: file.path, on: undefined };
    }
  }

  /** A new run of a workflow, recorded and announced (workflow_run.requested, workflow_job.queued). */
  private async createRun(
    repo: Repo,
    wf: WorkflowRef,
    fields: Pick<WorkflowRun, "headBranch" | "headSha" | "event" | "inputs" | "actor"> &
      Partial<Pick<WorkflowRun, "displayTitle" | "pullRequests" | "ref">>,
  ): Promise<WorkflowRun> {
    const now = nowIso();
    const run: WorkflowRun = {
      id: this.w.state.nextId(),
      jobId: this.w.state.nextId(),
      runNumber: repo.runs.filter((x) => x.workflowId === wf.id).length + 1,
      workflowId: wf.id,
      workflowPath: wf.path,
      name: wf.name,
      status: "queued",
      conclusion: null,
      triggeringActor: fields.actor,
      createdAt: now,
      updatedAt: now,
      runStartedAt: now,
      ...fields,
    };
    repo.runs.push(run);
    await this.emitRun(repo, run, "requested");
    return run;
  }

  /**
   * Runs of the workflows at `sha` that the event triggers. GitHub reads the workflow files of the
   * event's commit (https://docs.github.com/en/actions/how-tos/write-workflows/choose-when-workflows-run/trigger-a-workflow#about-workflow-triggers);
   * events made with a workflow's GITHUB_TOKEN start none ("Triggering a workflow from a workflow",
   * same page), and a skip instruction in the head commit's message skips push and pull_request runs
   * (https://docs.github.com/en/actions/managing-workflow-runs/skipping-workflow-runs). Webhooks about
   * the event itself go out all the same.
   */
  private async startRuns(
    repo: Repo,
    sha: string,
    facts: Omit<TriggerFacts, "paths">,
    changedPaths: () => Promise<string[]>,
    run: (wf: WorkflowRef) => Promise<unknown>,
  ): Promise<void> {
    if (this.w.byWorkflowToken()) return;
    const files = await this.workflowFiles(repo, sha);
    if (files.length === 0) return;
    const head = await repo.git.readCommit(sha);
    if (!head || hasSkipInstruction(head.message)) return;
    let paths: string[] | undefined;
    for (const file of files) {
      const wf = await this.readWorkflow(repo, file);
      const on = parseOn(wf.on);
      if (!on) continue;
      const filters = on.get(facts.event);
      if (!filters) continue;
      if (("paths" in filters || "paths-ignore" in filters) && facts.tag === undefined)
        paths ??= await changedPaths();
      if (!triggers(on, { ...facts, paths })) continue;
      await run({ id: this.workflowId(repo, wf.path), path: wf.path, name: wf.name });
    }
  }

  /** `on: push` runs for a branch or tag that moved (a deletion starts none). */
  async pushed(
    repo: Repo,
    ref: string,
    before: string | null,
    after: string | null,
    pusher?: User,
  ): Promise<void> {
    if (!after) return;
    // Only branches and tags start push workflows; other refs (refs/notes, refs/fleet/...) start none.
    const branch = ref.startsWith("refs/heads/") ? ref.slice("refs/heads/".length) : undefined;
    const tag = ref.startsWith("refs/tags/") ? ref.slice("refs/tags/".length) : undefined;
    if (branch === undefined && tag === undefined) return;
    const actor = pusher ?? this.w.currentUser(repo);
    const changed = async () => {
      const base =
        before ??
        (await repo.git.mergeBase(
          (await repo.git.resolveRef(`refs/heads/${repo.defaultBranch}`)) ?? after,
          after,
        ));
      if (base && base !== after) return (await repo.git.changedFiles(base, after)).map((f) => f.path);
      return (await repo.git.lsTree(after, { recursive: true }))
        .filter((e) => e.type === "blob")
        .map((e) => e.path);
    };
    const title = async () => ((await repo.git.readCommit(after))?.message ?? "").split("\n")[0]!;
    await this.startRuns(repo, after, { event: "push", branch, tag }, changed, async (wf) =>
      this.createRun(repo, wf, {
        headBranch: (branch ?? tag)!,
        headSha: after,
        ref,
        event: "push",
        inputs: {},
        actor,
        displayTitle: await title(),
      }),
    );
  }

  /** `on: pull_request` runs (opened, synchronize, reopened), from the PR's head commit. */
  async pullRequest(
    repo: Repo,
    pull: Issue,
    action: "opened" | "synchronize" | "reopened",
    sender?: User,
  ): Promise<void> {
    const p = pull.pull!;
    const actor = sender ?? this.w.currentUser(repo);
    const changed = async () => {
      const base = (await repo.git.mergeBase(p.baseSha, p.headSha)) ?? p.baseSha;
      return (await repo.git.changedFiles(base, p.headSha)).map((f) => f.path);
    };
    // GitHub takes the workflows of the PR's merge commit; the head commit stands in for it here.
    await this.startRuns(
      repo,
      p.headSha,
      { event: "pull_request", action, branch: p.baseRef },
      changed,
      (wf) =>
        this.createRun(repo, wf, {
          headBranch: p.headRef,
          headSha: p.headSha,
          // GITHUB_REF of a pull_request run: https://docs.github.com/en/actions/reference/workflows-and-actions/events-that-trigger-workflows#pull_request
          ref: `refs/pull/${pull.number}/merge`,
          event: "pull_request",
          inputs: {},
          actor,
          displayTitle: pull.title,
          pullRequests: [pull.number],
        }),
    );
  }

  /** A workflow by numeric id or file name, on the given ref. */
  async findWorkflow(
    repo: Repo,
    idOrFile: string,
    ref: string,
  ): Promise<(WorkflowFile & { id: number }) | undefined> {
    for (const f of await this.workflowFiles(repo, ref)) {
      const id = this.workflowId(repo, f.path);
      if (String(id) === idOrFile || f.path.split("/").pop() === idOrFile) {
        return { ...(await this.readWorkflow(repo, f)), id };
      }
    }
    return undefined;
  }

  /**
   * A dispatched run (workflow_dispatch), announced to the `onWorkflowDispatch` listeners. Its display
   * title is the workflow's `run-name:` with the dispatch's inputs in it, else the workflow's name
   * (https://docs.github.com/en/actions/reference/workflows-and-actions/workflow-syntax#run-name).
   */
  async dispatched(
    repo: Repo,
    wf: WorkflowRef & { runName?: string },
    fields: Pick<WorkflowRun, "headBranch" | "headSha" | "ref" | "inputs" | "actor">,
  ): Promise<WorkflowRun> {
    const title = wf.runName === undefined ? "" : runNameOf(wf.runName, fields).trim();
    const run = await this.createRun(repo, wf, {
      ...fields,
      event: "workflow_dispatch",
      ...(title ? { displayTitle: title } : {}),
    });
    for (const l of this.listeners) l({ ...run, repo: repo.fullName });
    return run;
  }

  /**
   * Runs of the default branch's workflows `on: repository_dispatch` whose `types` name the event type
   * (when they list any), even when sent with a GITHUB_TOKEN:
   * https://docs.github.com/en/actions/reference/workflows-and-actions/events-that-trigger-workflows#repository_dispatch
   */
  async repositoryDispatch(repo: Repo, eventType: string, actor: User): Promise<void> {
    const sha = await repo.git.resolveRef(`refs/heads/${repo.defaultBranch}`);
    if (!sha) return;
    for (const file of await this.workflowFiles(repo, sha)) {
      const wf = await this.readWorkflow(repo, file);
      const filters = parseOn(wf.on)?.get("repository_dispatch");
      if (!filters) continue;
      const types = filters.types === undefined ? undefined : [filters.types].flat().map(String);
      if (types && !types.includes(eventType)) continue;
      await this.createRun(
        repo,
        { id: this.workflowId(repo, wf.path), path: wf.path, name: wf.name },
        {
          headBranch: repo.defaultBranch,
          headSha: sha,
          ref: `refs/heads/${repo.defaultBranch}`,
          event: "repository_dispatch",
          inputs: {},
          actor,
          displayTitle: eventType,
        },
      );
    }
  }

  workflowId(repo: Repo, path: string): number {
    let id = repo.workflowIds.get(path);
    if (id === undefined) {
      id = this.w.state.nextId();
      repo.workflowIds.set(path, id);
    }
    return id;
  }

  /** Moves a run along and emits workflow_run / workflow_job webhooks like GitHub does. */
  async setStatus(
    repo: Repo,
    run: WorkflowRun,
    status: WorkflowRun["status"],
    conclusion?: string,
    sender?: User,
  ): Promise<void> {
    const now = nowIso();
    run.status = status;
    run.updatedAt = now;
    if (status === "in_progress") run.runStartedAt = now;
    run.conclusion = status === "completed" ? (conclusion ?? "success") : null;
    const action = status === "queued" ? "requested" : status;
    await this.emitRun(repo, run, action, sender);
  }

  async emitRun(repo: Repo, run: WorkflowRun, action: string, sender?: User): Promise<void> {
    const commit = await repo.git.readCommit(run.headSha);
    const repoJson = this.w.repoJson(repo);
    this.w.emit(
      repo,
      "workflow_run",
      {
        action,
        workflow: this.w.shapes.workflow(repo, run, run.createdAt),
        workflow_run: this.w.shapes.workflowRun(repo, run, repoJson, commit, this.pullsOf(repo, run)),
      },
      sender ?? run.actor,
    );
    const jobAction = run.status === "queued" ? "queued" : run.status;
    this.w.emit(
      repo,
      "workflow_job",
      { action: jobAction, workflow_job: this.w.shapes.workflowJob(repo, run) },
      sender ?? run.actor,
    );
  }

  /** The pull requests of a `pull_request` run, as the run's `pull_requests` lists them. */
  private pullsOf(repo: Repo, run: WorkflowRun) {
    return (run.pullRequests ?? []).flatMap((n) => {
      const i = repo.issues.get(n);
      if (!i?.pull) return [];
      const { headRef, headSha, baseRef, baseSha } = i.pull;
      return [{ id: i.id, number: n, headRef, headSha, baseRef, baseSha }];
    });
  }

  async runJson(repo: Repo, run: WorkflowRun) {
    return this.w.shapes.workflowRun(
      repo,
      run,
      this.w.repoJson(repo),
      await repo.git.readCommit(run.headSha),
      this.pullsOf(repo, run),
    );
  }
}

/** The run `run_id` names in the repository the path names. */
export function findRun(w: World, ctx: Ctx): { repo: Repo; run: WorkflowRun } {
  const repo = w.repo(ctx);
  const run = repo.runs.find((x) => x.id === Number(ctx.params.run_id));
  if (!run) throw notFound();
  return { repo, run };
}

/**
 * A dispatch's `run-name:` (its contexts are `github`, `inputs` and `vars`) with the expressions the
 * emulator knows evaluated: `inputs.<name>` (also as `github.event.inputs.<name>`), `github.actor`,
 * `github.ref_name`; any other expression reads as empty.
 */
function runNameOf(template: string, run: Pick<WorkflowRun, "headBranch" | "inputs" | "actor">): string {
  return template.replace(/\$\{\{\s*([^}]*?)\s*\}\}/g, (_, expr: string) => {
    const input = /^(?:github\.event\.)?inputs\.([A-Za-z_][\w-]*)$/.exec(expr)?.[1];
    if (input !== undefined) return String(run.inputs?.[input] ?? "");
    if (expr === "github.actor") return run.actor.login;
    if (expr === "github.ref_name") return run.headBranch ?? "";
    return "";
  });
}
