import { notFound } from "../http-error.ts";
import type { Router } from "../router.ts";
import type { World } from "../world.ts";

/** Collaborators: whether someone is one, and their permission (https://docs.github.com/en/rest/collaborators/collaborators). */
export function registerCollaboratorRoutes(r: Router, w: World): void {
  r.on("GET /repos/{owner}/{repo}/collaborators/{username}/permission", (ctx) => {
    const repo = w.repo(ctx);
    const login = String(ctx.params.username);
    const known = w.state.users.get(login.toLowerCase());
    if (!known) throw notFound();
    const exact = w.state.permission(repo, login);
    // `permission` only knows the legacy levels; `role_name` carries the exact role.
    const legacy = exact === "maintain" ? "write" : exact === "triage" ? "read" : exact;
    return {
      status: 200,
      body: {
        permission: legacy,
        role_name: exact,
        user: { ...w.shapes.user(known), permissions: permissionFlags(exact), role_name: exact },
      },
    };
  });

  r.on("GET /repos/{owner}/{repo}/collaborators/{username}", (ctx) => {
    const repo = w.repo(ctx);
    const login = String(ctx.params.username).toLowerCase();
    const isCollab = repo.collaborators.has(login) || login === repo.owner.login.toLowerCase();
    if (!isCollab) throw notFound();
    return { status: 204 };
  });
}

function permissionFlags(p: string) {
  return {
    admin: p === "admin",
    maintain: ["admin", "maintain"].includes(p),
    push: ["admin", "maintain", "write"].includes(p),
    triage: ["admin", "maintain", "write", "triage"].includes(p),
    pull: p !== "none",
  };
}
