import { createHash, randomBytes } from "node:crypto";
import { zipSync } from "fflate";
import { parse as parseYaml } from "yaml";
import { HttpError, notFound, validationFailed } from "../http-error.ts";
import type { Ctx, Router } from "../router.ts";
import { type Artifact, type Issue, nowIso, type Repo, type User, type WorkflowRun } from "../state.ts";
import { hasSkipInstruction, parseOn, type TriggerFacts, triggers } from "../workflow-triggers.ts";
import { paginate, type WorkflowTriggers, type World } from "../world.ts";

type Body = Record<string, unknown>;

export type DispatchListener = (run: WorkflowRun & { repo: string }) => void;

/** A workflow file at a commit, with what its YAML says. */
interface WorkflowFile {
  path: string;
  sha: string;
  name: string;
  on: unknown;
}

/** How long a download URL from the artifact API works (GitHub: 1 minute). */
const DOWNLOAD_URL_TTL_MS = 60_000;
/** upload-artifact's default retention (GitHub: 90 days unless the repository sets less). */
const DEFAULT_RETENTION_DAYS = 90;

/**
 * GitHub Actions, as far as Fleet meets it: dispatch a workflow, follow and cancel its runs, the runs
 * that pushes and pull requests start (CI), the GITHUB_TOKEN settings, and run artifacts.
 */
export class Actions implements WorkflowTriggers {
  readonly listeners: DispatchListener[] = [];
  /** Signed artifact download URLs handed out by the API: token -> artifact and expiry. */
  private readonly downloads = new Map<string, { artifact: Artifact; expiresAt: number }>();

