import { findRun } from "../actions.ts";
import type { Router } from "../router.ts";
import type { World } from "../world.ts";

/** A run's jobs: one a run here (https://docs.github.com/en/rest/actions/workflow-jobs). */
export function registerWorkflowJobRoutes(r: Router, w: World): void {
  r.on("GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs", (ctx) => {
    const { repo, run } = findRun(w, ctx);
    return { status: 200, body: { total_count: 1, jobs: [w.shapes.workflowJob(repo, run)] } };
  });
}
