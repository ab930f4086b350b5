import { HttpError, notFound } from "../http-error.ts";
import type { OnRefMoved } from "../ref-events.ts";
import type { Body, Ctx, Reply, Router } from "../router.ts";
import { checkRulesets } from "../rulesets.ts";
import type { Repo } from "../state.ts";
import type { World } from "../world.ts";

/** Git references: read, list by prefix, create, move (compare-and-swap), delete (https://docs.github.com/en/rest/git/refs). */
export function registerGitRefRoutes(r: Router, w: World, onRefMoved: OnRefMoved): void {
  r.on("GET /repos/{owner}/{repo}/git/ref/{ref}", async (ctx) => {
    const repo = w.repo(ctx);
    const ref = fullRef(ctx.params.ref);
    const exact = await repo.git.readRef(ref);
    if (!exact) throw notFound();
    return { status: 200, body: refJson(w, repo, exact.ref, exact.sha, exact.type) };
  });

  r.on("GET /repos/{owner}/{repo}/git/matching-refs/{ref}", async (ctx) => {
    const repo = w.repo(ctx);
    const prefix = fullRef(ctx.params.ref);
    const refs = (await repo.git.listRefs("refs/")).filter((x) => x.ref.startsWith(prefix));
    return { status: 200, body: refs.map((x) => refJson(w, repo, x.ref, x.sha, x.type)) };
  });

  r.on("POST /repos/{owner}/{repo}/git/refs", async (ctx) => {
    const repo = w.repo(ctx, "write");
    const b = ctx.body as Body;
    const ref = String(b.ref);
    const sha = String(b.sha);
    if (!ref.startsWith("refs/") || ref.split("/").length < 3)
      throw new HttpError(422, "Reference name must start with 'refs/' and have at least two slashes.");
    return repo.git.exclusive(async () => {
      const type = await repo.git.objectType(sha);
      if (!type) throw new HttpError(422, "Object does not exist");
      if (!(await repo.git.updateRef(ref, sha, ""))) throw new HttpError(422, "Reference already exists");
      await onRefMoved(repo, ref, null, sha);
      return {
        status: 201,
        body: refJson(w, repo, ref, sha, type),
        headers: { location: gitApi(w, repo, ref) },
      };
    });
  });

  r.on("PATCH /repos/{owner}/{repo}/git/refs/{ref}", (ctx) => updateRef(w, ctx, onRefMoved));

  r.on("DELETE /repos/{owner}/{repo}/git/refs/{ref}", async (ctx) => {
    const repo = w.repo(ctx, "write");
    const ref = fullRef(ctx.params.ref);
    return repo.git.exclusive(async () => {
      const current = await repo.git.resolveRef(ref);
      if (!current) throw new HttpError(422, "Reference does not exist");
      await repo.git.deleteRef(ref);
      await onRefMoved(repo, ref, current, null);
      return { status: 204 };
    });
  });
}

const gitApi = (w: World, repo: Repo, path: string) => `${w.shapes.api}/repos/${repo.fullName}/git/${path}`;

function refJson(w: World, repo: Repo, ref: string, sha: string, type: string) {
  return {
    ref,
    node_id: w.shapes.nodeId("Ref", ref.length),
    url: gitApi(w, repo, ref),
    object: { type, sha, url: gitApi(w, repo, `${type}s/${sha}`) },
  };
}

const DOCS = "https://docs.github.com/rest/git/refs";

/** `heads/x` or `refs/heads/x` as a full ref name. */
const fullRef = (ref: unknown) => `refs/${String(ref).replace(/^refs\//, "")}`;

/** Moves a ref: a fast forward, or anything with `force`; git's own compare-and-swap stays in force. */
async function updateRef(w: World, ctx: Ctx, onRefMoved: OnRefMoved): Promise<Reply> {
  const repo = w.repo(ctx, "write");
  const ref = fullRef(ctx.params.ref);
  const b = ctx.body as Body;
  const sha = String(b.sha);
  return repo.git.exclusive(async () => {
    const current = await repo.git.resolveRef(ref);
    if (!current) throw new HttpError(422, "Reference does not exist");
    checkRulesets(repo, w.actingUser(ctx).login, ref, `${DOCS}#update-a-reference`);
    const type = await repo.git.objectType(sha);
    if (!type) throw new HttpError(422, "Object does not exist");
    if (b.force !== true && current !== sha && !(await repo.git.isAncestor(current, sha)))
      throw new HttpError(422, "Update is not a fast forward");
    // `current` as the expected old value keeps git's own CAS in force as well.
    if (!(await repo.git.updateRef(ref, sha, current)))
      throw new HttpError(422, "Reference cannot be updated");
    if (current !== sha) await onRefMoved(repo, ref, current, sha);
    return { status: 200, body: refJson(w, repo, ref, sha, type) };
  });
}
