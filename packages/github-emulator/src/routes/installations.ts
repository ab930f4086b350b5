import { HttpError } from "../http-error.ts";
import { grantReaches } from "../installation-token.ts";
import type { Router } from "../router.ts";
import { paginate, type World } from "../world.ts";

/** What an installation token reaches (https://docs.github.com/en/rest/apps/installations). */
export function registerInstallationRoutes(r: Router, w: World): void {
  // https://docs.github.com/en/rest/apps/installations#list-repositories-accessible-to-the-app-installation:
  // the repositories the token reaches (a narrowed token lists only its own).
  r.on("GET /installation/repositories", (ctx) => {
    if (ctx.actor.kind !== "installation")
      throw new HttpError(403, "Resource not accessible by personal access token");
    const actor = ctx.actor;
    const i = w.state.installations.get(actor.installationId)!;
    const repos = [...i.repos]
      .map((n) => w.state.repos.get(n.toLowerCase())!)
      .filter(Boolean)
      .filter((x) => !actor.grant || grantReaches(actor.grant, x))
      .filter((x) => !actor.workflow || actor.workflow.repo.toLowerCase() === x.fullName.toLowerCase());
    const page = paginate(
      ctx,
      w.shapes.api,
      repos.map((x) => w.repoJson(x)),
    );
    return {
      ...page,
      body: { total_count: repos.length, repository_selection: "selected", repositories: page.body },
    };
  });
}
