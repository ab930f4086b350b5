import { HttpError, notFound } from "../http-error.ts";
import type { Router } from "../router.ts";
import { paginate, type World } from "../world.ts";

/** Repository metadata, collaborators and branches; rate limit status. */
export function registerRepoRoutes(
  r: Router,
  w: World,
  rateStatus: (ctx: Parameters<Parameters<Router["on"]>[1]>[0]) => unknown,
): void {
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

  r.on("GET /repos/{owner}/{repo}/branches", async (ctx) => {
    const repo = w.repo(ctx);
    const refs = await repo.git.listRefs("refs/heads/");
    const list = refs.map((x) => {
      const name = x.ref.slice("refs/heads/".length);
      return {
        name,
        commit: { sha: x.sha, url: `${w.shapes.api}/repos/${repo.fullName}/commits/${x.sha}` },
        protected: false,
      };
    });
    return paginate(ctx, w.shapes.api, list);
  });

  r.on("GET /repos/{owner}/{repo}/branches/{branch}", async (ctx) => {
    const repo = w.repo(ctx);
    const name = String(ctx.params.branch);
    const sha = await repo.git.resolveRef(`refs/heads/${name}`);
    if (!sha) throw new HttpError(404, "Branch not found");
    const c = (await repo.git.readCommit(sha))!;
    const api = `${w.shapes.api}/repos/${repo.fullName}`;
    return {
      status: 200,
      body: {
        name,
        commit: {
          sha,
          node_id: w.shapes.nodeId("Commit", 1),
          commit: {
            author: c.author,
            committer: c.committer,
            message: c.message,
            tree: { sha: c.tree, url: `${api}/git/trees/${c.tree}` },
            url: `${api}/git/commits/${sha}`,
            comment_count: 0,
          },
          url: `${api}/commits/${sha}`,
          html_url: `${w.shapes.html}/${repo.fullName}/commit/${sha}`,
          comments_url: `${api}/commits/${sha}/comments`,
          author: null,
          committer: null,
          parents: c.parents.map((p) => ({ sha: p, url: `${api}/commits/${p}` })),
        },
        _links: { self: `${api}/branches/${name}`, html: `${w.shapes.html}/${repo.fullName}/tree/${name}` },
        protected: false,
        protection: {
          enabled: false,
          required_status_checks: { enforcement_level: "off", contexts: [], checks: [] },
        },
        protection_url: `${api}/branches/${name}/protection`,
      },
    };
  });

  r.on("GET /rate_limit", (ctx) => ({ status: 200, body: rateStatus(ctx) }));
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
