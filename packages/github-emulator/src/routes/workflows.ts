import type { Actions, WorkflowRef } from "../actions.ts";
import { HttpError, notFound, validationFailed } from "../http-error.ts";
import type { Body, Ctx, Reply, Router } from "../router.ts";
import type { Repo } from "../state.ts";
import { parseOn } from "../workflow-triggers.ts";
import { paginate, type World } from "../world.ts";

/** Workflows: list, get, dispatch (https://docs.github.com/en/rest/actions/workflows). */
export function registerWorkflowRoutes(r: Router, w: World, actions: Actions): void {
  r.on("GET /repos/{owner}/{repo}/actions/workflows", async (ctx) => {
    const repo = w.repo(ctx);
    const list = [];
    for (const f of await actions.workflowFiles(repo, repo.defaultBranch)) {
      const name = (await actions.readWorkflow(repo, f)).name;
      list.push(workflowJson(w, repo, { id: actions.workflowId(repo, f.path), path: f.path, name }));
    }
    const page = paginate(ctx, w.shapes.api, list);
    return { ...page, body: { total_count: list.length, workflows: page.body } };
  });

  r.on("GET /repos/{owner}/{repo}/actions/workflows/{workflow_id}", async (ctx) => {
    const repo = w.repo(ctx);
    const wf = await actions.findWorkflow(repo, String(ctx.params.workflow_id), repo.defaultBranch);
    if (!wf) throw notFound();
    return { status: 200, body: workflowJson(w, repo, wf) };
  });

  r.on("POST /repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches", (ctx) =>
    dispatchWorkflow(w, actions, ctx),
  );
}

function workflowJson(w: World, repo: Repo, wf: WorkflowRef) {
  return w.shapes.workflow(repo, { workflowId: wf.id, workflowPath: wf.path, name: wf.name }, repo.createdAt);
}

/**
 * GITHUB_REF of a workflow_dispatch run: the branch or tag dispatched on
 * (https://docs.github.com/en/actions/reference/workflows-and-actions/events-that-trigger-workflows#workflow_dispatch).
 */
async function dispatchedRef(repo: Repo, ref: string): Promise<string> {
  if (ref.startsWith("refs/")) return ref;
  if (await repo.git.resolveRef(`refs/heads/${ref}`)) return `refs/heads/${ref}`;
  if (await repo.git.resolveRef(`refs/tags/${ref}`)) return `refs/tags/${ref}`;
  return `refs/heads/${ref}`;
}

async function dispatchWorkflow(w: World, actions: Actions, ctx: Ctx): Promise<Reply> {
  const repo = w.repo(ctx, "write");
  const b = ctx.body as Body;
  const ref = String(b.ref).replace(/^refs\/heads\//, "");
  const headSha = await repo.git.resolveCommitish(ref);
  if (!headSha) throw validationFailed([], `No ref found for: ${ref}`);
  const wf = await actions.findWorkflow(repo, String(ctx.params.workflow_id), ref);
  if (!wf) throw notFound();
  // workflow_dispatch starts a run even with a GITHUB_TOKEN (the documented exception).
  if (!parseOn(wf.on)?.has("workflow_dispatch"))
    throw new HttpError(422, "Workflow does not have 'workflow_dispatch' trigger");
  const run = await actions.dispatched(repo, wf, {
    headBranch: ref,
    headSha,
    ref: await dispatchedRef(repo, ref),
    inputs: (b.inputs as Record<string, unknown>) ?? {},
    actor: w.actingUser(ctx),
  });
  if (b.return_run_details !== true) return { status: 204 };
  return {
    status: 200,
    body: {
      workflow_run_id: run.id,
      run_url: `${w.shapes.api}/repos/${repo.fullName}/actions/runs/${run.id}`,
      html_url: `${w.shapes.html}/${repo.fullName}/actions/runs/${run.id}`,
    },
  };
}