  constructor(private readonly w: World) {
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
      };
      return { ...file, name: typeof doc?.name === "string" ? doc.name : file.path, on: doc?.on };
    } catch {
      return { ...file, name: file.path, on: undefined };
    }
  }

  /** A new run of a workflow, recorded and announced (workflow_run.requested, workflow_job.queued). */
  private async createRun(
    repo: Repo,
    wf: { id: number; path: string; name: string },
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
    run: (wf: { id: number; path: string; name: string }) => Promise<unknown>,
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

  /** What actions/upload-artifact does on a runner: one zip of `files`, named, on the run. */
  async uploadArtifact(
    repo: Repo,
    run: WorkflowRun,
    name: string,
    files: Record<string, string | Uint8Array>,
    retentionDays = DEFAULT_RETENTION_DAYS,
  ): Promise<Artifact> {
    if (!name || /[":<>|*?\r\n\\/]/.test(name))
      throw new Error(
        `artifact name "${name}" is not valid: upload-artifact refuses " : < > | * ? \\ / and line breaks`,
      );
    if (repo.artifacts.some((a) => a.runId === run.id && a.name === name))
      throw new Error(
        `run ${run.id} already has an artifact named "${name}" (upload-artifact v4 names are unique per run)`,
      );
    const entries: Record<string, Uint8Array> = {};
    for (const [path, content] of Object.entries(files))
      entries[path] = typeof content === "string" ? new TextEncoder().encode(content) : content;
    const zip = Buffer.from(zipSync(entries));
    const now = Date.now();
    const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
    const artifact: Artifact = {
      id: this.w.state.nextId(),
      name,
      runId: run.id,
      zip,
      digest: `sha256:${createHash("sha256").update(zip).digest("hex")}`,
      createdAt: iso(now),
      expiresAt: iso(now + retentionDays * 86_400_000),
    };
    repo.artifacts.push(artifact);
    return artifact;
  }

  /** The zip behind a signed download URL (`/_emulator/artifacts/<token>`), while the URL is valid. */
  download(
    path: string,
  ): { status: number; body: Buffer | string; headers: Record<string, string> } | undefined {
    const m = /^\/_emulator\/artifacts\/([0-9a-f]+)\.zip$/.exec(path);
    if (!m) return undefined;
    const entry = this.downloads.get(m[1]!);
    const text = { "content-type": "text/plain; charset=utf-8" };
    if (!entry) return { status: 404, body: "The specified blob does not exist.\n", headers: text };
    if (entry.expiresAt < Date.now()) {
      this.downloads.delete(m[1]!);
      return {
        status: 403,
        body: "This download URL has expired: ask the API for a new one.\n",
        headers: text,
      };
    }
    return {
      status: 200,
      body: entry.artifact.zip,
      headers: {
        "content-type": "application/zip",
        "content-disposition": `attachment; filename=${entry.artifact.name}.zip`,
      },
    };
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

  register(r: Router): void {
    const w = this.w;
    /** Finds a workflow by numeric id or file name, on the given ref. */
    const findWorkflow = async (repo: Repo, idOrFile: string, ref: string) => {
      for (const f of await this.workflowFiles(repo, ref)) {
        const id = this.workflowId(repo, f.path);
        if (String(id) === idOrFile || f.path.split("/").pop() === idOrFile) {
          return { ...(await this.readWorkflow(repo, f)), id };
        }
      }
      return undefined;
    };
    const workflowJson = (repo: Repo, wf: { id: number; path: string; name: string }) =>
      w.shapes.workflow(repo, { workflowId: wf.id, workflowPath: wf.path, name: wf.name }, repo.createdAt);

    r.on("GET /repos/{owner}/{repo}/actions/workflows", async (ctx) => {
      const repo = w.repo(ctx);
      const list = [];
      for (const f of await this.workflowFiles(repo, repo.defaultBranch)) {
        list.push(
          workflowJson(repo, {
            id: this.workflowId(repo, f.path),
            path: f.path,
            name: (await this.readWorkflow(repo, f)).name,
          }),
        );
      }
      const page = paginate(ctx, w.shapes.api, list);
      return { ...page, body: { total_count: list.length, workflows: page.body } };
    });

    r.on("GET /repos/{owner}/{repo}/actions/workflows/{workflow_id}", async (ctx) => {
      const repo = w.repo(ctx);
      const wf = await findWorkflow(repo, String(ctx.params.workflow_id), repo.defaultBranch);
      if (!wf) throw notFound();
      return { status: 200, body: workflowJson(repo, wf) };
    });

    r.on("POST /repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches", async (ctx) => {
      const repo = w.repo(ctx, "write");
      const b = ctx.body as Body;
      const ref = String(b.ref).replace(/^refs\/heads\//, "");
      const headSha = await repo.git.resolveCommitish(ref);
      if (!headSha) throw validationFailed([], `No ref found for: ${ref}`);
      const wf = await findWorkflow(repo, String(ctx.params.workflow_id), ref);
      if (!wf) throw notFound();
      // workflow_dispatch starts a run even with a GITHUB_TOKEN (the documented exception).
      if (!parseOn(wf.on)?.has("workflow_dispatch"))
        throw new HttpError(422, "Workflow does not have 'workflow_dispatch' trigger");
      // GITHUB_REF of a workflow_dispatch run is the branch or tag dispatched on:
      // https://docs.github.com/en/actions/reference/workflows-and-actions/events-that-trigger-workflows#workflow_dispatch
      const fullRef = ref.startsWith("refs/")
        ? ref
        : (await repo.git.resolveRef(`refs/heads/${ref}`))
          ? `refs/heads/${ref}`
          : (await repo.git.resolveRef(`refs/tags/${ref}`))
            ? `refs/tags/${ref}`
            : `refs/heads/${ref}`;
      const run = await this.createRun(repo, wf, {
        headBranch: ref,
        headSha,
        ref: fullRef,
        event: "workflow_dispatch",
        inputs: (b.inputs as Record<string, unknown>) ?? {},
        actor: w.actingUser(ctx),
      });
      for (const l of this.listeners) l({ ...run, repo: repo.fullName });
      if (b.return_run_details === true) {
        return {
          status: 200,
          body: {
            workflow_run_id: run.id,
            run_url: `${w.shapes.api}/repos/${repo.fullName}/actions/runs/${run.id}`,
            html_url: `${w.shapes.html}/${repo.fullName}/actions/runs/${run.id}`,
          },
        };
      }
      return { status: 204 };
    });

    const listRuns = async (ctx: Ctx, repo: Repo, workflowId?: number) => {
      const q = ctx.params;
      const runs = repo.runs
        .filter(
          (x) =>
            (workflowId === undefined || x.workflowId === workflowId) &&
            (!q.status || x.status === q.status || x.conclusion === q.status) &&
            (!q.branch || x.headBranch === q.branch) &&
            (!q.event || x.event === q.event) &&
            (!q.head_sha || x.headSha === q.head_sha) &&
            (!q.actor || x.actor.login === q.actor),
        )
        .reverse();
      const page = paginate(ctx, w.shapes.api, runs);
      const body = {
        total_count: runs.length,
        workflow_runs: await Promise.all(page.body.map((x) => this.runJson(repo, x))),
      };
      return { ...page, body };
    };

    r.on("GET /repos/{owner}/{repo}/actions/runs", (ctx) => listRuns(ctx, w.repo(ctx)));

    r.on("GET /repos/{owner}/{repo}/actions/workflows/{workflow_id}/runs", async (ctx) => {
      const repo = w.repo(ctx);
      const wf = await findWorkflow(repo, String(ctx.params.workflow_id), repo.defaultBranch);
      const byRun = repo.runs.find(
        (x) =>
          String(x.workflowId) === String(ctx.params.workflow_id) ||
          x.workflowPath.endsWith(`/${ctx.params.workflow_id}`),
      );
      const id = wf?.id ?? byRun?.workflowId;
      if (id === undefined) throw notFound();
      return listRuns(ctx, repo, id);
    });

    const findRun = (ctx: Ctx) => {
      const repo = w.repo(ctx);
      const run = repo.runs.find((x) => x.id === Number(ctx.params.run_id));
      if (!run) throw notFound();
      return { repo, run };
    };

    r.on("GET /repos/{owner}/{repo}/actions/runs/{run_id}", async (ctx) => {
      const { repo, run } = findRun(ctx);
      return { status: 200, body: await this.runJson(repo, run) };
    });

    r.on("GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs", (ctx) => {
      const { repo, run } = findRun(ctx);
      return { status: 200, body: { total_count: 1, jobs: [w.shapes.workflowJob(repo, run)] } };
    });

    r.on("POST /repos/{owner}/{repo}/actions/runs/{run_id}/cancel", async (ctx) => {
      const { repo, run } = findRun(ctx);
      w.repo(ctx, "write");
      if (run.status === "completed")
        throw new HttpError(409, "Cannot cancel a workflow run that is completed.");
      await this.setStatus(repo, run, "completed", "cancelled", w.actingUser(ctx));
      return { status: 202, body: {} };
    });

    // A repository_dispatch: the webhook to apps, and runs of the default branch's workflows `on:
    // repository_dispatch` (whose `types` name the event_type, when they list any), even when sent
    // with a GITHUB_TOKEN: https://docs.github.com/en/rest/repos/repos#create-a-repository-dispatch-event
    // and https://docs.github.com/en/actions/reference/workflows-and-actions/events-that-trigger-workflows#repository_dispatch
    r.on("POST /repos/{owner}/{repo}/dispatches", async (ctx) => {
      const repo = w.repo(ctx, "write");
      const b = ctx.body as Body;
      const eventType = String(b.event_type);
      const actor = w.actingUser(ctx);
      w.emit(repo, "repository_dispatch", {
        action: eventType,
        branch: repo.defaultBranch,
        client_payload: (b.client_payload as Record<string, unknown> | undefined) ?? {},
      });
      const sha = await repo.git.resolveRef(`refs/heads/${repo.defaultBranch}`);
      if (!sha) return { status: 204 };
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
      return { status: 204 };
    });

    // The repository's GITHUB_TOKEN settings. Reading and writing them takes the administration
    // permission, which Fleet's app (and a GITHUB_TOKEN) lacks; people need admin.
    // https://docs.github.com/en/rest/actions/permissions#get-default-workflow-permissions-for-a-repository
    const settingsRepo = (ctx: Ctx): Repo => {
      const repo = w.repo(ctx, "admin");
      if (ctx.actor.kind === "installation")
        throw new HttpError(403, "Resource not accessible by integration", {
          documentation_url:
            "https://docs.github.com/rest/actions/permissions#get-default-workflow-permissions-for-a-repository",
        });
      return repo;
    };

    r.on("GET /repos/{owner}/{repo}/actions/permissions/workflow", (ctx) => {
      const s = settingsRepo(ctx).actionsSettings;
      return {
        status: 200,
        body: {
          default_workflow_permissions: s.defaultWorkflowPermissions,
          can_approve_pull_request_reviews: s.canApprovePullRequestReviews,
        },
      };
    });

    r.on("PUT /repos/{owner}/{repo}/actions/permissions/workflow", (ctx) => {
      const s = settingsRepo(ctx).actionsSettings;
      const b = (ctx.body as Body | undefined) ?? {};
      if (b.default_workflow_permissions !== undefined)
        s.defaultWorkflowPermissions = b.default_workflow_permissions as "read" | "write";
      if (b.can_approve_pull_request_reviews !== undefined)
        s.canApprovePullRequestReviews = b.can_approve_pull_request_reviews === true;
      return { status: 204 };
    });

    // Run artifacts: https://docs.github.com/en/rest/actions/artifacts
    const artifactJson = (repo: Repo, a: Artifact) => {
      const run = repo.runs.find((x) => x.id === a.runId);
      const api = `${w.shapes.api}/repos/${repo.fullName}/actions/artifacts/${a.id}`;
      return {
        id: a.id,
        node_id: w.shapes.nodeId("Artifact", a.id),
        name: a.name,
        size_in_bytes: a.zip.length,
        url: api,
        archive_download_url: `${api}/zip`,
        expired: Date.parse(a.expiresAt) <= Date.now(),
        created_at: a.createdAt,
        updated_at: a.createdAt,
        expires_at: a.expiresAt,
        digest: a.digest,
        workflow_run: run
          ? {
              id: run.id,
              repository_id: repo.id,
              head_repository_id: repo.id,
              head_branch: run.headBranch,
              head_sha: run.headSha,
            }
          : null,
      };
    };
    const listArtifacts = (ctx: Ctx, repo: Repo, runId?: number) => {
      const name = ctx.params.name === undefined ? undefined : String(ctx.params.name);
      let list = repo.artifacts.filter(
        (a) => (runId === undefined || a.runId === runId) && (name === undefined || a.name === name),
      );
      // Newest first, as GitHub lists them; `direction=asc` (run artifacts only) turns that around.
      list = [...list].reverse();
      if (ctx.params.direction === "asc") list.reverse();
      const page = paginate(ctx, w.shapes.api, list);
      return {
        ...page,
        body: { total_count: list.length, artifacts: page.body.map((a) => artifactJson(repo, a)) },
      };
    };
    const findArtifact = (ctx: Ctx) => {
      const repo = w.repo(ctx);
      const a = repo.artifacts.find((x) => x.id === Number(ctx.params.artifact_id));
      if (!a) throw notFound();
      return { repo, artifact: a };
    };

    r.on("GET /repos/{owner}/{repo}/actions/runs/{run_id}/artifacts", (ctx) => {
      const { repo, run } = findRun(ctx);
      return listArtifacts(ctx, repo, run.id);
    });

    r.on("GET /repos/{owner}/{repo}/actions/artifacts", (ctx) => listArtifacts(ctx, w.repo(ctx)));

    r.on("GET /repos/{owner}/{repo}/actions/artifacts/{artifact_id}", (ctx) => {
      const { repo, artifact } = findArtifact(ctx);
      return { status: 200, body: artifactJson(repo, artifact) };
    });

    r.on("DELETE /repos/{owner}/{repo}/actions/artifacts/{artifact_id}", (ctx) => {
      const { repo, artifact } = findArtifact(ctx);
      w.repo(ctx, "write");
      repo.artifacts.splice(repo.artifacts.indexOf(artifact), 1);
      return { status: 204 };
    });

    // A 302 to a short-lived URL that serves the zip without credentials, as GitHub answers:
    // https://docs.github.com/en/rest/actions/artifacts#download-an-artifact
    r.on("GET /repos/{owner}/{repo}/actions/artifacts/{artifact_id}/{archive_format}", (ctx) => {
      // Artifacts of public repositories too are for signed-in users only.
      if (ctx.actor.kind === "anonymous") throw new HttpError(401, "Requires authentication");
      const { artifact } = findArtifact(ctx);
      if (ctx.params.archive_format !== "zip") throw notFound();
      if (Date.parse(artifact.expiresAt) <= Date.now()) throw new HttpError(410, "Artifact has expired");
      const token = randomBytes(16).toString("hex");
      this.downloads.set(token, { artifact, expiresAt: Date.now() + DOWNLOAD_URL_TTL_MS });
      return { status: 302, headers: { location: `${w.shapes.api}/_emulator/artifacts/${token}.zip` } };
    });
  }
}
