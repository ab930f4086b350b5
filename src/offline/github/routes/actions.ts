import { parse as parseYaml } from "yaml";
import { HttpError, notFound, validationFailed } from "../http-error.ts";
import type { Ctx, Router } from "../router.ts";
import { nowIso, type Repo, type User, type WorkflowRun } from "../state.ts";
import { paginate, type World } from "../world.ts";

type Body = Record<string, unknown>;

export type DispatchListener = (run: WorkflowRun & { repo: string }) => void;

/** GitHub Actions, as far as Fleet uses it: dispatch a workflow, follow and cancel its runs. */
export class Actions {
  readonly listeners: DispatchListener[] = [];

  constructor(private readonly w: World) {}

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
        workflow_run: this.w.shapes.workflowRun(repo, run, repoJson, commit),
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

  async runJson(repo: Repo, run: WorkflowRun) {
    return this.w.shapes.workflowRun(
      repo,
      run,
      this.w.repoJson(repo),
      await repo.git.readCommit(run.headSha),
    );
  }

  register(r: Router): void {
    const w = this.w;
    const workflowFiles = async (repo: Repo, ref: string) => {
      const commit = await repo.git.resolveCommitish(ref);
      if (!commit) return [];
      const entries = await repo.git.lsTree(`${commit}:.github/workflows`);
      return entries
        .filter((e) => e.type === "blob" && /\.ya?ml$/.test(e.path))
        .map((e) => ({ path: `.github/workflows/${e.path}`, sha: e.sha }));
    };
    const workflowName = async (repo: Repo, blob: string, path: string) => {
      try {
        const doc = parseYaml((await repo.git.readBlob(blob)).toString("utf8")) as {
          name?: unknown;
          on?: unknown;
        };
        return { name: typeof doc?.name === "string" ? doc.name : path, on: doc?.on };
      } catch {
        return { name: path, on: undefined };
      }
    };
    /** Finds a workflow by numeric id or file name, on the given ref. */
    const findWorkflow = async (repo: Repo, idOrFile: string, ref: string) => {
      for (const f of await workflowFiles(repo, ref)) {
        const id = this.workflowId(repo, f.path);
        if (String(id) === idOrFile || f.path.split("/").pop() === idOrFile) {
          return { ...f, id, ...(await workflowName(repo, f.sha, f.path)) };
        }
      }
      return undefined;
    };
    const workflowJson = (repo: Repo, wf: { id: number; path: string; name: string }) =>
      w.shapes.workflow(repo, { workflowId: wf.id, workflowPath: wf.path, name: wf.name }, repo.createdAt);

    r.on("GET /repos/{owner}/{repo}/actions/workflows", async (ctx) => {
      const repo = w.repo(ctx);
      const list = [];
      for (const f of await workflowFiles(repo, repo.defaultBranch)) {
        list.push(
          workflowJson(repo, {
            id: this.workflowId(repo, f.path),
            path: f.path,
            name: (await workflowName(repo, f.sha, f.path)).name,
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
      const triggers =
        typeof wf.on === "string"
          ? [wf.on]
          : Array.isArray(wf.on)
            ? wf.on
            : Object.keys((wf.on as object) ?? {});
      if (!triggers.includes("workflow_dispatch"))
        throw new HttpError(422, "Workflow does not have 'workflow_dispatch' trigger");
      const now = nowIso();
      const run: WorkflowRun = {
        id: w.state.nextId(),
        jobId: w.state.nextId(),
        runNumber: repo.runs.filter((x) => x.workflowId === wf.id).length + 1,
        workflowId: wf.id,
        workflowPath: wf.path,
        name: wf.name,
        headBranch: ref,
        headSha,
        event: "workflow_dispatch",
        status: "queued",
        conclusion: null,
        inputs: (b.inputs as Record<string, unknown>) ?? {},
        actor: w.actingUser(ctx),
        createdAt: now,
        updatedAt: now,
        runStartedAt: now,
      };
      repo.runs.push(run);
      await this.emitRun(repo, run, "requested");
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
  }
}
