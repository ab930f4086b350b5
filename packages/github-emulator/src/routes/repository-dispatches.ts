import type { Actions } from "../actions.ts";
import type { Body, Router } from "../router.ts";
import type { World } from "../world.ts";

/**
 * A repository_dispatch (https://docs.github.com/en/rest/repos/repos#create-a-repository-dispatch-event):
 * the webhook to apps, and the runs of the default branch's workflows `on: repository_dispatch`.
 */
export function registerRepositoryDispatchRoutes(r: Router, w: World, actions: Actions): void {
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
    await actions.repositoryDispatch(repo, eventType, actor);
    return { status: 204 };
  });
}
