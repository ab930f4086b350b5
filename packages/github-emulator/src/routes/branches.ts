import { HttpError } from "../http-error.ts";
import type { Router } from "../router.ts";
import { paginate, type World } from "../world.ts";

/** Branches: list, and one with its head commit (https://docs.github.com/en/rest/branches/branches). */
export function registerBranchRoutes(r: Router, w: World): void {
  r.on("GET /repos/{owner}/{repo}/branches", async (ctx) => {
    const repo = w.repo(ctx);
    const refs = await repo.git.listRefs("refs/heads/");
    const list = refs.map((x) => ({
      name: x.ref.slice("refs/heads/".length),
      commit: { sha: x.sha, url: `${w.shapes.api}/repos/${repo.fullName}/commits/${x.sha}` },
      protected: false,
    }));
    return paginate(ctx, w.shapes.api, list);
  });

  r.on("GET /repos/{owner}/{repo}/branches/{branch}", async (ctx) => {
    const repo = w.repo(ctx);
    const name = String(ctx.params.branch);
    const sha = await repo.git.resolveRef(`refs/heads/${name}`);
    if (!sha) throw new HttpError(404, "Branch not found");
    const api = `${w.shapes.api}/repos/${repo.fullName}`;
    return {
      status: 200,
      body: {
        name,
        commit: w.shapes.commit(repo, (await repo.git.readCommit(sha))!),
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
}
