import type { Router } from "../router.ts";
import type { World } from "../world.ts";

/** A repository's metadata, with what the caller may do there (https://docs.github.com/en/rest/repos/repos). */
export function registerRepoRoutes(r: Router, w: World): void {
  r.on("GET /repos/{owner}/{repo}", (ctx) => {
    const repo = w.repo(ctx);
    const perm = ctx.actor.kind === "user" ? w.state.permission(repo, ctx.actor.user.login) : "read";
    const body = {
      ...w.repoJson(repo),
      permissions: {
        admin: perm === "admin",
        maintain: ["admin", "maintain"].includes(perm),
        push: ["admin", "maintain", "write"].includes(perm) || ctx.actor.kind === "installation",
        triage: perm !== "read" && perm !== "none",
        pull: true,
      },
      network_count: 0,
      subscribers_count: 0,
    };
    return { status: 200, body };
  });
}
