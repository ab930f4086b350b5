import { HttpError } from "../http-error.ts";
import type { Body, Ctx, Router } from "../router.ts";
import type { Repo } from "../state.ts";
import type { World } from "../world.ts";

/**
 * The repository's GITHUB_TOKEN settings (https://docs.github.com/en/rest/actions/permissions#get-default-workflow-permissions-for-a-repository).
 * Reading and writing them takes the administration permission, which Fleet's app (and a
 * GITHUB_TOKEN) lacks; people need admin.
 */
export function registerActionsPermissionRoutes(r: Router, w: World): void {
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
}
