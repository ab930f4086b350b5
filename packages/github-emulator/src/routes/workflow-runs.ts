import { type Actions, findRun } from "../actions.ts";
import { HttpError, notFound } from "../http-error.ts";
import type { Ctx, Router } from "../router.ts";
import type { Repo } from "../state.ts";
import { paginate, type World } from "../world.ts";

/** Workflow runs: list (all, or a workflow's), get, cancel, re-run (https://docs.github.com/en/rest/actions/workflow-runs). */
export function registerWorkflowRunRoutes(r: Router, w: World, actions: Actions): void {
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
      workflow_runs: await Promise.all(page.body.map((x) => actions.runJson(repo, x))),
    };
    return { ...page, body };
  };

  r.on("GET /repos/{owner}/{repo}/actions/runs", (ctx) => listRuns(ctx, w.repo(ctx)));

  r.on("GET /repos/{owner}/{repo}/actions/workflows/{workflow_id}/runs", async (ctx) => {
    const repo = w.repo(ctx);
    const wf = await actions.findWorkflow(repo, String(ctx.params.workflow_id), repo.defaultBranch);
    const byRun = repo.runs.find(
      (x) =>
        String(x.workflowId) === String(ctx.params.workflow_id) ||
        x.workflowPath.endsWith(`/${ctx.params.workflow_id}`),
    );
    const id = wf?.id ?? byRun?.workflowId;
    if (id === undefined) throw notFound();
    return listRuns(ctx, repo, id);
  });

  r.on("GET /repos/{owner}/{repo}/actions/runs/{run_id}", async (ctx) => {
    const { repo, run } = findRun(w, ctx);
    return { status: 200, body: await actions.runJson(repo, run) };
  });

  r.on("POST /repos/{owner}/{repo}/actions/runs/{run_id}/cancel", async (ctx) => {
    const { repo, run } = findRun(w, ctx);
    w.repo(ctx, "write");
    if (run.status === "completed")
      throw new HttpError(409, "Cannot cancel a workflow run that is completed.");
    await actions.setStatus(repo, run, "completed", "cancelled", w.actingUser(ctx));
    return { status: 202, body: {} };
  });

  // https://docs.github.com/en/rest/actions/workflow-runs#re-run-a-workflow: 201, and the same run
  // goes again as its next attempt (`run_attempt`), caused by whoever asked (`triggering_actor`);
  // a run still going cannot be re-run (403).
  r.on("POST /repos/{owner}/{repo}/actions/runs/{run_id}/rerun", async (ctx) => {
    const { repo, run } = findRun(w, ctx);
    w.repo(ctx, "write");
    if (run.status !== "completed") throw new HttpError(403, "This workflow run is not completed yet.");
    const by = w.actingUser(ctx);
    run.runAttempt = (run.runAttempt ?? 1) + 1;
    run.triggeringActor = by;
    await actions.setStatus(repo, run, "queued", undefined, by);
    return { status: 201, body: {} };
  });
}
